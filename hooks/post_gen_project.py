"""Shape the baked project to the chosen options, then record the answers."""

import json
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

sys.path.insert(0, str(Path(ANSWERS["_repo_dir"]) / "hooks"))
import baking  # noqa: E402  (found through the template's own hooks directory)

baking.finish_bake(Path.cwd(), Path(ANSWERS["_repo_dir"]), ANSWERS)
