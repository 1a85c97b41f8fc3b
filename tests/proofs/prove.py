"""Lay the template's proofs into a copy of a bake and run them there (`make proofs BAKE=<dir>`).

    python tests/proofs/prove.py BAKE [PYTEST_ARGS...]

A bake keeps a fast contract test of the protocol, its configuration's tests and an example test of the work;
what proves the protocol lives here, in the template: its unit tests (keys, settings, schedules, the acceptance
window, daylight saving), the audit, the tools, the cost model, the fault, outage, store-error, timeout, load,
fuzz and window tests, their harness (real functions-framework servers, a Firestore that fails on purpose) and
the module's Terraform test. They run
inside a copy of the bake so that its conftest and modules apply -- a user who changed the protocol proves
their own. Laid in: test_*.py -> tests/, harness/ -> tests/harness/, terraform/ -> terraform/tests/
(rendered with the bake's recorded answers, .cookiecutter.json; one that renders empty, another target's, is not
laid), and the template's terraform/modules/ -> terraform/modules/: a Terraform test runs a module only from a
local path (Terraform's "Tests" page, Modules), and the bake calls them at a pinned address. The bake itself is
never written.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from cookiecutter.environment import StrictEnvironment
from jinja2 import FileSystemLoader

PROOFS = Path(__file__).resolve().parent
MODULES = Path("terraform") / "modules"
UNCOPIED = shutil.ignore_patterns(".git", ".venv*", ".terraform", "__pycache__", ".pytest_cache", "node_modules")
PLACES = {"harness": Path("tests") / "harness", "terraform": Path("terraform") / "tests"}


def proof_files() -> list[Path]:
    """The proofs, relative to tests/proofs/ (this runner excluded)."""
    return sorted(
        path.relative_to(PROOFS)
        for path in PROOFS.rglob("*")
        if path.is_file()
        and path.suffix in (".py", ".hcl")
        and path.name != "prove.py"
        and "__pycache__" not in path.parts
    )


def lay(bake: Path, into: Path) -> Path:
    """A copy of `bake` at `into` with the proofs laid in; returns the copy."""
    answers = json.loads((bake / ".cookiecutter.json").read_text())
    shutil.copytree(bake, into, ignore=UNCOPIED, symlinks=True)
    shutil.copytree(PROOFS.parents[1] / MODULES, into / MODULES, ignore=UNCOPIED)
    # The loader serves `{% include %}` of proof fragments (*.jinja: never laid in themselves).
    environment = StrictEnvironment(
        context={"cookiecutter": answers}, keep_trailing_newline=True, loader=FileSystemLoader(PROOFS)
    )
    for relative in proof_files():
        text = (PROOFS / relative).read_text()
        if "{{" in text or "{%" in text:
            text = environment.from_string(text).render(cookiecutter=answers)
        if not text.strip():
            continue
        place = PLACES.get(relative.parts[0]) if len(relative.parts) > 1 else None
        target = into / (place / relative.name if place else Path("tests") / relative.name)
        if target.exists():
            raise FileExistsError(f"{target}: the bake already has a file where a proof goes")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return into


def laid_tests(copy: Path) -> list[str]:
    """The laid-in Python tests, as paths in the copy (one that renders empty, another target's, is not laid)."""
    names = [path.name for path in proof_files() if len(path.parts) == 1 and path.name.startswith("test_")]
    return [f"tests/{name}" for name in names if (copy / "tests" / name).is_file()]


def proof_env(copy: Path, env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a pytest run in the copy needs for the proofs' plugin (harness/proof_fixtures.py)."""
    env = dict(os.environ if env is None else env)
    paths = [str(copy), str(copy / "tests" / "harness"), env.get("PYTHONPATH", "")]
    env["PYTHONPATH"] = os.pathsep.join(path for path in paths if path)
    env["PYTEST_ADDOPTS"] = f"{env.get('PYTEST_ADDOPTS', '')} -p proof_fixtures".strip()
    return env


def run(copy: Path, *pytest_args: str, env: dict[str, str] | None = None, **kwargs) -> subprocess.CompletedProcess:
    """pytest in the copy: on the laid-in proofs, or on the tests `pytest_args` name (a path under tests/)."""
    named = any(arg.startswith("tests/") for arg in pytest_args)
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *([] if named else laid_tests(copy))]
    command += pytest_args
    return subprocess.run(command, cwd=copy, env=proof_env(copy, env), check=False, **kwargs)


def main(argv: list[str]) -> int:
    if not argv or not (Path(argv[0]) / ".cookiecutter.json").is_file():
        print("usage: prove.py BAKE [PYTEST_ARGS...]  (BAKE: a baked project, the directory with .cookiecutter.json)")
        return 2
    bake = Path(argv[0]).resolve()
    with tempfile.TemporaryDirectory(prefix="proofs-") as scratch:
        copy = lay(bake, Path(scratch) / bake.name)
        print(f"==> the proofs, laid into a copy of {bake} ({copy})", flush=True)
        return run(copy, *argv[1:]).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
