"""Shape the baked project to the chosen options, then record the answers."""

import json
import os
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")

# cookiecutter passes _repo_dir; cruft does not, but runs every hook, as cookiecutter does, from inside
# the template (its own checkout of the right commit): the working directory of this hook's parent (Linux /proc).
REPO_DIR = Path(ANSWERS.get("_repo_dir") or os.readlink(f"/proc/{os.getppid()}/cwd"))
sys.path.insert(0, str(REPO_DIR / "hooks"))
import baking  # noqa: E402  (found through the template's own hooks directory)

baking.finish_bake(Path.cwd(), REPO_DIR, ANSWERS)
