"""Shared fixtures for the template's own tests: one Firestore emulator for the whole run, and bakes.

The emulator helper is the baked project's own (plain Python, no Jinja), so there is one copy of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.main import cookiecutter

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PROJECT = ROOT / "{{cookiecutter.project_slug}}"
sys.path.insert(0, str(TEMPLATE_PROJECT / "tools"))
sys.path.insert(0, str(ROOT / "hooks"))

from firestore_emulator import EmulatorNotFound, running_emulator  # noqa: E402

DEFAULTS = json.loads((ROOT / "cookiecutter.json").read_text())


def bake(output_dir: Path, **answers: object) -> Path:
    """Bake the template with defaults overridden by `answers`; returns the project directory."""
    return Path(
        cookiecutter(str(ROOT), no_input=True, extra_context=answers, output_dir=str(output_dir), accept_hooks=True)
    )


@pytest.fixture(scope="session")
def emulator_host():
    """FIRESTORE_EMULATOR_HOST if set, else one emulator started for the whole session."""
    try:
        with running_emulator() as host:
            yield host
    except EmulatorNotFound as error:
        pytest.fail(str(error), pytrace=False)


def run_baked_suite(project: Path, emulator_host: str, *pytest_args: str) -> subprocess.CompletedProcess[str]:
    """The baked project's own test suite, in this venv, against the shared emulator."""
    env = {
        **os.environ,
        "FIRESTORE_EMULATOR_HOST": emulator_host,
        # Isolates this bake's data from other bakes' on the shared emulator.
        "DEDUP_TEST_PROJECT": f"bake-{project.name}"[:30].rstrip("-"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
