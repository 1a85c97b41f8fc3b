"""Metrics and alert policies of the module (monitoring.tf, audit.tf), from offline plans.

Issue 19: monitoring that does not grow with the jobs (one metric and one policy per concern,
labelled and grouped by job), every way to lose a run alerts (stuck runs, the audit's own
Scheduler attempts, the audit itself stopping), and the metrics wait.
"""

from __future__ import annotations

import collections
import re

import cost
import pytest
from conftest import ROOT
from module_plan import hcl_jobs, plan_runs

pytestmark = pytest.mark.terraform

SLUG = "dash"  # module_plan.PREAMBLE
AUDIT_INTERVALS = [5, 60, 720]  # the shortest, an hour, the longest (variables.tf, var.audit)


def jobs(count: int) -> dict[str, str]:
    return {f"job-{index:03d}": "0 3 * * *" for index in range(count)}


@pytest.fixture(scope="module")
def plans(tmp_path_factory) -> dict[str, dict[str, dict]]:
    def variables(count: int, minutes: int) -> str:
        return f"    jobs  = {hcl_jobs(jobs(count))}\n    audit = {{ interval_minutes = {minutes} }}"

    runs = {f"jobs_{count}": variables(count, 30) for count in (30, 300)}
    runs |= {f"audit_{minutes}": variables(2, minutes) for minutes in AUDIT_INTERVALS}
    runs["proxy"] = variables(2, 30) + "\n    follows_executions = true"  # a proxy bake's (its terraform/main.tf)
    return plan_runs(tmp_path_factory.mktemp("monitoring"), runs)


@pytest.fixture(scope="module")
def planned(plans) -> dict[str, dict]:
    return plans["audit_5"]


def per_type(plan: dict[str, dict]) -> collections.Counter:
    """How many instances of each resource (its address without the instance key)."""
    return collections.Counter(re.sub(r"\[.*\]$", "", address) for address in plan)


def test_only_the_scheduler_jobs_grow_with_the_jobs(plans):
    """Issue 19 item 10: per job a Scheduler job, a metric, an alert policy and four dashboard tiles
    (46 + 3N resources) ran into the quotas: log-based metrics (500 per project) at N = 489, alert
    policies at N = 496, and the dashboard's 100 widgets at N = 26. With 30 and with 300 jobs every
    concern has the same resources; only the Scheduler jobs are one per job. (The fixed part: 58, the two instants
    of history.tf, the Cloud Tasks audit log configuration, and apis.tf's terraform_data.apis, the one node that
    stands for the APIs' readiness since scheduled-dedup-project enables them.)"""
    small, large = per_type(plans["jobs_30"]), per_type(plans["jobs_300"])
    jobs = "module.scheduler_jobs.google_cloud_scheduler_job.this"
    assert small[jobs] == 30 and large[jobs] == 300
    del small[jobs], large[jobs]
    assert small == large, {kind: (small[kind], large[kind]) for kind in small.keys() | large.keys()}
    assert sum(large.values()) <= 62, large


def test_every_alert_policy_on_a_job_labelled_metric_groups_by_job(planned):
    """One policy per concern, and an incident per job: a policy reading a metric with a `job`
    label groups by it, so each job is its own time series and the incident names it."""
    labelled = {
        values["name"]
        for address, values in planned.items()
        if address.startswith("google_logging_metric.")
        and any(label["key"] == "job" for label in values["metric_descriptor"][0]["labels"])
    }
    policies = {a: v for a, v in planned.items() if a.startswith("google_monitoring_alert_policy.")}
    grouped = []
    for address, policy in policies.items():
        (condition,) = policy["conditions"]
        (threshold,) = condition["condition_threshold"] or condition["condition_absent"]
        (metric,) = re.findall(r'metric\.type="logging\.googleapis\.com/user/([^"]+)"', threshold["filter"])
        if metric in labelled:
            assert threshold["aggregations"][0]["group_by_fields"] == ["metric.label.job"], address
            grouped.append(address)
    assert sorted(grouped) == [
        'google_monitoring_alert_policy.audit_finding["missing"]',
        'google_monitoring_alert_policy.audit_finding["stuck"]',
        'google_monitoring_alert_policy.outcome["misconfigured"]',
        'google_monitoring_alert_policy.outcome["retryable_failure"]',
        'google_monitoring_alert_policy.outcome["store_unavailable"]',
        'google_monitoring_alert_policy.outcome["terminal_failure"]',
        "google_monitoring_alert_policy.scheduler_attempt_failed[0]",
    ]


def test_stuck_runs_alert_like_missed_ones(planned):
    """Issue 19 item 9: a stuck run had a metric and no alert."""
    stuck = planned['google_monitoring_alert_policy.audit_finding["stuck"]']
    (condition,) = stuck["conditions"]
    assert condition["condition_threshold"][0]["filter"] == (
        f'metric.type="logging.googleapis.com/user/{SLUG}-run-stuck" AND resource.type="cloud_run_revision"'
    )
    assert planned['google_logging_metric.audit["stuck"]']["name"] == f"{SLUG}-run-stuck"
    assert "docs/operations.md" in stuck["documentation"][0]["content"]


def scheduler_pattern(planned) -> re.Pattern:
    metric = planned["google_logging_metric.scheduler_attempt_failed"]
    (pattern,) = re.findall(r'resource\.labels\.job_id=~"([^"]+)"', metric["filter"])
    return re.compile(pattern)


def test_one_attempt_metric_covers_every_job_and_the_audit(planned):
    """Issue 19 item 9: the audit's own Scheduler job was in no attempt-failure metric, so an audit
    that never reached the handler (403, 404, ...) was silent. One metric, labelled by the Scheduler
    job id, matches every job of this bake and the audit, and no job of another slug."""
    metric = planned["google_logging_metric.scheduler_attempt_failed"]
    assert metric["label_extractors"] == {"job": "EXTRACT(resource.labels.job_id)"}
    assert 'resource.labels.location="europe-west1"' in metric["filter"]
    audit_job = planned['module.audit_job.google_cloud_scheduler_job.this["audit"]']["name"]
    names = [values["name"] for a, values in planned.items() if ".google_cloud_scheduler_job." in a]
    assert audit_job in names and len(names) == 3
    pattern = scheduler_pattern(planned)
    assert all(pattern.fullmatch(name) for name in names), (pattern.pattern, names)
    for other in ["other-job-000", "dashx-job-000", f"{SLUG}", f"{SLUG}_audits", f"x{SLUG}-job-000", f"{SLUG}-"]:
        assert not pattern.fullmatch(other), other


def test_the_audit_stopping_alerts_after_two_audit_intervals(plans):
    """Issue 19 item 9: a dead man's switch on the audit's summary line. Its duration is two audit
    intervals (one late audit does not page). MetricAbsence.duration: at least 120 s, whole minutes
    (Monitoring API v3, AlertPolicy.Condition.MetricAbsence)."""
    for minutes in AUDIT_INTERVALS:
        planned = plans[f"audit_{minutes}"]
        policy = planned["google_monitoring_alert_policy.audit_silent[0]"]
        (condition,) = policy["conditions"]
        assert condition["condition_threshold"] == []
        (absent,) = condition["condition_absent"]
        seconds = int(absent["duration"].removesuffix("s"))
        assert seconds == 2 * minutes * 60, (minutes, absent["duration"])
        assert seconds >= 120 and seconds % 60 == 0 and seconds <= 86400
        # Summed across revisions: a deploy's new revision must not leave the old series silent.
        assert absent["aggregations"][0]["cross_series_reducer"] == "REDUCE_SUM"
        assert int(absent["aggregations"][0]["alignment_period"].removesuffix("s")) <= seconds
        metric = planned["google_logging_metric.audit_ran[0]"]
        assert absent["filter"] == (
            f'metric.type="logging.googleapis.com/user/{metric["name"]}" AND resource.type="cloud_run_revision"'
        )


def test_the_switch_counts_a_field_every_audit_summary_logs(planned):
    """The audit_ran metric counts the lines that hold the field; audit.py's summary line sets it on
    every audit (tests/proofs/test_audit.py checks it with an audit that found nothing)."""
    metric = planned["google_logging_metric.audit_ran[0]"]
    assert f'resource.labels.service_name="{SLUG}"' in metric["filter"]
    (field,) = re.findall(r"jsonPayload\.(\w+):\*", metric["filter"])
    source = (ROOT / "{{cookiecutter.project_slug}}" / "audit.py").read_text()
    (summary_fields,) = re.findall(r'"json_fields": \{"audit_summary": .*\}', source)
    assert f'"{field}": ' in summary_fields, summary_fields


def test_every_policy_waits_600_seconds_after_the_metrics(planned):
    """Issue 19 item 8: a log-based metric is 404 for "up to 10 minutes" after its creation
    (terraform-provider-google issue 11102); the ordering itself is tests/test_terraform.py's
    test_graph_orders_every_wait."""
    assert planned["time_sleep.metrics"]["create_duration"] == "600s"
    waited = set(planned["time_sleep.metrics"]["triggers"]["metrics"].split(","))
    read = {
        name
        for address, policy in planned.items()
        if address.startswith("google_monitoring_alert_policy.")
        for condition in policy["conditions"]
        for kind in ("condition_threshold", "condition_absent")
        for part in condition[kind]
        for name in re.findall(r'metric\.type="logging\.googleapis\.com/user/([^"]+)"', part["filter"])
    }
    assert read and read <= waited, read - waited


def test_the_cost_tool_counts_the_conditions_the_module_makes(plans):
    """A bake's docs/cost.md alerting line: benchmarks/cost.py's ALERT_CONDITIONS, whatever the number of jobs, by
    var.follows_executions: a proxy bake's module alerts on its failed executions too (executions.tf)."""
    for run, follows_executions in (("jobs_30", False), ("jobs_300", False), ("proxy", True)):
        conditions = sum(
            len(values["conditions"])
            for address, values in plans[run].items()
            if address.startswith("google_monitoring_alert_policy.")
        )
        assert conditions == cost.ALERT_CONDITIONS[follows_executions], (run, conditions)


def test_every_outcome_has_a_metric_but_the_ones_operations_md_names():
    """The module's local.outcomes (one log-based metric each) against outcomes.Outcome: an outcome added to the
    handler gets a metric, or operations.md says it has none."""
    module = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "main.tf").read_text()
    counted = set(re.findall(r'"([a-z_]+)"', re.search(r"^  outcomes = \[(.*)\]$", module, re.M).group(1)))
    code = (ROOT / "{{cookiecutter.project_slug}}" / "outcomes.py").read_text()
    enum = re.search(r"^class Outcome\b.*?(?=^\S)", code, re.M | re.S).group(0)
    answered = set(re.findall(r'^    [A-Z_]+ = "([a-z_]+)"', enum, re.M))
    docs = (ROOT / "{{cookiecutter.project_slug}}" / "docs" / "operations.md").read_text()
    sentence = re.search(r"one per outcome but (.*?) \(search", docs, re.S).group(1)
    uncounted = set(re.findall(r"`([a-z_]+)`", sentence))
    assert answered and uncounted <= answered
    assert counted == (answered - uncounted) | {"takeover"}  # takeover: a line of its own, before the outcome's
