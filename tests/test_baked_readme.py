"""The baked README only names commands and Terraform outputs the bake really has, and lists every file it has."""

from __future__ import annotations

import re

import pytest
from conftest import MATRIX, bake

pytestmark = pytest.mark.bake


@pytest.fixture(scope="module", params=["function", "workflow"])
def project(request, tmp_path_factory):
    return bake(tmp_path_factory.mktemp(f"readme-{request.param}"), target=request.param)


def test_readme_names_real_make_targets_and_outputs(project):
    # The paths it names: tests/test_references.py, on every file of every matrix bake.
    readme = (project / "README.md").read_text()
    makefile = (project / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z]+):", makefile, re.M))
    assert set(re.findall(r"`?make ([a-z]+)", readme)) <= targets
    outputs = set(re.findall(r'^output "(\w+)"', (project / "terraform" / "outputs.tf").read_text(), re.M))
    mentioned = set(re.findall(r"terraform(?: -chdir=terraform)? output(?: -raw)? (\w+)", readme))
    mentioned |= set(re.findall(r"also: ([\w, ]+)", readme)[0].replace(" ", "").split(","))
    assert mentioned and mentioned <= outputs, mentioned - outputs


def test_readme_names_the_baked_jobs_and_leaves_their_schedules_to_config_yaml(project):
    """Issue 17: a schedule lives in config.yaml alone; the README names the jobs and says where they are."""
    readme = (project / "README.md").read_text()
    assert "The jobs (nightly)" in readme and "are in `config.yaml`" in readme
    assert "0 3 * * *" not in readme
    assert "## Add, change or remove a job" in readme


EVERY_FILE = re.compile(r"^## Every file\n(.*?)(?=^## )", re.M | re.S)
ROW = re.compile(r"^\| `([^`]+)` \| (.*) \|$", re.M)


def listed_files(readme: str) -> set[str]:
    """The paths the README's "Every file" table names: each row's directory joined to each backticked name."""
    section = EVERY_FILE.search(readme)
    assert section, 'the README has no "## Every file" section'
    listed = set()
    for directory, cell in ROW.findall(section[1]):
        prefix = "" if directory == "./" else directory
        listed |= {prefix + name for name in re.findall(r"`([^`]+)`", cell)}
    return listed


def files_of(project) -> set[str]:
    return {path.relative_to(project).as_posix() for path in project.rglob("*") if path.is_file()}


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def matrix_project(request, tmp_path_factory):
    return bake(tmp_path_factory.mktemp(f"files-{request.param}"), **MATRIX[request.param])


def test_readme_lists_every_file_the_bake_has(matrix_project):
    listed, present = listed_files((matrix_project / "README.md").read_text()), files_of(matrix_project)
    assert not present - listed, f"in the bake, not in the README's file list: {sorted(present - listed)}"
    assert not listed - present, f"in the README's file list, not in the bake: {sorted(listed - present)}"


def test_the_file_list_check_sees_a_missing_and_an_extra_file(tmp_path):
    (tmp_path / "tools").mkdir()
    for name in ("main.py", "tools/fire.py", "tools/new.py"):
        (tmp_path / name).write_text("")
    readme = "## Every file\n\n| directory | files |\n| --- | --- |\n| `./` | `main.py` (the adapter) |\n"
    readme += "| `tools/` | `fire.py`, `gone.py` |\n\n## Next\n"
    assert listed_files(readme) == {"main.py", "tools/fire.py", "tools/gone.py"}
    assert files_of(tmp_path) - listed_files(readme) == {"tools/new.py"}
    with pytest.raises(AssertionError, match="no .## Every file. section"):
        listed_files("# a README\n")
