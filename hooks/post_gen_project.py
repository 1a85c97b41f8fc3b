"""Shape the baked project to the chosen options, then record the answers."""

import json
import shutil
import sys
from pathlib import Path

ANSWERS = json.loads(r"""{{ cookiecutter | tojson }}""")
# Where the template is, as pre_gen_project.py's template_dir() found it and left it in the project directory
# both hooks run in (pre_gen_project.TEMPLATE_DIR_NOTE): removed before anything else, so no bake keeps it. Its
# second line says the hook made that checkout (pre_gen_project.MADE_HERE, under cruft): removed once done.
TEMPLATE_DIR_NOTE = Path(".template-dir")
repo_dir, made_here = TEMPLATE_DIR_NOTE.read_text(encoding="utf-8").splitlines()
REPO_DIR = Path(repo_dir)
TEMPLATE_DIR_NOTE.unlink()
sys.path.insert(0, str(REPO_DIR / "hooks"))
sys.path.insert(1, str(REPO_DIR / ("{" + "{cookiecutter.project_slug}" + "}")))  # rules.py
sys.path.insert(0, str(REPO_DIR / "packages" / "scheduled-dedup-tools" / "src"))  # its schedule rules, as pre-gen's
import baking  # noqa: E402  (found through the template's own hooks directory)

try:
    baking.finish_bake(Path.cwd(), REPO_DIR, ANSWERS)  # the answers and the modules' address: checked by pre_gen
finally:
    if made_here:
        shutil.rmtree(REPO_DIR, ignore_errors=True)
