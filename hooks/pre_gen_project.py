"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import os
import sys
from pathlib import Path

# tojson escapes quotes, so any answer (an apostrophe in a project name) survives as data, never as code.
ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

# cookiecutter passes _repo_dir; cruft does not, but runs every hook, as cookiecutter does, from inside
# the template (its own checkout of the right commit): the working directory of this hook's parent (Linux /proc).
REPO_DIR = Path(ANSWERS.get("_repo_dir") or os.readlink(f"/proc/{os.getppid()}/cwd"))
sys.path.insert(0, str(REPO_DIR / "hooks"))
import rules  # noqa: E402  (found through the template's own hooks directory)

try:
    rules.validate(ANSWERS)
except rules.RuleError as error:
    print(f"ERROR: {error}", file=sys.stderr)
    sys.exit(1)
