"""Shape the baked project to the chosen options, then record the answers."""

import json
import os
import sys
from pathlib import Path

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
import baking  # noqa: E402  (found through the template's own hooks directory)

baking.finish_bake(Path.cwd(), REPO_DIR, ANSWERS)
