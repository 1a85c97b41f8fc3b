"""Shared fixtures for the template's own tests: bakes (the Firestore emulator, `emulator_host`, is the tools package's
pytest plugin, as in a bake: one for the whole run).

The emulator helper is the tools package's (packages/scheduled-dedup-tools) that bakes pin, so there is one copy of it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cookiecutter.generate import generate_context
from cookiecutter.main import cookiecutter
from cookiecutter.prompt import prompt_for_config

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PROJECT = ROOT / "{{cookiecutter.project_slug}}"
# The bakes' tools: a package of this repository that each bake pins (hooks/baking.py, tools_requirement); this
# checkout's copy is installed editable in the template's venv (requirements-dev.txt).
TOOLS_SOURCE = ROOT / "packages" / "scheduled-dedup-tools" / "src" / "scheduled_dedup_tools"
sys.path.insert(0, str(ROOT / "benchmarks"))  # the benchmarks the tests run in a tiny mode (cost, bake_size...)
sys.path.insert(0, str(ROOT / "tests" / "proofs" / "harness"))  # the proofs' harness (tests/test_rules.py)
sys.path.insert(0, str(ROOT / "tests" / "proofs"))
sys.path.insert(0, str(ROOT / "hooks"))
sys.path.insert(0, str(TEMPLATE_PROJECT))  # rules.py, the rules the hook, the bake and its tests share

import baking  # noqa: E402
import prove  # noqa: E402  (tests/proofs/prove.py: lays the proofs into a copy of a bake)
import questions  # noqa: E402
import rules  # noqa: E402

DEFAULTS = json.loads((ROOT / "cookiecutter.json").read_text())
# The modules the bakes of these tests call: this working tree's, offline. An absolute path is a package Terraform
# links into .terraform/modules (Terraform's "Module Sources": not a local path); its sub-directory after "//" is
# the module, so the core module's "../image-repository" resolves in the same package.
MODULE_SOURCE = f"{ROOT / baking.MODULES_DIR}//{baking.MODULE}"
# A module call of a bake's root: the name of its block and the module's directory, the last part of its address.
MODULE_CALL = re.compile(r'^module "(\w+)" \{\n  source = "[^"]*/([\w-]+)(?:\?[^"]*)?"', re.M)


def root_configuration(root: Path) -> str:
    """The text of a Terraform root's *.tf files: main.tf calls the core module, the target's target.tf (its overlay,
    baking.TARGETS_DIR) its own."""
    return "\n".join(path.read_text() for path in sorted(root.glob("*.tf")))


def called_modules(project: Path, modules: Path = ROOT / baking.MODULES_DIR) -> list[Path]:
    """The modules a bake's roots call (the last part of each address; in `modules`, this working tree's by default,
    as MODULE_SOURCE bakes), the ones those call beside them (the core's ../image-repository) and within them (the
    core's ./scheduler-jobs)."""
    roots = [project / "terraform", project / "terraform" / "bootstrap"]
    names = {name for root in roots for _, name in MODULE_CALL.findall(root_configuration(root))}
    called = {(modules / name).resolve() for name in names}
    local = re.compile(r'^  source += "(\.\.?/[\w-]+)"$', re.M)
    called |= {
        (module / source).resolve()
        for module in list(called)
        for path in module.glob("*.tf")
        for source in local.findall(path.read_text())
    }
    return sorted(called)


def extra_context(answers: dict[str, object]) -> dict[str, object]:
    """Answers under cookiecutter.json's names: the unasked settings (timing) under their "__" names."""
    return baking.as_extra_context(answers, DEFAULTS)


def rendered_answers(answers: dict[str, object] | None = None) -> dict[str, object]:
    """The answers a `--no-input` bake with these overrides gets, under the bake's names: cookiecutter renders
    the defaults that follow earlier answers; `jobs` stays as given (text or an object), as the hook sees it."""
    context = generate_context(context_file=str(ROOT / "cookiecutter.json"), extra_context=extra_context(answers or {}))
    return baking.public_answers(prompt_for_config(context, no_input=True))


DEFAULT_ANSWERS = rendered_answers()


def default_timing() -> dict[str, int]:
    """A default bake's numbers, as rules.py gives them: config.yaml's defaults block (config_from_answers), its
    job's lease (resolve_job_timing: the deadline + 60) and the retention."""
    config = questions.config_from_answers(DEFAULT_ANSWERS)
    (job_id,) = json.loads(DEFAULT_ANSWERS["jobs"])
    job = rules.resolve_job_timing(job_id, {}, config["defaults"])
    checked = rules.check_timing({**job, "retention_seconds": config["retention_seconds"]})
    return {key: checked[key] for key in (*rules.TIMING_KEYS, "retention_seconds")}


DEFAULT_TIMING = default_timing()


# The bakes every check runs on (tests/test_bake.py: rendering, lint, the baked suite;
# tests/test_terraform.py: fmt, validate, terraform test, checkov). Each varies what the code or the
# Terraform depends on; ids name what.
MATRIX: dict[str, dict[str, object]] = {
    "defaults": {},
    "quoted-name-named-db": {
        "project_name": 'Bob\'s "Quarterly" \\ Report 🚀',  # quotes, backslash, emoji: the TOML description
        "firestore_database": "dedup-runs",
        "firestore_collection": "runs",
        "region": "us-central1",
    },
    "several-jobs-no-retries": {
        "project_name": "Many Jobs",
        "jobs": {
            # A step schedule in a DST zone, sparse enough for a run of the longest timeout (3600 s): every
            # 3 hours is at least 2 hours apart, even across the spring-forward night (rules.py).
            # Paused (issue 18): Scheduler pauses it, the audit reports its fire times paused.
            "every-3-hours": {"schedule": "0 */3 * * *", "time_zone": "Europe/Madrid", "paused": True},
            # A report that must not start more than an hour late (max_lateness_seconds, issue 12), caught up by
            # the audit through the deliveries queue while within that hour (catch_up, issue 18).
            "weekdays": {
                "schedule": "30 8 * * MON-FRI",
                "time_zone": "America/New_York",
                "max_lateness_seconds": 3600,
                "catch_up": True,
            },
        },
        "retry_count": 0,
        "attempt_deadline_seconds": 1800,
        "lease_seconds": 3630,
        "retention_seconds": 86400,
    },
    # The proxy targets: the handler starts a Cloud Run job / a Workflows execution per claimed run.
    "cloud-run-job": {
        "project_name": "Ledger Sync",
        "target": "cloud_run_job",
        "region": "us-central1",
        "jobs": {
            "hourly": {"schedule": "0 * * * *", "time_zone": "America/New_York"},
            "month-end": {"schedule": "30 23 28-31 * mon-fri", "time_zone": "Etc/UTC"},
        },
        "attempt_deadline_seconds": 600,
        "lease_seconds": 960,
        "retry_count": 5,
        # Waits 60 + 120 + 240 + 480 + 600 = 1500 s, past the 960 s lease.
        "min_backoff_seconds": 60,
        "max_backoff_seconds": 600,
        "max_retry_duration_seconds": 3600,
        "retention_seconds": 86400,
        # Team delivery: a gcs backend, terraform/bootstrap and the plan/apply jobs (tests/test_bootstrap.py).
        "state_bucket": "ledger-tf-state",
        "repository": "ledger-org/ledger-sync",
    },
    "workflow": {
        "project_name": "Invoice Runner",
        "gcp_project_id": "billing-prod-42",
        "target": "workflow",
        "jobs": {"daily": {"schedule": "15 6 * * *", "time_zone": "Europe/Madrid"}},
        "retry_count": 0,
        "firestore_database": "scheduler-db",
        "firestore_collection": "invoice_runs",
        "state_bucket": "billing_tf_state-42",
        "repository": "Billing-Team/invoice.runner",
    },
}


def bake(output_dir: Path, **answers: object) -> Path:
    """Bake the template with defaults overridden by `answers`; returns the project directory."""
    return Path(
        cookiecutter(
            str(ROOT),
            no_input=True,
            extra_context=extra_context({"_module_source": MODULE_SOURCE, **answers}),
            output_dir=str(output_dir),
            accept_hooks=True,
        )
    )


def config_file(project: Path, path: Path, /, **keys: object) -> dict[str, str]:
    """`project`'s config.yaml with `keys` (its top-level keys) changed, written at `path`; the environment that runs
    the project's function and tools by it (CONFIG_YAML: the bake's config.FILE_VARIABLE). A test's own project or
    collection keeps its runs apart from other tests' on the shared emulator."""
    import yaml

    raw = yaml.safe_load((project / "config.yaml").read_text(encoding="utf-8"))
    path.write_text(yaml.safe_dump({**raw, **keys}), encoding="utf-8")
    return {"CONFIG_YAML": str(path)}


def proved(project: Path) -> Path:
    """A copy of the bake beside it with the template's proofs laid in (tests/proofs/prove.py)."""
    return prove.lay(project, project.parent / "proved" / project.name)


def run_baked_suite(project: Path, emulator_host: str, *pytest_args: str) -> subprocess.CompletedProcess[str]:
    """The baked project's own test suite, in this venv, against the shared emulator."""
    env = {
        **os.environ,
        "FIRESTORE_EMULATOR_HOST": emulator_host,
        # Isolates this bake's data from other bakes' on the shared emulator.
        "DEDUP_TEST_PROJECT": f"bake-{project.name}"[:30].rstrip("-"),
    }
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *pytest_args],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def run_proofs(project: Path, emulator_host: str, *pytest_args: str) -> subprocess.CompletedProcess[str]:
    """The template's proofs in a laid-in copy of the bake (`proved`), against the shared emulator."""
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, "DEDUP_TEST_PROJECT": f"proofs-{project.name}"[:30]}
    return prove.run(proved(project), *pytest_args, env=env, capture_output=True, text=True, timeout=1500)


# What a bake reads: the variables, the hooks, the baked tree, the Terraform modules it calls and the release.
TEMPLATE_PARTS = ("VERSION", "cookiecutter.json", "hooks", "terraform", "{{cookiecutter.project_slug}}")
IGNORED = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".ruff_cache", ".terraform*", "node_modules")


def git_commit(repo: Path, message: str) -> None:
    subprocess.run(["git", "add", "-A"], cwd=repo, check=True, timeout=120)
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", *identity, "commit", "-qm", message], cwd=repo, check=True, timeout=120)


def copy_template(repo: Path) -> Path:
    """A copy of this working tree's template in `repo` (made, or one that holds none of its parts), no git
    repository."""
    repo.mkdir(exist_ok=True)
    for part in TEMPLATE_PARTS:
        source = ROOT / part
        if source.is_dir():
            shutil.copytree(source, repo / part, ignore=IGNORED)
        else:
            shutil.copy2(source, repo / part)
    return repo


@pytest.fixture
def template_repo(tmp_path):
    """A copy of this working tree's template in a git repository of its own (as cruft expects one), committed."""
    repo = copy_template(tmp_path / "template")
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=repo, check=True, timeout=60)
    git_commit(repo, "template v1")
    return repo


# `make test-fast` (pytest -m fast): what a change to one module needs. The template's tests that neither bake
# projects nor run Terraform (the markers `bake` and `terraform`), and one default bake's own suite, lint and
# rendering; `make test` runs the rest (the matrix of bakes, the proofs, Terraform's plans, cruft, the upgrade).
FAST_BAKE = "defaults"
FAST_BAKE_TESTS = (
    "test_nothing_is_left_unrendered",
    "test_baked_code_is_ruff_clean",
    "test_baked_suite_passes_against_the_shared_emulator",
    "test_answers_are_recorded",
)


@pytest.hookimpl(tryfirst=True)  # before pytest's own -m deselects by the marker it adds
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        slow = item.get_closest_marker("bake") or item.get_closest_marker("terraform")
        params = getattr(item, "callspec", None) and item.callspec.params
        in_the_fast_bake = (
            getattr(item, "originalname", "") in FAST_BAKE_TESTS and (params or {}).get("baked") == FAST_BAKE
        )
        if not slow or in_the_fast_bake:
            item.add_marker(pytest.mark.fast)
