"""Every target enables every Google API its code calls (issue 19).

An API the code calls but the bake never enables fails at the first delivery, not at apply: the
workflow target's function starts executions through the Workflow Executions API
(workflowexecutions.googleapis.com), a service apart from the Workflows API that creates the
workflow, and no bake enabled it. For each matrix bake this reads the Google client libraries the
deployed code imports (the function's files, a Cloud Run job's code) and the connectors a workflow
calls, maps each to its service, and checks the service is in what the bake enables: the core
module's list (scheduled-dedup-project's main.tf) plus the `apis` a proxy target's module hands it through
terraform/main.tf.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import baking
import pytest
from conftest import MATRIX, MODULE_CALL, ROOT, bake, root_configuration

pytestmark = pytest.mark.bake

MODULES = ROOT / baking.MODULES_DIR

# Client library module -> the service its calls go to (each library's README names its API).
CLIENT_API = {
    "google.cloud.firestore": "firestore.googleapis.com",
    "google.cloud.firestore_v1": "firestore.googleapis.com",
    "google.cloud.run_v2": "run.googleapis.com",
    "google.cloud.tasks_v2": "cloudtasks.googleapis.com",
    "google.cloud.workflows.executions_v1": "workflowexecutions.googleapis.com",
    "google.cloud.workflows_v1": "workflows.googleapis.com",
}
# Imported, but no API call: StructuredLogHandler prints JSON lines to stdout, which Cloud Run ships
# to Cloud Logging itself (run_log.py imports logging_v2 only to mark its diagnostic line as printed);
# api_core and auth are plumbing.
NO_API = ("google.cloud.logging.handlers", "google.cloud.logging_v2", "google.api_core", "google.auth")
# A workflow's `call: googleapis.<service>.<version>...` connector, and sys.log (Cloud Logging).
CONNECTOR = re.compile(r"call:\s*googleapis\.(\w+)\.")


def imported_google_modules(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names if alias.name.startswith("google.")}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("google."):
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def service_of(module: str) -> str | None:
    if module.startswith(NO_API):
        return None
    for library, service in CLIENT_API.items():
        if module == library or module.startswith(f"{library}."):
            return service
    raise AssertionError(f"{module}: which API does it call? Add it to CLIENT_API (or NO_API) in {__file__}")


def called_apis(project: Path) -> set[str]:
    code = [*project.glob("*.py"), *project.glob("cloud_run_job/*.py")]
    services = {service_of(module) for path in code for module in imported_google_modules(path)} - {None}
    for workflow in project.glob("workflow/*.yaml"):
        text = workflow.read_text()
        services |= {f"{name}.googleapis.com" for name in CONNECTOR.findall(text)}
        if re.search(r"call:\s*sys\.log\b", text):
            services.add("logging.googleapis.com")
    return services


def quoted_services(text: str) -> set[str]:
    return set(re.findall(r'"([a-z0-9]+\.googleapis\.com)"', text))


def enabled_apis(project: Path) -> set[str]:
    """The APIs the core module enables, and those a proxy module the root calls hands it (the modules the bake
    calls at conftest.MODULE_SOURCE: this working tree's)."""
    # The list is scheduled-dedup-project's (the core calls it; a team bake's bootstrap calls it as the owner).
    listed = (MODULES / "scheduled-dedup-project" / "main.tf").read_text()
    enabled = quoted_services(listed.split("  apis = concat(", 1)[1].split("\n  )\n", 1)[0])
    root = root_configuration(project / "terraform")  # the target's module call and what it hands: target.tf
    for call, source in MODULE_CALL.findall(root):
        if call != "scheduled_dedup" and re.search(rf"= module\.{call}\.apis$", root, re.M):
            outputs = (MODULES / source / "outputs.tf").read_text()
            enabled |= quoted_services(outputs.split('output "apis" {', 1)[1].split("\n}\n", 1)[0])
    return enabled


@pytest.mark.parametrize("name", list(MATRIX))
def test_every_api_the_code_calls_is_enabled(name, tmp_path):
    project = bake(tmp_path, **MATRIX[name])
    called = called_apis(project)
    assert "firestore.googleapis.com" in called  # the helper reads the code at all
    assert called - enabled_apis(project) == set()


def test_an_unmapped_client_library_fails_with_a_hint(tmp_path):
    (tmp_path / "job.py").write_text("from google.cloud import pubsub_v1\n")
    with pytest.raises(AssertionError, match="google.cloud.pubsub_v1: which API"):
        called_apis(tmp_path)
