"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import os
import shlex
import sys
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


def replay_file() -> Path | None:
    """The file in which cookiecutter saved these answers, if it did: cookiecutter.main writes
    <replay_dir>/<template directory name>.json before it generates anything, so before this hook runs;
    replay_dir is ~/.cookiecutter_replay/ unless the user's config (COOKIECUTTER_CONFIG, ~/.cookiecutterrc)
    moves it. cruft saves none. Named only when it holds exactly these answers."""
    try:
        from cookiecutter.config import get_user_config
        from cookiecutter.replay import get_file_name

        path = Path(get_file_name(get_user_config()["replay_dir"], REPO_DIR.name))
        saved = json.loads(path.read_text(encoding="utf-8"))["cookiecutter"]
    except (ImportError, OSError, ValueError, KeyError, TypeError):
        return None
    return path if saved == ANSWERS else None


def bake_again_hint(path: Path) -> str:
    # The template as the user gave it, in the shell they gave it in; the output directory as cookiecutter resolved it.
    command = ["cookiecutter", "--replay-file", str(path), "-o", ANSWERS["_output_dir"], ANSWERS["_template"]]
    return f"Your answers are saved in {path}: correct the one above there, then bake again with: {shlex.join(command)}"


REPO_DIR = template_dir()
# The rules live once, in the baked project's rules.py: the template's copy of it (braces split so that
# cookiecutter does not render the directory's name).
PROJECT_TEMPLATE = REPO_DIR / ("{" + "{cookiecutter.project_slug}" + "}")
sys.path.insert(0, str(PROJECT_TEMPLATE))
import rules  # noqa: E402  (found through the template's own project directory)

try:
    checked = rules.validate(ANSWERS)
except rules.RuleError as error:
    print(f"ERROR: {error}", file=sys.stderr)
    saved = replay_file()
    if saved is not None:
        print(bake_again_hint(saved), file=sys.stderr)
    sys.exit(1)
for warning in checked["warnings"]:
    print(f"WARNING: {warning}", file=sys.stderr)
Path(TEMPLATE_DIR_NOTE).write_text(str(REPO_DIR), encoding="utf-8")
