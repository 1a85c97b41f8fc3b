"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import os
import sys
from pathlib import Path

# tojson escapes quotes, so any answer (an apostrophe in a project name) survives as data, never as code.
ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")


def template_dir() -> Path:
    """The template checkout. cookiecutter and cruft run every hook from inside it, so it is this hook's
    parent's working directory; _repo_dir alone is not enough (cruft omits it; `cookiecutter .` makes it
    relative to a directory the hook does not run in). Without /proc: _repo_dir, against the shell's cwd."""
    try:
        return Path(os.readlink(f"/proc/{os.getppid()}/cwd"))
    except OSError:
        return Path(os.environ.get("PWD", "."), ANSWERS.get("_repo_dir") or ".").resolve()


REPO_DIR = template_dir()
sys.path.insert(0, str(REPO_DIR / "hooks"))
import rules  # noqa: E402  (found through the template's own hooks directory)

try:
    checked = rules.validate(ANSWERS)
except rules.RuleError as error:
    print(f"ERROR: {error}", file=sys.stderr)
    sys.exit(1)
for warning in checked["warnings"]:
    print(f"WARNING: {warning}", file=sys.stderr)
