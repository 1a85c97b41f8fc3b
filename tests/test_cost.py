"""benchmarks/cost.py: a month's bill from a bake's configuration, and a bake's docs/cost.md table made by it."""

from __future__ import annotations

import datetime as dt
import re
import subprocess
import sys

import cost
import pytest
from conftest import ROOT, TEMPLATE_PROJECT, bake

TARGETS = ("function", "cloud_run_job", "workflow")
# Each target's table, in its overlay's part (docs/cost.md includes the bake's own): no answer is rendered in it.
TABLES = {target: TEMPLATE_PROJECT / "_targets" / target / "_parts" / "cost-table.md" for target in TARGETS}
DAY = dt.timedelta(days=1)


@pytest.mark.parametrize("target", TARGETS)
def test_the_docs_tables_are_the_functions(target):
    """One formula: each target's table is what `python benchmarks/cost.py --table [--proxy]` prints."""
    (table,) = re.findall(
        r"<!-- cost-table(?: proxy)? -->\n(.*?)\n<!-- /cost-table -->", TABLES[target].read_text(), re.S
    )
    assert table == cost.table(follows_executions=target != "function")


@pytest.mark.bake
@pytest.mark.parametrize("target", TARGETS)
def test_a_bakes_cost_page_shows_its_own_targets_table(tmp_path, target):
    """A proxy bake's module alerts on failed and overdue executions too (executions.tf, audit.tf): its page counts
    those conditions."""
    doc = (bake(tmp_path, target=target) / "docs" / "cost.md").read_text()
    (table,) = re.findall(r"<!-- cost-table(?: proxy)? -->\n(.*?)\n<!-- /cost-table -->", doc, re.S)
    assert table == cost.table(follows_executions=target != "function")


def test_the_doc_states_what_per_job_alert_policies_cost():
    """100 jobs with one Scheduler-attempt policy each: 4 outcomes + 100 + the missed run = 105 conditions."""
    assert f"${105 * cost.PRICES['alert_condition']:.2f} a month" in (ROOT / "docs" / "cost-model.md").read_text()


def test_an_hourly_job_fires_720_times_a_month_and_a_daily_one_30():
    assert cost.fires_per_month("0 * * * *", "Etc/UTC") == 720
    assert cost.fires_per_month("30 2 * * *", "Europe/Madrid") == 30


def test_a_bad_schedule_names_itself():
    with pytest.raises(ValueError, match=r"schedule='61 \* \* \* \*'"):
        cost.fires_per_month("61 * * * *", "Etc/UTC")


def test_the_audit_is_a_scheduler_job_past_the_three_free_ones():
    """Scheduler bills each job past three per billing account, and the audit is one."""
    two = cost.monthly_cost(cost.usage({"a": 720, "b": 720}, 60, DAY, "db"))
    three = cost.monthly_cost(cost.usage({"a": 720, "b": 720, "c": 720}, 60, DAY, "db"))
    assert two["Cloud Scheduler"] == 0
    assert three["Cloud Scheduler"] == pytest.approx(cost.PRICES["scheduler_job"])


def test_the_audit_reads_each_run_once_a_daily_sweep_and_its_bookmark():
    """docs/audit.md, "RPC cost": an hourly job, an hourly audit, a day's lookback: per hour the bookmark
    and the run that settled, and the daily sweep's 24 runs spread over the day."""
    use = cost.usage({"hourly": 720}, 60, DAY, "db")
    assert use.firestore_reads == 720 * (1 + 1 + 1)
    assert use.requests == 720 + 720  # the job's runs and the audit's own
    assert use.firestore_writes == 2 * use.requests + 720  # claims, finishes and the bookmark
    assert use.firestore_deletes == use.requests


def test_only_the_default_database_has_free_reads_and_writes():
    fires = {f"job-{index}": 43_200 for index in range(100)}  # every minute: past the free reads
    named = cost.monthly_cost(cost.usage(fires, 60, DAY, "runs-db"))
    default = cost.monthly_cost(cost.usage(fires, 60, DAY, "(default)"))
    reads = cost.usage(fires, 60, DAY, "runs-db").firestore_reads
    assert named["Firestore reads"] == pytest.approx(reads * cost.PRICES["firestore_read"])
    free = cost.PRICES["firestore_free_reads_per_day"] * cost.DAYS
    assert reads > free
    assert default["Firestore reads"] == pytest.approx((reads - free) * cost.PRICES["firestore_read"])


def test_the_alerting_line_does_not_grow_with_the_jobs():
    one = cost.monthly_cost(cost.usage({"a": 720}, 60, DAY, "db"))
    hundred = cost.monthly_cost(cost.usage({f"j{index}": 720 for index in range(100)}, 60, DAY, "db"))
    assert one["Cloud Monitoring (alerting)"] == hundred["Cloud Monitoring (alerting)"] > 0


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return bake(tmp_path_factory.mktemp("cost"))


def run_tool(*argv: object) -> subprocess.CompletedProcess[str]:
    """The tool in a process of its own: it imports the bake's modules, which this process has the template's of."""
    command = [sys.executable, str(ROOT / "benchmarks" / "cost.py"), *map(str, argv)]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def bill(*argv: object) -> dict[str, float]:
    result = run_tool(*argv)
    assert result.returncode == 0, result.stderr
    *lines, herd = result.stdout.splitlines()
    assert herd.startswith("the busiest minute, ")
    return {line[:34].strip(): float(line[34:]) for line in lines}


def test_the_tool_prints_a_bakes_bill(project):
    """Each line of the bill, and the herd of the bake's busiest minute against its capacity: no retry."""
    (herd,) = [line for line in run_tool(project).stdout.splitlines() if line.startswith("the busiest minute")]
    assert re.fullmatch(
        r"the busiest minute, \S+: 2 runs at once, capacity 5 x 1: 0 retried after a 429; 0\.167 vCPU an instance", herd
    )
    items = bill(project)
    total = items.pop("total (USD a month)")
    assert set(items) == set(cost.monthly_cost(cost.reference_usage(1, "db"))) and total == pytest.approx(
        sum(items.values()), abs=0.01
    )


def test_a_proxy_bakes_bill_counts_its_failed_and_overdue_executions_alerts(project, tmp_path):
    """A proxy bake's module has two alert conditions more: its failed executions' (executions.tf) and its overdue
    ones' (audit.tf)."""
    proxy = bill(bake(tmp_path, target="workflow"))["Cloud Monitoring (alerting)"]
    assert proxy == pytest.approx(bill(project)["Cloud Monitoring (alerting)"] + 2 * cost.PRICES["alert_condition"])


def test_the_tools_audit_interval_is_config_yamls(project):
    """config.yaml is the one source: an audit interval edited there is the one the bill counts."""
    path = project / "config.yaml"
    text = path.read_text(encoding="utf-8")
    assert re.search(r"^audit_interval_minutes: 60$", text, re.M)
    baked = bill(project)
    path.write_text(re.sub(r"^audit_interval_minutes: 60$", "audit_interval_minutes: 5", text, flags=re.M))
    try:
        assert bill(project) == bill(project, "--audit-interval-minutes", "5") != baked
    finally:
        path.write_text(text)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--audit-interval-minutes", "0"], "audit_interval_minutes=0: must be a positive number of minutes"),
        (["--work-seconds", "-1"], "--work-seconds=-1.0: must be at least 0"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(project, argv, message):
    result = run_tool(project, *argv)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", f"error: {message}\n")


def test_a_directory_that_is_no_bake_is_refused_naming_it(tmp_path):
    result = run_tool(tmp_path)
    assert result.returncode == 2 and result.stderr == (
        f"error: bake={tmp_path}: must be a baked project's directory (it has config.yaml)\n"
    )


def test_the_pages_state_the_cpu_the_model_bills():
    """The model bills the vCPU the module's default memory gets (a whole one above concurrency 1), as the pages say."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    (memory,) = re.findall(r'^    available_memory += optional\(string, "(\d+)M"\)$', variables, re.M)
    assert cost.Assumptions.vcpu == cost.vcpu_of(int(memory)) == 0.167
    assert cost.Assumptions.memory_gib == int(memory) / 1024
    assert cost.vcpu_of(int(memory), concurrency=2) == 1
    for page in (ROOT / "docs" / "cost-model.md", TEMPLATE_PROJECT / "docs" / "cost.md"):
        text = " ".join(page.read_text().split())
        assert f"the {cost.Assumptions.vcpu} vCPU a {memory} MiB function gets" in text, page


def test_a_herd_within_the_capacity_costs_no_retry_and_one_past_it_a_retry_each():
    """The cost page's "no retry of the herd": herd_retries is 0 at the capacity the rules derive, and counts at
    least the 429s tests/herd_sim.py sees past it."""
    import herd_sim
    from scheduled_dedup_tools import schedule_rules

    assert cost.herd_retries(301, schedule_rules.instances_for(schedule_rules.Herd(301, herd_sim.FIRE_TIME), 1)) == 0
    assert cost.herd_retries(301, 5) == 296
    timing = herd_sim.herd_config(20)["defaults"]
    assert herd_sim.simulate(20, 5, timing, 120).too_many >= cost.herd_retries(21, 5)
