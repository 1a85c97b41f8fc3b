"""The Scheduler jobs, the user's and the audit's, are made by one definition (modules/scheduled-dedup/scheduler-jobs)
that the core module calls twice; a project applied before, when scheduler.tf and audit.tf each held a resource of
their own, keeps its jobs: an offline plan (mock providers) of the module over the state those addresses left has
no Scheduler job to destroy or replace, only the ones its moved blocks carry over.

The state comes from a "before" configuration with the previous addresses, google_cloud_scheduler_job.this[<job id>]
and google_cloud_scheduler_job.audit[0], applied first in the same `terraform test` (a run's `state_key` lets runs of
two configurations share one state, Terraform 1.11+: "Tests", run blocks,
https://developer.hashicorp.com/terraform/language/tests#run-blocks); the plan of the module then follows.
"""

from __future__ import annotations

import re

import pytest
from conftest import ROOT
from module_plan import MODULE_DIR, copy_module, hcl_jobs, tftest_plans

pytestmark = pytest.mark.terraform

JOBS = {"nightly": "0 3 * * *", "report": "30 6 * * 1"}
# The addresses of the previous release (its scheduler.tf and audit.tf), and where they live now.
MOVES = {
    **{
        f'google_cloud_scheduler_job.this["{job}"]': f'module.scheduler_jobs.google_cloud_scheduler_job.this["{job}"]'
        for job in JOBS
    },
    "google_cloud_scheduler_job.audit[0]": 'module.audit_job.google_cloud_scheduler_job.this["audit"]',
}

BEFORE = """\
# The previous release's Scheduler jobs, at their addresses (a name is all the schema requires).
resource "google_cloud_scheduler_job" "this" {
  for_each = toset(%s)
  name     = "moved-${each.key}"
}

resource "google_cloud_scheduler_job" "audit" {
  count = 1
  name  = "moved_audit"
}
"""

TEST = """\
mock_provider "google" {}
mock_provider "archive" {}
mock_provider "time" {}

run "before" {
  state_key = "module"

  module {
    source = "./tests/before"
  }
}

run "after" {
  command   = plan
  state_key = "module"

  variables {
    project_id   = "moved-project"
    region       = "europe-west1"
    slug         = "moved"
    source_dir   = "."
    source_files = ["versions.tf"]
    jobs         = %s
    audit        = { interval_minutes = 60 }
  }
}
"""


def scheduler_changes(workdir, module_dir=MODULE_DIR) -> dict[str, tuple[list[str], str | None]]:
    """The plan of the module over the previous release's state: {address: (actions, previous address)} of each
    Scheduler job, and of each previous address the plan destroys."""
    copy = copy_module(module_dir, workdir / "module")
    (copy / "tests" / "before").mkdir(parents=True)
    (copy / "tests" / "before" / "main.tf").write_text(BEFORE % ("[" + ", ".join(f'"{j}"' for j in JOBS) + "]"))
    plans = tftest_plans(copy, TEST % hcl_jobs(JOBS))
    return {
        change["address"]: (change["change"]["actions"], change.get("previous_address"))
        for change in plans["after"]
        if change["type"] == "google_cloud_scheduler_job"
    }


def replacements(changes: dict[str, tuple[list[str], str | None]]) -> list[str]:
    """What an upgrade would do to an applied project's Scheduler jobs that it must not, one line each."""
    problems = [f"{address}: {actions}" for address, (actions, _) in changes.items() if "delete" in actions]
    for old, new in MOVES.items():
        actions, previous = changes.get(new, ([], None))
        if previous != old:
            problems.append(f"{new} is not {old} carried over ({actions}, from {previous})")
    return problems


def test_an_applied_project_keeps_its_scheduler_jobs(tmp_path):
    changes = scheduler_changes(tmp_path)
    assert replacements(changes) == [], changes
    assert set(changes) == set(MOVES.values()), changes


# Each moved block, as scheduler.tf and audit.tf hold it: without it, its jobs would be destroyed and made anew.
MOVED_BLOCKS = {
    "scheduler.tf": "google_cloud_scheduler_job.this",
    "audit.tf": "google_cloud_scheduler_job.audit[0]",
}


@pytest.mark.parametrize("file", list(MOVED_BLOCKS))
def test_without_a_moved_block_the_jobs_would_be_replaced(tmp_path, file):
    """The check can fail: the module without one of its moved blocks plans to destroy what that block carries."""
    module = tmp_path / "scheduled-dedup"
    copy_module(MODULE_DIR, module)
    path = module / file
    block = rf"\nmoved \{{\n  from = {re.escape(MOVED_BLOCKS[file])}\n[^}}]*\}}\n"
    text, removed = re.subn(block, "\n", path.read_text())
    assert removed == 1, text
    path.write_text(text)
    problems = replacements(scheduler_changes(tmp_path / "plan", module))
    old = MOVED_BLOCKS[file].replace(".this", '.this["nightly"]')
    assert f"{old}: ['delete']" in problems, problems


def test_one_definition_of_a_scheduler_job():
    """Only scheduler-jobs declares a google_cloud_scheduler_job; the core calls it for the jobs and the audit."""
    declaring = sorted(
        path.relative_to(ROOT).as_posix()
        for path in (ROOT / "terraform").rglob("*.tf")
        if 'resource "google_cloud_scheduler_job"' in path.read_text()
    )
    assert declaring == ["terraform/modules/scheduled-dedup/scheduler-jobs/main.tf"]
    calls = {
        path.name: re.findall(r'^module "(\w+)" \{\n  source = "\./scheduler-jobs"$', path.read_text(), re.M)
        for path in MODULE_DIR.glob("*.tf")
    }
    assert {name: found for name, found in calls.items() if found} == {
        "scheduler.tf": ["scheduler_jobs"],
        "audit.tf": ["audit_job"],
    }
