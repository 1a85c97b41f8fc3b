"""Who queued a run is on record (issue 26): the module turns on Cloud Tasks' Data Access audit logs (DATA_WRITE) for
the project, unless told another root does; a team bake's bootstrap (run by the project owner) does, and its root
tells the module so. Offline plans (module_plan: `terraform test` against mock providers) show the configuration.

Cloud Tasks "Audit logging" (https://cloud.google.com/tasks/docs/audit-logging): methods needing a DATA_WRITE
permission (CreateTask: cloudtasks.tasks.create) write Data Access audit logs, which are off by default ("Enable Data
Access audit logs", https://cloud.google.com/logging/docs/audit/configure-data-access). Terraform's
google_project_iam_audit_config is "authoritative for a given service" (the provider's google_project_iam page) and
needs resourcemanager.projects.setIamPolicy: an owner's right, which a team bake's deployer does not need for it.
"""

from __future__ import annotations

import re

import pytest
from conftest import MATRIX, bake
from module_plan import hcl_jobs, plan_runs

pytestmark = pytest.mark.terraform

# Made by scheduled-dedup-project, which the core module calls (project.tf) when no project_setup is given.
AUDIT_CONFIG = "module.project[0].google_project_iam_audit_config.cloud_tasks"
JOBS = {"nightly": "0 3 * * *"}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, dict[str, dict]]:
    jobs = f"    jobs = {hcl_jobs(JOBS)}"
    return plan_runs(
        tmp_path_factory.mktemp("enqueuer"),
        {"default": jobs, "made_elsewhere": f"{jobs}\n    task_queue = {{ data_access_logs = false }}"},
    )


def test_the_module_turns_on_cloud_tasks_data_write_audit_logs(plans):
    planned = plans["default"][f"{AUDIT_CONFIG}[0]"]
    assert planned["project"] == "dashboard-project"  # module_plan's project_id
    assert planned["service"] == "cloudtasks.googleapis.com"
    assert [config["log_type"] for config in planned["audit_log_config"]] == ["DATA_WRITE"]
    assert not any(config.get("exempted_members") for config in planned["audit_log_config"]), "nobody exempted"


def test_the_module_makes_none_when_another_root_does(plans):
    assert not [address for address in plans["made_elsewhere"] if address.startswith(AUDIT_CONFIG)]


@pytest.mark.parametrize("bake_name", ["defaults", "cloud-run-job"])
def test_a_team_bakes_bootstrap_makes_it_and_its_root_tells_the_module(bake_name, tmp_path):
    """A solo bake's root leaves the module's default (the owner's `make deploy` sets it); a team bake's root passes
    project_setup (the module then makes nothing project-wide) and its bootstrap's module "project" makes the
    configuration with scheduled-dedup-project's default (its tftest asserts what it plans)."""
    project = bake(tmp_path, **MATRIX[bake_name])
    team = bool(MATRIX[bake_name].get("state_bucket"))
    main = (project / "terraform" / "main.tf").read_text()
    assert "data_access_logs" not in main
    assert bool(re.search(r"^  project_setup = \{$", main, re.M)) == team
    bootstrap = project / "terraform" / "bootstrap" / "main.tf"
    made = bootstrap.is_file() and 'module "project" {' in bootstrap.read_text()
    assert made == team
    if team:
        assert "data_access_logs" not in bootstrap.read_text()  # the module's default: on
        tftest = (project / "terraform" / "bootstrap" / "tests" / "bootstrap.tftest.hcl").read_text()
        assert '== ["DATA_WRITE"]' in tftest and "module.project.cloud_tasks_audit_config.service" in tftest
