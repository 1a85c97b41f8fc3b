"""Plan the scheduled-dedup module offline and return what each run would create.

`terraform test -verbose -json` plans the module with mock providers and prints each run's plan
(a `test_plan` message naming its run). Used by test_dashboard.py and test_monitoring.py.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from conftest import ROOT

from tests.terraform_offline import terraform

MODULE_DIR = ROOT / "terraform" / "modules" / "scheduled-dedup"

PREAMBLE = """\
mock_provider "google" {}
mock_provider "archive" {}
mock_provider "time" {}

variables {
  project_id   = "dashboard-project"
  region       = "europe-west1"
  slug         = "dash"
  source_dir   = "."
  source_files = ["versions.tf"]
}
"""


def copy_module(module_dir: Path, copy: Path, **copytree) -> Path:
    """A copy of a module at `copy`, with each module it calls by a sibling path (the core's
    "../image-repository") copied beside it, as in terraform/modules, and installed (`terraform get`:
    a test or a plan reads local modules from .terraform/modules); returns `copy`."""
    shutil.copytree(module_dir, copy, **copytree)
    siblings = {
        name
        for path in module_dir.glob("*.tf")
        for name in re.findall(r'^  source += "\.\./([\w-]+)"', path.read_text(), re.M)
    }
    for name in sorted(siblings):
        shutil.copytree(module_dir.parent / name, copy.parent / name, dirs_exist_ok=True, **copytree)
    result = terraform(copy, "get")
    assert result.returncode == 0, result.stdout + result.stderr
    return copy


def hcl_jobs(jobs: dict[str, str]) -> str:
    """var.jobs as HCL, from {job id: schedule}."""
    return "{ " + ", ".join(f'"{job}" = {{ schedule = "{schedule}" }}' for job, schedule in jobs.items()) + " }"


def plan_runs(workdir: Path, runs: dict[str, str], module_dir: Path = MODULE_DIR) -> dict[str, dict[str, dict]]:
    """Plan one run per entry of `runs` ({run name: the HCL inside its variables block}) on a copy of
    the module in `workdir`: {run name: {resource address: its planned values}}."""
    copy = copy_module(module_dir, workdir / "module")
    template = 'run "{}" {{\n  command = plan\n\n  variables {{\n{}\n  }}\n}}\n'
    blocks = [PREAMBLE] + [template.format(name, variables) for name, variables in runs.items()]
    plans = tftest_plans(copy, "\n".join(blocks))
    assert set(plans) == set(runs), f"plans of {sorted(plans)}, not {sorted(runs)}"
    return {run: {change["address"]: change["change"]["after"] for change in changes} for run, changes in plans.items()}


def tftest_plans(copy: Path, tftest: str) -> dict[str, list[dict]]:
    """Run `tftest` (a .tftest.hcl's text) on an installed copy of a module: {run name: its plan's resource_changes}
    for each run that printed a plan (`terraform test -verbose -json`: a `test_plan` message per run)."""
    (copy / "tests").mkdir(exist_ok=True)
    (copy / "tests" / "plan.tftest.hcl").write_text(tftest)
    installed = terraform(copy, "get")  # the modules a run block names (its `module { source }`) too
    assert installed.returncode == 0, installed.stdout + installed.stderr
    result = terraform(copy, "test", "-verbose", "-json", timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return {
        message["@testrun"]: message["test_plan"]["resource_changes"]
        for message in map(json.loads, result.stdout.splitlines())
        if message.get("type") == "test_plan"
    }
