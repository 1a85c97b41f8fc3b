"""Refuse a bake with a one-line reason before anything is written (cookiecutter then removes the output)."""

import json
import sys
from pathlib import Path

# tojson escapes quotes, so any answer (an apostrophe in a project name) survives as data, never as code.
ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

sys.path.insert(0, str(Path(ANSWERS["_repo_dir"]) / "hooks"))
import rules  # noqa: E402  (found through the template's own hooks directory)

try:
    rules.validate(ANSWERS)
except rules.RuleError as error:
    print(f"ERROR: {error}", file=sys.stderr)
    sys.exit(1)
