"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path

# tojson escapes quotes, so any answer (an apostrophe in a project name) survives as data, never as code.
ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")
# How this hook tells post_gen_project.py where the template is: cookiecutter gives a hook nothing to pass on
# but the project directory both hooks run in. post_gen_project.py reads it and removes it first thing.
TEMPLATE_DIR_NOTE = ".template-dir"


def template_dir() -> Path:
    """The template checkout. cookiecutter and cruft run every hook from inside it, so it is this hook's
    parent's working directory; _repo_dir alone is not enough (cruft omits it; `cookiecutter .` makes it
    relative to a directory the hook does not run in). Without /proc: _repo_dir, against the shell's cwd.
    The one copy: cookiecutter renders hooks without a Jinja loader, so no include can share it, and a hook
    can import from the template only once it has found it; post_gen_project.py reads TEMPLATE_DIR_NOTE."""
    try:
        return Path(os.readlink(f"/proc/{os.getppid()}/cwd"))
    except OSError:
        return Path(os.environ.get("PWD", "."), ANSWERS.get("_repo_dir") or ".").resolve()


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


REPO_DIR = template_dir()
# The rules live once, in the baked project's rules.py: the template's copy of it (braces split so that
# cookiecutter does not render the directory's name); questions.py (what only the answers need) and baking.py
# (the answers' names) in the template's hooks.
PROJECT_TEMPLATE = REPO_DIR / ("{" + "{cookiecutter.project_slug}" + "}")
sys.path.insert(0, str(PROJECT_TEMPLATE))
sys.path.insert(0, str(REPO_DIR / "hooks"))
import baking  # noqa: E402
import questions  # noqa: E402
import rules  # noqa: E402  (found through the template's own project directory)

try:
    checked = questions.validate(baking.public_answers(ANSWERS))
    baking.check_module_address(ANSWERS, REPO_DIR)  # where terraform/main.tf will call the modules
except (rules.RuleError, baking.ModuleSourceError) as error:
    # One line: cookiecutter's own report of the failed hook follows it (its logger, not this hook).
    print(f"ERROR: {error}; {bake_again_hint(save_answers())}", file=sys.stderr)
    sys.exit(1)
for warning in checked["warnings"]:
    print(f"WARNING: {warning}", file=sys.stderr)
Path(TEMPLATE_DIR_NOTE).write_text(str(REPO_DIR), encoding="utf-8")
