"""The baked README only names commands, Terraform outputs and files the bake really has."""

from __future__ import annotations

import re

import pytest
from conftest import bake

pytestmark = pytest.mark.bake


@pytest.fixture(scope="module", params=["function", "workflow"])
def project(request, tmp_path_factory):
    return bake(tmp_path_factory.mktemp(f"readme-{request.param}"), target=request.param)


def test_readme_names_real_make_targets_outputs_and_files(project):
    readme = (project / "README.md").read_text()
    makefile = (project / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z]+):", makefile, re.M))
    assert set(re.findall(r"`?make ([a-z]+)", readme)) <= targets
    outputs = set(re.findall(r'^output "(\w+)"', (project / "terraform" / "outputs.tf").read_text(), re.M))
    mentioned = set(re.findall(r"terraform(?: -chdir=terraform)? output(?: -raw)? (\w+)", readme))
    mentioned |= set(re.findall(r"also: ([\w, ]+)", readme)[0].replace(" ", "").split(","))
    assert mentioned and mentioned <= outputs, mentioned - outputs
    for path in re.findall(r"`((?:tools|terraform)/[\w./-]*\.(?:py|tf)|[a-z_]+\.py)`", readme):
        assert (project / path).exists() or (project / "tools" / path).exists(), path


def test_readme_lists_the_baked_jobs(project):
    assert "| `nightly` | `0 3 * * *` | `Etc/UTC` |" in (project / "README.md").read_text()
