"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# tojson escapes quotes, so any answer (an apostrophe in a project name) survives as data, never as code.
ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")
# How this hook tells post_gen_project.py where the template is: cookiecutter gives a hook nothing to pass on
# but the project directory both hooks run in. post_gen_project.py reads it and removes it first thing.
TEMPLATE_DIR_NOTE = ".template-dir"


# The second line of the note when this hook made the checkout (under cruft): post_gen_project.py removes it.
MADE_HERE = "made by the hook"


class TemplateNotFound(Exception):
    """cookiecutter's context names no template checkout this hook can read."""


def holds_the_template(path: Path) -> bool:
    return (path / "cookiecutter.json").is_file() and (path / "hooks" / "baking.py").is_file()


def template_dir() -> tuple[Path, bool]:
    """The template checkout, and whether this hook made it. A hook runs in the project's directory, so it learns
    the template from cookiecutter's context (cookiecutter/main.py), on any OS: `_repo_dir`, absolute (a clone of
    a URL, an absolute path) or relative to where cookiecutter started, which is the shell's $PWD
    (`cookiecutter .`). cruft passes no `_repo_dir`, only `_template` and `_commit` (cruft/_commands/utils/
    cookiecutter.py), and checks out into a directory it names to no hook: a checkout of those, made here with git
    (which cruft runs too). The one copy: cookiecutter renders hooks without a Jinja loader, so no include can share
    it, and a hook can import from the template only once it has found it; post_gen_project.py reads the note."""
    repo_dir = str(ANSWERS.get("_repo_dir") or "")
    if repo_dir:
        shell_dir = os.environ.get("PWD", "")
        path = Path(shell_dir, repo_dir)  # an absolute _repo_dir is itself
        if holds_the_template(path):
            return path.resolve(), False
        raise TemplateNotFound(
            f"_repo_dir={repo_dir!r}: no template there from the shell's directory (PWD={shell_dir!r}); "
            "give cookiecutter the template's absolute path"
        )
    template, commit = str(ANSWERS.get("_template") or ""), str(ANSWERS.get("_commit") or "")
    if not (template and commit):
        raise TemplateNotFound(f"_repo_dir='', _template={template!r}, _commit={commit!r}: no template to read")
    path = Path(tempfile.mkdtemp(prefix="template-"))
    for command in (["clone", "--quiet", "--no-checkout", template, str(path)], ["checkout", "--quiet", commit]):
        result = subprocess.run(["git", "-C", str(path), *command], capture_output=True, text=True, check=False)
        if result.returncode != 0:
            shutil.rmtree(path, ignore_errors=True)
            said = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise TemplateNotFound(f"_template={template!r}, _commit={commit!r}: git {command[0]} failed: {said}")
    if not holds_the_template(path):  # cruft --directory: the template in a sub-directory the context does not name
        shutil.rmtree(path, ignore_errors=True)
        raise TemplateNotFound(f"_template={template!r}: no cookiecutter.json and hooks/ at its top")
    return path, True


def save_answers() -> Path:
    """A replay file of these answers that no other bake overwrites: cookiecutter's own
    (<replay_dir>/<template directory name>.json) is rewritten by the next bake of the same template, and cruft
    saves none. Same format as cookiecutter's (cookiecutter/replay.py: {"cookiecutter": answers})."""
    slug = str(ANSWERS.get("project_slug") or "bake")
    handle, name = tempfile.mkstemp(prefix=f"{slug}-answers-", suffix=".json")
    with os.fdopen(handle, "w", encoding="utf-8") as file:
        json.dump({"cookiecutter": ANSWERS}, file, indent=2, ensure_ascii=False)
    return Path(name)


def bake_again_hint(path: Path) -> str:
    """Where the answers are and, when cookiecutter says where it bakes from and to, the command to bake again."""
    if not (ANSWERS.get("_template") and ANSWERS.get("_output_dir")):
        return f"your answers are saved in {path}"
    # The template as the user gave it, in the shell they gave it in; the output directory as cookiecutter resolved it.
    command = ["cookiecutter", "--replay-file", str(path), "-o", ANSWERS["_output_dir"], ANSWERS["_template"]]
    return f"your answers are saved in {path}: correct it there, then bake again with: {shlex.join(command)}"


def refuse(error: Exception) -> None:
    # One line: cookiecutter's own report of the failed hook follows it (its logger, not this hook).
    print(f"ERROR: {error}; {bake_again_hint(save_answers())}", file=sys.stderr)
    sys.exit(1)


try:
    REPO_DIR, made_here = template_dir()
except TemplateNotFound as error:
    refuse(error)
# The rules live once, in the baked project's rules.py: the template's copy of it (braces split so that
# cookiecutter does not render the directory's name); questions.py (what only the answers need) and baking.py
# (the answers' names) in the template's hooks; the deploy-time schedule rules in the template's copy of the tools
# package a bake pins (packages/scheduled-dedup-tools), first on the path: never another installed release of it.
PROJECT_TEMPLATE = REPO_DIR / ("{" + "{cookiecutter.project_slug}" + "}")
sys.path.insert(0, str(PROJECT_TEMPLATE))
sys.path.insert(0, str(REPO_DIR / "packages" / "scheduled-dedup-tools" / "src"))
sys.path.insert(0, str(REPO_DIR / "hooks"))
import baking  # noqa: E402
import questions  # noqa: E402
import rules  # noqa: E402  (found through the template's own project directory)

try:
    checked = questions.validate(baking.public_answers(ANSWERS))
    baking.check_module_address(ANSWERS, REPO_DIR)  # where terraform/main.tf will call the modules
except (rules.RuleError, baking.ModuleSourceError) as error:
    if made_here:
        shutil.rmtree(REPO_DIR, ignore_errors=True)
    refuse(error)
for warning in checked["warnings"]:
    print(f"WARNING: {warning}", file=sys.stderr)
Path(TEMPLATE_DIR_NOTE).write_text(f"{REPO_DIR}\n{MADE_HERE if made_here else ''}\n", encoding="utf-8")
