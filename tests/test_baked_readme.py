"""The baked README only names commands and Terraform outputs the bake really has, and lists every file it has."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import bake_size
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


ANSWER_ROW = re.compile(r"^\| (\d{3}) \| `(\w+)` \| .+ \|$", re.M)


def test_the_readme_says_what_each_answer_means(project):
    """One row per outcome the handler can answer, with the status main.ANSWERS gives it."""
    readme = (project / "README.md").read_text()
    section = readme.split("## What each answer means", 1)[1].split("\n## ", 1)[0]
    answers = subprocess.run(
        [
            sys.executable,
            "-c",
            "import json, main; print(json.dumps({o.value: s for o, (s, _) in main.ANSWERS.items()}))",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert {outcome: int(status) for status, outcome in ANSWER_ROW.findall(section)} == json.loads(answers)


# The budgets of issue 17 for a default bake: the README a reader finishes, few words about the template.
README_LINES = 150
TEMPLATE_LINES_OUTSIDE_README = 3


def test_a_default_bake_keeps_to_its_reading_budgets(tmp_path):
    project = bake(tmp_path)
    assert len((project / "README.md").read_text().splitlines()) <= README_LINES
    naming = bake_size.template_naming(project)
    assert len(naming) <= TEMPLATE_LINES_OUTSIDE_README, "\n".join(naming)
