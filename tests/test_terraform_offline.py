"""Tests of the offline Terraform toolchain itself (tests/terraform_offline).

They prove that the stand-in providers make real Terraform behave as with the real
providers for what the template's suite relies on: validate catches schema errors,
terraform test with mock_provider passes and fails, fmt -check, and checkov runs.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

import pytest

# Plain `pytest` puts tests/ (not the repo root) on sys.path; make `tests.terraform_offline`
# importable either way (pyproject's `pythonpath = ["."]` would do the same).
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.terraform_offline import PROVIDERS, SCHEMA_DIR, checkov, terraform
from tests.terraform_offline.extract_schema import (
    ARCHIVE_DATA_SOURCES,
    ARCHIVE_RESOURCES,
    GOOGLE_DATA_SOURCES,
    GOOGLE_RESOURCES,
    HTTP_DATA_SOURCES,
    HTTP_RESOURCES,
    TIME_DATA_SOURCES,
    TIME_RESOURCES,
)

pytestmark = pytest.mark.terraform

MAIN_TF = """\
terraform {
  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 8.7"
    }
    archive = {
      source = "hashicorp/archive"
    }
  }
}

provider "google" {
  project = "my-project"
  region  = "europe-west1"
}

data "google_project" "this" {}

data "archive_file" "src" {
  type        = "zip"
  source_dir  = "${path.module}/src"
  output_path = "${path.module}/build/src.zip"
}

resource "google_service_account" "invoker" {
  account_id = "nightly-invoker"
}

resource "google_cloud_scheduler_job" "nightly" {
  name             = "nightly"
  schedule         = "0 3 * * *"
  time_zone        = "Etc/UTC"
  attempt_deadline = "300s"

  retry_config {
    retry_count          = 3
    min_backoff_duration = "10s"
    max_backoff_duration = "300s"
    max_doublings        = 3
  }

  http_target {
    uri         = "https://example.invalid/run?src=${data.archive_file.src.output_md5}"
    http_method = "POST"
    oidc_token {
      service_account_email = google_service_account.invoker.email
    }
  }
}

output "retry_count" {
  value = google_cloud_scheduler_job.nightly.retry_config[0].retry_count
}

output "project_number" {
  value = data.google_project.this.number
}
"""


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        p = root / name
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text))
    return root


def _out(r) -> str:
    return r.stdout + r.stderr


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return _write(tmp_path, {"main.tf": MAIN_TF, "src/main.py": "print('hi')\n"})


def test_validate_accepts_a_scheduler_job(config: Path) -> None:
    r = terraform(config, "validate")
    assert r.returncode == 0, _out(r)
    assert "The configuration is valid" in r.stdout
    assert not (config / ".terraform.lock.hcl").exists()


def test_validate_typo_gets_did_you_mean(config: Path) -> None:
    main = config / "main.tf"
    main.write_text(main.read_text().replace("attempt_deadline =", "attempt_deadlin ="))
    r = terraform(config, "validate")
    assert r.returncode != 0
    assert 'An argument named "attempt_deadlin" is not expected here' in _out(r)
    assert 'Did you mean "attempt_deadline"?' in " ".join(_out(r).split())


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # retry_config is a list block with max_items = 1
        ("  retry_config {", "  retry_config {}\n  retry_config {", "Too many retry_config blocks"),
        # retry_count is a number
        ("retry_count          = 3", 'retry_count          = "three"', "a number is required"),
        # state is computed-only
        ('time_zone        = "Etc/UTC"', 'state = "ENABLED"', 'Can\'t configure a value for "state"'),
        # name is required
        ('  name             = "nightly"\n', "", 'The argument "name" is required'),
        # oidc_token is a block, not an attribute
        ("    oidc_token {", "    oidc_token = {", 'An argument named "oidc_token" is not expected here'),
    ],
    ids=["max-items", "type", "computed-only", "required", "block-not-attribute"],
)
def test_validate_checks_schema_structure(config: Path, old: str, new: str, message: str) -> None:
    main = config / "main.tf"
    text = main.read_text()
    assert old in text
    main.write_text(text.replace(old, new, 1))
    r = terraform(config, "validate")
    assert r.returncode != 0, _out(r)
    assert message in " ".join(_out(r).split()), _out(r)


def test_validate_required_nested_block(tmp_path: Path) -> None:
    _write(
        tmp_path,
        {
            "main.tf": """\
            resource "google_cloud_run_v2_job" "j" {
              name     = "j"
              location = "europe-west1"
            }
            """
        },
    )
    r = terraform(tmp_path, "validate")
    assert r.returncode != 0
    assert 'At least 1 "template" blocks are required' in " ".join(_out(r).split()), _out(r)


TEST_TMPL = """\
mock_provider "google" {}
mock_provider "archive" {}

run "scheduler_retries" {
  command = plan

  assert {
    condition     = google_cloud_scheduler_job.nightly.retry_config[0].retry_count == %s
    error_message = "retry_count is not %s"
  }
}

run "applied_outputs" {
  assert {
    condition     = output.retry_count == 3
    error_message = "output retry_count"
  }
}
"""


def test_terraform_test_with_mock_provider_passes(config: Path) -> None:
    _write(config, {"tests/nightly.tftest.hcl": TEST_TMPL % (3, 3)})
    r = terraform(config, "test")
    assert r.returncode == 0, _out(r)
    assert "2 passed, 0 failed" in r.stdout
    assert not (config / ".terraform.lock.hcl").exists()


def test_terraform_test_with_mock_provider_fails(config: Path) -> None:
    _write(config, {"tests/nightly.tftest.hcl": TEST_TMPL % (4, 4)})
    r = terraform(config, "test")
    assert r.returncode != 0
    assert 'run "scheduler_retries"... fail' in r.stdout
    assert "retry_count is not 4" in _out(r)


def test_unmocked_reads_fail_clearly(config: Path) -> None:
    _write(config, {"tests/nightly.tftest.hcl": TEST_TMPL.replace('mock_provider "archive" {}\n', "") % (3, 3)})
    r = terraform(config, "test")
    assert r.returncode != 0
    assert "not supported offline" in _out(r)


def test_init_with_local_module_then_validate(config: Path) -> None:
    _write(
        config,
        {
            "modules/bucket/main.tf": """\
            variable "name" {
              type = string
            }

            resource "google_storage_bucket" "this" {
              name                        = var.name
              location                    = "EU"
              uniform_bucket_level_access = true
            }
            """,
            "bucket.tf": """\
            module "bucket" {
              source = "./modules/bucket"
              name   = "b"
            }
            """,
        },
    )
    r = terraform(config, "validate")
    assert r.returncode != 0 and "Module not installed" in _out(r)
    r = terraform(config, "init", "-backend=false")
    assert r.returncode == 0, _out(r)
    r = terraform(config, "validate")
    assert r.returncode == 0, _out(r)
    assert not (config / ".terraform.lock.hcl").exists()


def test_fmt_check(config: Path) -> None:
    r = terraform(config, "fmt", "-check", "-recursive")
    assert r.returncode == 0, _out(r)
    _write(config, {"modules/x/bad.tf": 'resource "google_service_account" "a" {\naccount_id="x"\n}\n'})
    before = (config / "modules/x/bad.tf").read_text()
    r = terraform(config, "fmt", "-check", "-recursive")
    assert r.returncode != 0
    assert "bad.tf" in r.stdout
    assert (config / "modules/x/bad.tf").read_text() == before  # -check does not rewrite


def test_checkov_reports_builtin_and_custom_checks(tmp_path: Path) -> None:
    tf_dir = _write(
        tmp_path / "tf",
        {
            "main.tf": """\
            resource "google_storage_bucket" "b" {
              name     = "b"
              location = "EU"
            }

            resource "google_cloud_scheduler_job" "j" {
              name     = "j"
              schedule = "0 3 * * *"
            }
            """
        },
    )
    checks = _write(
        tmp_path / "checks",
        {
            "deadline.yaml": """\
            metadata:
              id: "CKV2_TMPL_1"
              name: "Scheduler jobs set attempt_deadline"
              category: "GENERAL_SECURITY"
            definition:
              cond_type: "attribute"
              resource_types:
                - "google_cloud_scheduler_job"
              attribute: "attempt_deadline"
              operator: "exists"
            """
        },
    )
    r = checkov(tf_dir, "--compact", "-o", "json", external_checks_dir=checks)
    assert r.returncode == 1, _out(r)
    report = json.loads(r.stdout)
    failed = {c["check_id"] for c in report["results"]["failed_checks"]}
    assert "CKV_GCP_29" in failed  # uniform bucket-level access (builtin)
    assert "CKV2_TMPL_1" in failed  # the custom check


def test_schema_subset_is_complete() -> None:
    google = json.loads((SCHEMA_DIR / "google.json").read_text())
    archive = json.loads((SCHEMA_DIR / "archive.json").read_text())
    time = json.loads((SCHEMA_DIR / "time.json").read_text())
    http = json.loads((SCHEMA_DIR / "http.json").read_text())
    assert set(google["resource_schemas"]) == set(GOOGLE_RESOURCES)
    assert set(google["data_source_schemas"]) == set(GOOGLE_DATA_SOURCES)
    assert set(archive["resource_schemas"]) == set(ARCHIVE_RESOURCES)
    assert set(archive["data_source_schemas"]) == set(ARCHIVE_DATA_SOURCES)
    assert set(time["resource_schemas"]) == set(TIME_RESOURCES)
    assert set(time["data_source_schemas"]) == set(TIME_DATA_SOURCES)
    assert set(http["resource_schemas"]) == set(HTTP_RESOURCES)
    assert set(http["data_source_schemas"]) == set(HTTP_DATA_SOURCES)
    assert {"project", "region", "zone", "credentials"} <= set(google["provider"]["block"]["attributes"])
    assert set(PROVIDERS) == {"google", "google-beta", "archive", "time", "http"}


TIME_SLEEP_TF = """\
terraform {
  required_providers {
    time = {
      source = "hashicorp/time"
    }
  }
}

resource "time_sleep" "wait" {
  create_duration = "30s"
  triggers        = { key = "value" }
}
"""


def test_time_provider_schema_is_served(tmp_path: Path) -> None:
    """hashicorp/time's time_sleep validates against the schema from cdktn-provider-time; a
    misspelled argument and a computed-only one are refused, as the real provider would."""
    _write(tmp_path, {"main.tf": TIME_SLEEP_TF})
    r = terraform(tmp_path, "validate")
    assert r.returncode == 0, _out(r)
    (tmp_path / "main.tf").write_text(TIME_SLEEP_TF.replace("create_duration", "create_durration"))
    r = terraform(tmp_path, "validate")
    assert r.returncode != 0
    assert 'An argument named "create_durration" is not expected here' in _out(r), _out(r)
    (tmp_path / "main.tf").write_text(TIME_SLEEP_TF.replace('create_duration = "30s"', 'id = "x"'))
    r = terraform(tmp_path, "validate")
    assert r.returncode != 0
    assert 'Can\'t configure a value for "id"' in " ".join(_out(r).split()), _out(r)


def test_sensitive_output_needs_marking(tmp_path: Path) -> None:
    # Terraform checks this at plan time (validate sees unknown data source values).
    _write(
        tmp_path,
        {
            "main.tf": """\
            data "google_client_config" "me" {}

            output "token" {
              value = data.google_client_config.me.access_token
            }
            """,
            "tests/plan.tftest.hcl": """\
            mock_provider "google" {}

            run "plan" {
              command = plan
            }
            """,
        },
    )
    r = terraform(tmp_path, "test")
    assert r.returncode != 0
    assert "Output refers to sensitive values" in _out(r), _out(r)
