"""The baked project's GitHub Actions workflow renders to valid YAML and runs the checks it promises."""

from __future__ import annotations

import pytest
import yaml
from conftest import bake

pytestmark = pytest.mark.bake


@pytest.fixture(scope="module")
def workflow(tmp_path_factory):
    project = bake(tmp_path_factory.mktemp("ci"), project_name='CI: "Ops" # it\'s')
    text = (project / ".github" / "workflows" / "ci.yml").read_text()
    return text, yaml.safe_load(text)


def steps(workflow, job):
    return workflow[1]["jobs"][job]["steps"]


def uses(workflow, job):
    return {step["uses"].split("@")[0]: step for step in steps(workflow, job) if "uses" in step}


def runs(workflow, job):
    return [step["run"] for step in steps(workflow, job) if "run" in step]


def test_github_expressions_survive_the_bake(workflow):
    text, parsed = workflow
    assert "${{ github.workflow }}-${{ github.ref }}" in text
    assert parsed["concurrency"]["group"] == "${{ github.workflow }}-${{ github.ref }}"
    # PyYAML reads the key `on` as True (YAML 1.1); GitHub reads it as `on`.
    assert set(parsed[True]) == {"push", "pull_request"}


def test_python_job_lints_and_tests_against_the_official_emulator(workflow):
    actions = uses(workflow, "python")
    assert {"actions/checkout", "actions/setup-python", "actions/setup-java"} <= set(actions)
    assert actions["google-github-actions/setup-gcloud"]["with"]["install_components"] == "cloud-firestore-emulator"
    assert runs(workflow, "python") == ["make venv", "make lint", "make test"]


def test_terraform_job_runs_fmt_init_validate_test(workflow):
    assert "hashicorp/setup-terraform" in uses(workflow, "terraform")
    assert workflow[1]["jobs"]["terraform"]["defaults"]["run"]["working-directory"] == "terraform"
    assert runs(workflow, "terraform") == [
        "terraform fmt -check -recursive",
        "terraform init -backend=false -input=false",
        "terraform validate",
        "terraform test",
    ]


def test_every_action_is_pinned_to_a_version(workflow):
    for job in ("python", "terraform"):
        for step in steps(workflow, job):
            if "uses" in step:
                assert "@v" in step["uses"], f"{job}: {step['uses']} is not pinned"
