"""Every `validation` block of the module's variables.tf refuses a value: deleting or weakening one fails here.

Each case is a plan of the module (mock providers, offline Terraform: tests/terraform_offline) with one
input changed from a valid baseline, in a .tftest.hcl file of its own (a failed run skips the runs after
it in its file). A case passes when Terraform refuses its plan with its block's own error message: a
fragment of literal text that only that block's error_message holds. The cases sit at the rules' edges
(1801, not 5000) so that a loosened bound fails too. test_every_validation_block_has_a_refusing_case
reads variables.tf with python-hcl2, so a block added without a case here fails the suite.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil

import hcl2
import pytest
from conftest import ROOT
from hcl2.utils import SerializationOptions
from module_plan import copy_module

from tests.terraform_offline import terraform

pytestmark = pytest.mark.terraform

MODULES_DIR = ROOT / "terraform" / "modules"
CORE = "scheduled-dedup"
CLOUD_RUN_JOB = "scheduled-dedup-cloud-run-job"
WORKFLOW = "scheduled-dedup-workflow"
IMAGE_REPOSITORY = "image-repository"
PROJECT = "scheduled-dedup-project"
# What the baked root passes a sibling module from the core module's outputs.
SIBLING_BASELINE = {
    "project_id": "valid-project",
    "region": "europe-west1",
    "slug": "valid",
    "firestore": {"database": "(default)", "collection": "scheduler_runs"},
    "retention_seconds": 604800,
    "runtime_service_account_email": "valid-run@valid-project.iam.gserviceaccount.com",
    "apis_ready": "ready",
}
# Each module, tested as a module of its own: a valid baseline and the providers its plan mocks.
BASELINES: dict[str, dict[str, object]] = {
    CORE: {
        "project_id": "valid-project",
        "region": "europe-west1",
        "slug": "valid",
        "source_dir": ".",
        "source_files": ["versions.tf"],
        "jobs": {"nightly": {"schedule": "0 3 * * *"}},
    },
    CLOUD_RUN_JOB: {**SIBLING_BASELINE, "job": {"image": "europe-west1-docker.pkg.dev/valid-project/jobs/job:1"}},
    WORKFLOW: {
        **SIBLING_BASELINE,
        "workflow": {"source_contents": "main:\n  steps:\n    - done:\n        return: 1\n"},
    },
}
BASELINES[IMAGE_REPOSITORY] = {
    "project_id": "valid-project",
    "location": "europe-west1",
    "repository_id": "valid-images",
}
BASELINES[PROJECT] = {
    "project_id": "valid-project",
    "region": "europe-west1",
    "slug": "valid",
    "firestore": {"database": "valid-db"},
    "service_accounts": {
        "runtime": "valid-run@valid-project.iam.gserviceaccount.com",
        "build": "valid-build@valid-project.iam.gserviceaccount.com",
    },
}
MOCKED_PROVIDERS = {
    PROJECT: ("google", "time"),
    CORE: ("google", "archive", "time"),
    CLOUD_RUN_JOB: ("google",),
    WORKFLOW: ("google",),
    IMAGE_REPOSITORY: ("google",),
}
# A repository the function's region holds, as a team bake's root passes terraform/bootstrap's.
GIVEN_IMAGES = "projects/valid-project/locations/europe-west1/repositories/valid-images"


@dataclasses.dataclass(frozen=True)
class Refusal:
    """`inputs` (over its module's baseline) must be refused by the validation of `variable` whose message holds
    `message`."""

    name: str
    variable: str
    message: str
    inputs: dict[str, object]
    module: str = CORE


CASES = [
    Refusal("project_id_trailing_hyphen", "project_id", "a GCP project id is 6-30 chars", {"project_id": "my-proj-"}),
    Refusal("project_id_5_chars", "project_id", "a GCP project id is 6-30 chars", {"project_id": "abcde"}),
    Refusal("region_not_a_region", "region", "must be a GCP region such as", {"region": "moon"}),
    Refusal("slug_2_chars", "slug", "slug: must be 3-20 chars", {"slug": "ab"}),
    # The function's zip by allow-list (issue 19): files inside source_dir only, at least one.
    Refusal("source_files_empty", "source_files", "must list at least one file", {"source_files": []}),
    Refusal(
        "source_files_leaves_the_project",
        "source_files",
        "must list at least one file",
        {"source_files": ["versions.tf", "../.env"]},
    ),
    Refusal("source_files_absolute", "source_files", "must list at least one file", {"source_files": ["/etc/passwd"]}),
    Refusal("source_files_a_directory", "source_files", "must list at least one file", {"source_files": ["tests/"]}),
    Refusal("slug_21_chars", "slug", "slug: must be 3-20 chars", {"slug": "a" * 21}),
    Refusal("jobs_empty", "jobs", "jobs: must name at least one job", {"jobs": {}}),
    Refusal(
        "job_id_uppercase", "jobs", "each job id must be 1-40 chars", {"jobs": {"Nightly": {"schedule": "0 3 * * *"}}}
    ),
    Refusal(
        "job_id_41_chars", "jobs", "each job id must be 1-40 chars", {"jobs": {"a" * 41: {"schedule": "0 3 * * *"}}}
    ),
    Refusal(
        "schedule_groc",
        "jobs",
        "each schedule must be 5-field unix-cron",
        {"jobs": {"n": {"schedule": "every 5 minutes"}}},
    ),
    # The shape only (local.cron_shape): the grammar (bounds, names, backwards ranges, step 0) is the hook's.
    Refusal(
        "schedule_four_fields",
        "jobs",
        "each schedule must be 5-field unix-cron",
        {"jobs": {"n": {"schedule": "0 3 * *"}}},
    ),
    Refusal(
        "schedule_six_fields",
        "jobs",
        "each schedule must be 5-field unix-cron",
        {"jobs": {"n": {"schedule": "0 0 3 * * *"}}},
    ),
    Refusal(
        "schedule_letters_in_the_hour",
        "jobs",
        "each schedule must be 5-field unix-cron",
        {"jobs": {"n": {"schedule": "0 3h * * *"}}},
    ),
    Refusal(
        "schedule_unicode_digit",
        "jobs",
        "each schedule must be 5-field unix-cron",
        {"jobs": {"n": {"schedule": "\u0663 3 * * *"}}},
    ),
    Refusal(
        "max_lateness_59",
        "jobs",
        "each max_lateness_seconds must be a whole number of seconds, at least 60",
        {"jobs": {"n": {"schedule": "0 3 * * *", "max_lateness_seconds": 59}}},
    ),
    Refusal(
        "max_lateness_fraction",
        "jobs",
        "each max_lateness_seconds must be a whole number of seconds, at least 60",
        {"jobs": {"n": {"schedule": "0 3 * * *", "max_lateness_seconds": 60.5}}},
    ),
    # Issue 18: who may queue re-runs and backfills must be an IAM principal, with its type prefix.
    Refusal(
        "enqueuer_without_type",
        "task_queue",
        "task_queue.enqueuers: each must be an IAM principal",
        {"task_queue": {"enqueuers": ["ana@example.com"]}},
    ),
    Refusal(
        "enqueuer_with_a_space",
        "task_queue",
        "task_queue.enqueuers: each must be an IAM principal",
        {"task_queue": {"enqueuers": ["user:ana @example.com"]}},
    ),
    # A job's own numbers (config.yaml): the same ranges as var.timing's and var.retry's (issue 17).
    Refusal(
        "job_deadline_1801",
        "jobs",
        "a job's own attempt_deadline_seconds must be 15-1800",
        {"jobs": {"n": {"schedule": "0 3 * * *", "attempt_deadline_seconds": 1801}}},
    ),
    Refusal(
        "overlap_unknown",
        "jobs",
        "each overlap must be",
        {"jobs": {"n": {"schedule": "0 3 * * *", "overlap": "queue"}}},
    ),
    Refusal(
        "dst_gap_unknown",
        "jobs",
        "each dst_gap must be end_of_gap or skip",
        {"jobs": {"n": {"schedule": "0 3 * * *", "dst_gap": "later"}}},
    ),
    Refusal(
        "time_zone_trailing_slash",
        "jobs",
        "each time_zone must be an IANA time zone",
        {"jobs": {"n": {"schedule": "0 3 * * *", "time_zone": "Europe/Madrid/"}}},
    ),
    # Whole numbers: the issue's untested validation. 300.5 breaks no other rule of var.timing.
    Refusal(
        "deadline_fraction",
        "timing",
        "timing: every value is a whole number of seconds",
        {"timing": {"attempt_deadline_seconds": 300.5}},
    ),
    Refusal(
        "retention_fraction",
        "timing",
        "timing: every value is a whole number of seconds",
        {"timing": {"retention_seconds": 604800.25}},
    ),
    Refusal("deadline_14", "timing", "must be 15-1800.", {"timing": {"attempt_deadline_seconds": 14}}),
    Refusal(
        "deadline_1801",
        "timing",
        "must be 15-1800.",
        {"timing": {"attempt_deadline_seconds": 1801}},
    ),
    Refusal(
        "retry_fraction",
        "retry",
        "retry: every value is a whole, non-negative number",
        {"retry": {"max_doublings": 2.5}},
    ),
    Refusal(
        "retry_negative",
        "retry",
        "retry: every value is a whole, non-negative number",
        {"retry": {"max_retry_duration_seconds": -1}},
    ),
    Refusal("retry_count_6", "retry", ": must be 0-5.", {"retry": {"retry_count": 6}}),
    Refusal(
        "max_backoff_below_min",
        "retry",
        "retry: min_backoff_seconds and max_backoff_seconds must be 0-3600",
        {"retry": {"min_backoff_seconds": 300, "max_backoff_seconds": 299}},
    ),
    Refusal(
        "max_backoff_3601",
        "retry",
        "retry: min_backoff_seconds and max_backoff_seconds must be 0-3600",
        {"retry": {"max_backoff_seconds": 3601}},
    ),
    Refusal("max_doublings_17", "retry", ": must be 0-16.", {"retry": {"max_doublings": 17}}),
    Refusal(
        "database_uppercase",
        "firestore",
        "firestore.database: must be (default) or 4-63 chars",
        {"firestore": {"database": "Runs-db"}},
    ),
    Refusal(
        "database_3_chars",
        "firestore",
        "firestore.database: must be (default) or 4-63 chars",
        {"firestore": {"database": "abc"}},
    ),
    Refusal(
        "database_uuid_like",
        "firestore",
        "firestore.database: must be (default) or 4-63 chars",
        {"firestore": {"database": "a1b2c3d4-0000-4000-8000-0123456789ab"}},
    ),
    # Collection ids: the issue's other untested validation.
    Refusal(
        "collection_reserved",
        "firestore",
        "firestore.collection: must be 1-100 chars",
        {"firestore": {"collection": "__runs__"}},
    ),
    Refusal(
        "collection_slash",
        "firestore",
        "firestore.collection: must be 1-100 chars",
        {"firestore": {"collection": "runs/nested"}},
    ),
    Refusal(
        "collection_101_chars",
        "firestore",
        "firestore.collection: must be 1-100 chars",
        {"firestore": {"collection": "r" * 101}},
    ),
    Refusal(
        "collection_empty", "firestore", "firestore.collection: must be 1-100 chars", {"firestore": {"collection": ""}}
    ),
    Refusal(
        "function_no_instances",
        "function",
        "function: max_instance_count must be at least 1",
        {"function": {"max_instance_count": 0}},
    ),
    Refusal(
        "function_min_above_max",
        "function",
        "function: max_instance_count must be at least 1",
        {"function": {"max_instance_count": 2, "min_instance_count": 3}},
    ),
    # Cloud Run takes 1 to 1,000 requests at a time per instance (rules.check_function says the same).
    Refusal(
        "function_no_concurrency",
        "function",
        "must be a whole number from 1 to 1000 (Cloud Run's limit per instance)",
        {"function": {"max_instance_request_concurrency": 0}},
    ),
    Refusal(
        "function_concurrency_1001",
        "function",
        "must be a whole number from 1 to 1000 (Cloud Run's limit per instance)",
        {"function": {"max_instance_request_concurrency": 1001}},
    ),
    Refusal(
        "function_fractional_concurrency",
        "function",
        "must be a whole number from 1 to 1000 (Cloud Run's limit per instance)",
        {"function": {"max_instance_request_concurrency": 1.5}},
    ),
    # Cloud Run's CPU limits (https://cloud.google.com/run/docs/configuring/cpu; rules.check_function says the same).
    Refusal(
        "function_cpu_below_the_least",
        "function",
        "must be a number of vCPUs from 0.08 to 1, or a whole number from 1 to 8",
        {"function": {"available_cpu": "0.079"}},
    ),
    Refusal(
        "function_cpu_fractional_above_one",
        "function",
        "must be a number of vCPUs from 0.08 to 1, or a whole number from 1 to 8",
        {"function": {"available_cpu": "1.5"}},
    ),
    Refusal(
        "function_cpu_nine",
        "function",
        "must be a number of vCPUs from 0.08 to 1, or a whole number from 1 to 8",
        {"function": {"available_cpu": "9"}},
    ),
    Refusal(
        "function_cpu_not_a_number",
        "function",
        "must be a number of vCPUs from 0.08 to 1, or a whole number from 1 to 8",
        {"function": {"available_cpu": "1 vCPU"}},
    ),
    # Concurrency above 1 needs a whole CPU (Cloud Run: below 1 vCPU "Maximum concurrency must be set to 1").
    Refusal(
        "function_concurrency_without_a_whole_cpu",
        "function",
        "needs a whole CPU",
        {"function": {"max_instance_request_concurrency": 2, "available_cpu": "0.999"}},
    ),
    Refusal(
        "function_sets_a_dedup_variable",
        "function",
        "names starting with DEDUP_ are read by nothing",
        {"function": {"environment_variables": {"DEDUP_LEASE_SECONDS": "1"}}},
    ),
    # The image repository made elsewhere (a team bake's terraform/bootstrap, issue 19): its full name, in the
    # function's region (BuildConfig.docker_repository: "Cross-location repositories are not supported").
    Refusal(
        "images_repository_another_region",
        "images_repository",
        "a repository in the function's region",
        {"images_repository": GIVEN_IMAGES.replace("europe-west1", "us-central1")},
    ),
    Refusal(
        "images_repository_its_id_only",
        "images_repository",
        "a repository in the function's region",
        {"images_repository": "valid-images"},
    ),
    Refusal(
        "images_kept_for_a_given_repository",
        "function",
        "set only when the module makes the image repository",
        {"images_repository": GIVEN_IMAGES, "function": {"images_kept": 3}},
    ),
    Refusal(
        "alert_email_without_at",
        "alert_email",
        "alert_email: must be an e-mail address",
        {"alert_email": "oncall.example.com"},
    ),
    Refusal(
        "alert_email_without_dot",
        "alert_email",
        "alert_email: must be an e-mail address",
        {"alert_email": "oncall@example"},
    ),
    Refusal(
        "waits_1801",
        "waits",
        "waits: every value is a whole number of seconds, 0-1800",
        {"waits": {"iam_seconds": 1801}},
    ),
    Refusal(
        "waits_negative",
        "waits",
        "waits: every value is a whole number of seconds, 0-1800",
        {"waits": {"apis_seconds": -1}},
    ),
    Refusal(
        "waits_fraction",
        "waits",
        "waits: every value is a whole number of seconds, 0-1800",
        {"waits": {"metrics_seconds": 0.5}},
    ),
    Refusal(
        "alerting_threshold_negative",
        "alerting",
        "alerting: retryable_failure_threshold must be at least 0",
        {"alerting": {"retryable_failure_threshold": -1}},
    ),
    Refusal(
        "alerting_window_59",
        "alerting",
        "alerting: retryable_failure_threshold must be at least 0",
        {"alerting": {"window_seconds": 59}},
    ),
    Refusal(
        "alerting_auto_close_1799",
        "alerting",
        "alerting: retryable_failure_threshold must be at least 0",
        {"alerting": {"auto_close_seconds": 1799}},
    ),
    Refusal(
        "alerting_window_90001",
        "alerting",
        "at most 90000 (25 h, Monitoring's limit",
        {"alerting": {"window_seconds": 90001}},
    ),
    Refusal(
        "alerting_window_fraction",
        "alerting",
        "at most 90000 (25 h, Monitoring's limit",
        {"alerting": {"window_seconds": 3600.5}},
    ),
    Refusal("audit_interval_7", "audit", "audit.interval_minutes: must be one of", {"audit": {"interval_minutes": 7}}),
    Refusal(
        "audit_interval_1440", "audit", "audit.interval_minutes: must be one of", {"audit": {"interval_minutes": 1440}}
    ),
    # The accounts terraform/bootstrap makes (issue 19): user-managed accounts' emails only.
    Refusal(
        "service_accounts_an_account_id",
        "service_accounts",
        "service_accounts: runtime, invoker and build must each be",
        {
            "service_accounts": {
                "runtime": "valid-run@valid-project.iam.gserviceaccount.com",
                "invoker": "valid-invoker",
                "build": "valid-build@valid-project.iam.gserviceaccount.com",
            }
        },
    ),
    Refusal(
        "service_accounts_the_default_compute_account",
        "service_accounts",
        "service_accounts: runtime, invoker and build must each be",
        {
            "service_accounts": {
                "runtime": "valid-run@valid-project.iam.gserviceaccount.com",
                "invoker": "valid-invoker@valid-project.iam.gserviceaccount.com",
                "build": "123456789012-compute@developer.gserviceaccount.com",
            }
        },
    ),
    # --- the sibling modules, each planned as a module of its own ----------------------------------------
    Refusal("job_without_image", "job", "job.image: required", {"job": {}}, CLOUD_RUN_JOB),
    Refusal(
        "job_11_retries",
        "job",
        "job: max_retries must be 0-10",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "max_retries": 11}},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "job_no_tasks",
        "job",
        "job: max_retries must be 0-10",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "task_count": 0}},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "job_negative_parallelism",
        "job",
        "job: max_retries must be 0-10",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "parallelism": -1}},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "job_task_timeout_86401",
        "job",
        "job: task_timeout_seconds must be 1-86400",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "task_timeout_seconds": 86401}},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "job_task_timeout_0",
        "job",
        "job: task_timeout_seconds must be 1-86400",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "task_timeout_seconds": 0}},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "job_item_lease_0",
        "job",
        "job: task_timeout_seconds must be 1-86400",
        {"job": {**BASELINES[CLOUD_RUN_JOB]["job"], "item_lease_seconds": 0}},
        CLOUD_RUN_JOB,
    ),
    # The image repository's cleanup (../image-repository, issue 19): at least the running image stays.
    Refusal(
        "images_kept_none",
        "images_kept",
        "must be a whole number of image versions to keep, 1-100",
        {"images_kept": 0},
        IMAGE_REPOSITORY,
    ),
    Refusal(
        "images_kept_101",
        "images_kept",
        "must be a whole number of image versions to keep, 1-100",
        {"images_kept": 101},
        IMAGE_REPOSITORY,
    ),
    Refusal(
        "images_repository_id_upper_case",
        "repository_id",
        "must be lower-case letters, digits and hyphens",
        {"repository_id": "Valid-images"},
        IMAGE_REPOSITORY,
    ),
    Refusal("workflow_without_source", "workflow", "workflow.source_contents: required", {"workflow": {}}, WORKFLOW),
    Refusal(
        "project_fractional_apis_wait",
        "apis_wait_seconds",
        "must be a whole number of seconds, 0-1800",
        {"apis_wait_seconds": 1.5},
        PROJECT,
    ),
    Refusal(
        "job_service_account_not_a_service_account",
        "service_account_email",
        "service_account_email: must be a user-managed",
        {"service_account_email": "valid-job@gmail.com"},
        CLOUD_RUN_JOB,
    ),
    Refusal(
        "workflow_service_account_not_a_service_account",
        "service_account_email",
        "service_account_email: must be a user-managed",
        {"service_account_email": "valid-wf@valid-project.iam.gserviceaccount.com.evil"},
        WORKFLOW,
    ),
]


def unquoted(text: str) -> str:
    """python-hcl2 keeps a string's quotes (and its backslash escapes) in what it returns."""
    return text[1:-1] if text.startswith('"') and text.endswith('"') else text


def variables_tf(module: str) -> str:
    return (MODULES_DIR / module / "variables.tf").read_text()


def validation_blocks(module: str) -> list[tuple[str, str]]:
    """(variable, error_message as written) of every validation block in a module's variables.tf, in file order."""
    parsed = hcl2.loads(variables_tf(module), serialization_options=SerializationOptions(with_comments=False))
    blocks = []
    for variable in parsed["variable"]:
        ((name, body),) = variable.items()
        for validation in body.get("validation", []):
            blocks.append((unquoted(name), unquoted(validation["error_message"])))
    return blocks


def block_line(case: Refusal) -> int:
    """The line of `validation {` of the block whose error_message holds the case's text, as Terraform
    reports it ("This was checked by the validation rule at variables.tf:LINE,3-13")."""
    opened = None
    found = []
    for number, line in enumerate(variables_tf(case.module).splitlines(), start=1):
        if line.strip() == "validation {":
            opened = number
        elif line.strip().startswith("error_message") and case.message in line:
            found.append(opened)
    assert len(found) == 1, f"{case.name}: {case.message!r} is in {len(found)} error messages"
    return found[0]


def blocks_of(case: Refusal, blocks: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (variable, message) for variable, message in blocks if variable == case.variable and case.message in message
    ]


def flat(text: str) -> str:
    """Text with its line wrapping taken out."""
    return re.sub(r"\s+", " ", text)


def hcl(value: object) -> str:
    """A Python value as an HCL expression: JSON is valid HCL for maps, strings and numbers."""
    return json.dumps(value)


def tftest(module: str, run: str, inputs: dict[str, object]) -> str:
    lines = [f'mock_provider "{provider}" {{}}' for provider in MOCKED_PROVIDERS[module]]
    lines += ["", "variables {"]
    lines += [f"  {key} = {hcl(value)}" for key, value in {**BASELINES[module], **inputs}.items()]
    lines += ["}", "", f'run "{run}" {{', "  command = plan", "}", ""]
    return "\n".join(lines)


def terraform_test_of(workdir, module: str, cases: list[Refusal]) -> dict[str, tuple[str, str]]:
    """One `terraform test -json` over a copy of `module`: run name -> (its status, its diagnostics)."""
    copy_module(MODULES_DIR / module, workdir, ignore=shutil.ignore_patterns(".terraform*", "tests"))
    (workdir / "tests").mkdir()
    (workdir / "tests" / "baseline.tftest.hcl").write_text(tftest(module, "baseline", {}))
    for case in cases:
        (workdir / "tests" / f"{case.name}.tftest.hcl").write_text(tftest(module, case.name, case.inputs))
    init = terraform(workdir, "init", "-backend=false")
    assert init.returncode == 0, init.stdout + init.stderr
    result = terraform(workdir, "test", "-json", timeout=600)
    statuses: dict[str, str] = {}
    diagnostics: dict[str, list[str]] = {}
    for line in result.stdout.splitlines():
        event = json.loads(line)
        run = event.get("@testrun")
        if event["type"] == "test_run" and event["test_run"]["progress"] == "complete":
            statuses[run] = event["test_run"]["status"]
        elif event["type"] == "diagnostic" and run:
            diagnostic = event["diagnostic"]
            diagnostics.setdefault(run, []).append(flat(f"{diagnostic['summary']}: {diagnostic['detail']}"))
    assert set(statuses) == {"baseline", *(case.name for case in cases)}, result.stdout + result.stderr
    return {name: (status, " ".join(diagnostics.get(name, []))) for name, status in statuses.items()}


@pytest.fixture(scope="module")
def verdicts(request, tmp_path_factory) -> dict[tuple[str, str], tuple[str, str]]:
    """(module, run name) -> (its status, its diagnostics), over one `terraform test` per module.

    Only the cases this session selected are planned, and only their modules' (`-k collection` plans
    those alone: the mutation runner, tests/mutants/run.py, relies on it). JSON, because a refusal that
    reads two variables is reported at `variable "timing" {` in variables.tf, not at the test file's
    line; the JSON diagnostic names its run either way (@testrun)."""
    params = [item.callspec.params for item in request.session.items if hasattr(item, "callspec")]
    selected = {param["case"].name for param in params if "case" in param}
    modules = {param["module"] for param in params if "module" in param}
    planned = [case for case in CASES if case.name in selected]
    results = {}
    for module in sorted(modules | {case.module for case in planned}):
        workdir = tmp_path_factory.mktemp("validations") / module
        cases = [case for case in planned if case.module == module]
        for name, verdict in terraform_test_of(workdir, module, cases).items():
            results[module, name] = verdict
    return results


def test_case_names_are_unique():
    names = [case.name for case in CASES]
    assert len(names) == len(set(names))


def test_every_module_is_tested():
    """A module added under terraform/modules/ without a baseline (and cases) here fails."""
    modules = sorted(path.parent.name for path in MODULES_DIR.glob("*/variables.tf"))
    assert modules == sorted(BASELINES), modules


@pytest.mark.parametrize("module", sorted(BASELINES))
def test_every_validation_block_has_a_refusing_case(module):
    """Each case names one block, by literal text of its error_message; each block is named by a case."""
    blocks = validation_blocks(module)
    written = [line for line in variables_tf(module).splitlines() if line.strip() == "validation {"]
    assert len(blocks) == len(written), blocks  # python-hcl2 read them all
    cases = [case for case in CASES if case.module == module]
    for case in cases:
        assert len(blocks_of(case, blocks)) == 1, (
            f"{case.name}: {case.message!r} must name one block of var.{case.variable} in {module}"
        )
    untested = [block for block in blocks if not any(block in blocks_of(case, blocks) for case in cases)]
    assert untested == [], f"validation blocks of {module}/variables.tf with no refusing case in this file: {untested}"


@pytest.mark.parametrize("module", sorted(BASELINES))
def test_the_baseline_is_accepted(verdicts, module):
    verdict, diagnostics = verdicts[module, "baseline"]
    assert verdict == "pass", diagnostics


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_validation_refuses(verdicts, case):
    verdict, diagnostics = verdicts[case.module, case.name]
    assert verdict == "error", f"{case.name}: {case.inputs} was accepted ({verdict})"
    assert "Invalid value for variable" in diagnostics, diagnostics
    refused_by_its_block = flat(case.message) in diagnostics and f"variables.tf:{block_line(case)}," in diagnostics
    assert refused_by_its_block, f"{case.name}: refused, but not by its block ({case.message!r}):\n{diagnostics}"
