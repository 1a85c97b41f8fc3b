"""Parity for issue 12's rules: the bake's rules.py (check_audit_interval, check_max_lateness) and the module's
validations of var.audit and var.jobs (one `terraform test` file). Terraform checks shapes only: an interval off
the list, a lateness below a minute; whether the interval and the settle time fit the lookback is rules.py's
alone (issue 17: no formula in HCL), checked on config.yaml by the bake, the tests and `make deploy`."""

from __future__ import annotations

import json
import re

import pytest
import rules
from conftest import DEFAULT_TIMING, ROOT
from module_plan import copy_module
from test_terraform import PARITY_PREAMBLE

from tests.terraform_offline import terraform

pytestmark = pytest.mark.terraform

MODULE_DIR = ROOT / "terraform" / "modules" / "scheduled-dedup"
# Settle = lease + retry window: 360 + 3300 = 3660 s with the default timing; 17000 + 28800 = 45800 s with SLOW.
SLOW = {"lease_seconds": 17000, "attempt_deadline_seconds": 1800, "min_backoff_seconds": 3600,
        "max_backoff_seconds": 3600}  # fmt: skip
# (audit interval, timing overrides)
AUDIT_CASES = [
    (60, {}),
    (720, {}),
    (5, {"retention_seconds": 3960}),  # 300 + 3660: just fits
    (5, {"retention_seconds": 3959}),
    (7, {}),
    (1440, {}),
    (0, {}),
    (60, {"retention_seconds": 7260}),
    (60, SLOW),  # 3600 + 45800 < 1 day
    (720, SLOW),  # 43200 + 45800 > 1 day, however long the retention
]
LATENESS_CASES = [60, 59, 3600, 0]


def hook_refuses_audit(interval: int, timing: dict[str, int]) -> bool:
    try:
        rules.check_audit_interval(str(interval), timing)
    except rules.RuleError:
        return True
    return False


def hook_refuses_lateness(seconds: int) -> bool:
    try:
        rules.check_max_lateness("job", str(seconds))
    except rules.RuleError:
        return True
    return False


def test_hook_and_terraform_agree_on_the_audit_interval_and_max_lateness(tmp_path):
    workdir = copy_module(MODULE_DIR, tmp_path / "parity")
    timing = ("attempt_deadline_seconds", "retention_seconds")
    retry = [k for k in DEFAULT_TIMING if k not in timing and k != "lease_seconds"]
    blocks = [PARITY_PREAMBLE]
    expected = {}
    rule_only = []
    for number, (interval, overrides) in enumerate(AUDIT_CASES):
        values = {**DEFAULT_TIMING, **overrides}
        assert rules.check_timing(values), "each case's timing must pass the timing rules"
        hook = hook_refuses_audit(interval, values)
        refused = interval not in rules.AUDIT_INTERVALS_MINUTES  # Terraform's: the shape
        assert hook or not refused, "what Terraform refuses, rules.py refuses too"
        rule_only.append(hook and not refused)
        expected[f"audit_{number}"] = ((interval, overrides), refused)
        timing_hcl = ", ".join(f"{k} = {values[k]}" for k in timing)
        retry_hcl = ", ".join(f"{k} = {values[k]}" for k in retry)
        blocks.append(
            f'run "audit_{number}" {{\n  command = plan\n  variables {{\n'
            f"    audit  = {{ interval_minutes = {interval} }}\n    timing = {{ {timing_hcl} }}\n"
            f"    retry  = {{ {retry_hcl} }}\n  }}\n" + ("  expect_failures = [var.audit]\n" if refused else "") + "}\n"
        )
    for number, seconds in enumerate(LATENESS_CASES):
        refused = hook_refuses_lateness(seconds)
        expected[f"lateness_{number}"] = (seconds, refused)
        blocks.append(
            f'run "lateness_{number}" {{\n  command = plan\n  variables {{\n'
            f'    jobs = {{ job = {{ schedule = "0 3 * * *", max_lateness_seconds = {seconds} }} }}\n  }}\n'
            + ("  expect_failures = [var.jobs]\n" if refused else "")
            + "}\n"
        )
    assert {refused for _, refused in expected.values()} == {True, False}, "the cases must include both verdicts"
    assert any(rule_only), "a case rules.py alone refuses (the lookback) must be among them"
    (workdir / "tests").mkdir()
    (workdir / "tests" / "parity.tftest.hcl").write_text("\n".join(blocks))
    result = terraform(workdir, "test")
    verdicts = dict(re.findall(r'run "(\w+)"\.\.\. (pass|fail)', result.stdout))
    assert len(verdicts) == len(expected), result.stdout + result.stderr
    disagree = {name: expected[name] for name, verdict in verdicts.items() if verdict != "pass"}
    assert not disagree, f"rules.py and variables.tf disagree on: {disagree}\n{result.stderr[-3000:]}"


def test_the_functions_audit_cron_is_terraforms_for_every_interval(tmp_path):
    """Issue 24 item 8: the function keys the audit's deliveries by its cron (config.Config.audit: rules.audit_cron,
    in rules.AUDIT_TIME_ZONE), the Scheduler job fires by Terraform's (audit.tf: local.audit_schedule, time_zone):
    the two formulas and zones, evaluated by Terraform itself for every interval rules.py allows."""
    import config

    audit_tf = (MODULE_DIR / "audit.tf").read_text()
    (expression,) = re.findall(r"audit_schedule = var\.audit == null \? null : \((.*?)\n  \)", audit_tf, re.S)
    (zone,) = re.findall(r'(?m)^ +time_zone\s*=\s*"([^"]+)"', audit_tf)
    intervals = list(rules.AUDIT_INTERVALS_MINUTES)
    crons = f"[for m in {intervals} : {expression.strip().replace('var.audit.interval_minutes', 'm')}]"
    (tmp_path / "main.tf").write_text(f'output "crons" {{ value = {crons} }}\n')
    applied = terraform(tmp_path, "apply", "-auto-approve", "-input=false", f"-state={tmp_path / 'state'}")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
    shown = terraform(tmp_path, "output", "-json", f"-state={tmp_path / 'state'}")
    by_terraform = json.loads(shown.stdout)["crons"]["value"]
    by_python = [rules.audit_cron(m) for m in intervals]  # what config.py gives the audit job (Config.audit)
    assert by_python == by_terraform and zone == rules.AUDIT_TIME_ZONE
    with open(config.__file__, encoding="utf-8") as source:
        assert "rules.audit_cron(minutes), rules.AUDIT_TIME_ZONE" in source.read()
