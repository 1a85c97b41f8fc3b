"""A bake's .gitignore: `git add -A` after a day of work stages the code and the lock file, never a venv,
Terraform's working directory, local state or caches (issue 17; issue 19 item 4)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import bake

# What `make venv`, `make test`, `terraform init/apply` and a CI login leave in a checkout: none of it is committed.
LOCAL_ONLY = (
    ".venv/bin/python",
    ".venv/lib/python3.11/site-packages/x.py",
    "__pycache__/main.cpython-311.pyc",
    "tests/__pycache__/conftest.cpython-311.pyc",
    ".pytest_cache/v/cache/lastfailed",
    ".ruff_cache/0.1/123",
    "terraform/.terraform/providers/registry.terraform.io/hashicorp/google/7.0.0/linux_amd64/terraform-provider",
    "terraform/.terraform/scheduled-dedup/nightly-report-function-source.zip",
    "terraform/terraform.tfstate",
    "terraform/terraform.tfstate.backup",
    "terraform/bootstrap/terraform.tfstate",
    "terraform/prod.tfvars",
    "gha-creds-0123abcd.json",
    ".emulator-data/firestore_export/metadata",
)
# What a networked `terraform init` writes that must be committed (HashiCorp: commit the dependency lock file).
COMMITTED = ("terraform/.terraform.lock.hcl",)


def git(project: Path, *arguments: str) -> str:
    return subprocess.run(["git", *arguments], cwd=project, capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return bake(tmp_path_factory.mktemp("gitignore"), state_bucket="acme-tf-state", repository="acme/report")


def test_git_add_stages_the_code_and_the_lock_file_and_nothing_local(project):
    baked = sorted(path.relative_to(project).as_posix() for path in project.rglob("*") if path.is_file())
    for relative in (*LOCAL_ONLY, *COMMITTED):
        path = project / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x\n")
    git(project, "init", "-q")
    git(project, "add", "-A")
    staged = sorted(git(project, "diff", "--cached", "--name-only").splitlines())
    assert sorted(set(LOCAL_ONLY) & set(staged)) == []
    assert sorted(set(staged) - set(baked)) == sorted(COMMITTED)
    assert sorted(set(baked) - set(staged)) == [], "a baked file is ignored"
