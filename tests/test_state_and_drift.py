"""No secret in the state, and no change a second plan would make on its own (issue 19).

Apply-time facts no offline plan shows, checked on the modules' configuration with their sources:
- a data source that sends the deployer's access token (data "http" with google_client_config's
  access_token in a header) stores it in the state, which the planner reads
  (terraform-provider-google issues 11451 and 15247; the http provider keeps request_headers in state);
- a lifecycle Delete rule matching live objects removes the deployed source object, so the next plan
  re-creates it and redeploys: `age` matches live and noncurrent objects alike, `isLive`/with_state
  "ARCHIVED" limits a rule to noncurrent ones (Cloud Storage JSON API, Bucket lifecycle.rule[].condition;
  cloud.google.com/storage/docs/lifecycle).
"""

from __future__ import annotations

import re

import hcl2
import pytest
from conftest import ROOT

MODULES_DIR = ROOT / "terraform" / "modules"
HCL = hcl2.SerializationOptions(with_comments=False, explicit_blocks=False, strip_string_quotes=True)
# Conditions that only noncurrent versions meet (a live object has no noncurrent time, no newer version).
NONCURRENT_ONLY = {"days_since_noncurrent_time", "noncurrent_time_before", "num_newer_versions"}


def module_files() -> list:
    files = sorted(MODULES_DIR.rglob("*.tf"))  # nested modules (scheduled-dedup/scheduler-jobs) too
    assert files
    return files


def token_senders(text: str) -> list[str]:
    """What would put a credential in the state: an http data source, the provider's access token."""
    found = re.findall(r'^data "http" "\w+"', text, re.M)
    found += re.findall(r"google_client_config\.\w+(?:\[\d+\])?\.access_token", text)
    return found


@pytest.mark.parametrize("path", module_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_no_module_puts_a_token_in_the_state(path):
    assert token_senders(path.read_text()) == []


def test_the_token_check_finds_the_old_existing_database_read():
    old = (
        'data "http" "existing_database" {\n  request_headers = {\n'
        '    Authorization = "Bearer ${data.google_client_config.deployer[0].access_token}"\n  }\n}\n'
    )
    assert token_senders(old) == ['data "http" "existing_database"', "google_client_config.deployer[0].access_token"]


def delete_rules_matching_live_objects(bucket: dict) -> list[dict]:
    rules = []
    for rule in bucket.get("lifecycle_rule", []):
        ((action,), (condition,)) = rule["action"], rule["condition"]  # python-hcl2: each block a list
        if action["type"] != "Delete":
            continue
        if condition.get("with_state") == "ARCHIVED" or NONCURRENT_ONLY & set(condition):
            continue
        rules.append(condition)
    return rules


def storage_buckets() -> dict[str, dict]:
    buckets = {}
    for path in module_files():
        with path.open() as file:
            parsed = hcl2.load(file, serialization_options=HCL)
        for resource in parsed.get("resource", []):
            for name, body in resource.get("google_storage_bucket", {}).items():
                buckets[f"{path.parent.name}/{name}"] = body
    return buckets


def test_no_lifecycle_rule_deletes_a_live_object():
    buckets = storage_buckets()
    # The function's source bucket: scheduled-dedup-project's (what needs project-wide rights).
    assert "scheduled-dedup-project/source" in buckets, sorted(buckets)
    assert {name: delete_rules_matching_live_objects(body) for name, body in buckets.items()} == {
        name: [] for name in buckets
    }
    # The source bucket keeps what it deletes recoverable for a while: versioned, noncurrent rule.
    source = buckets["scheduled-dedup-project/source"]
    assert source["versioning"][0]["enabled"] is True


def test_an_age_rule_is_found():
    bucket = {"lifecycle_rule": [{"condition": [{"age": 30}], "action": [{"type": "Delete"}]}]}
    assert delete_rules_matching_live_objects(bucket) == [{"age": 30}]
