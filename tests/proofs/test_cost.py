"""tools/cost.py: a month's bill from the configuration, and docs/cost.md's table made by it."""

import datetime as dt
import re
from pathlib import Path

import cost
import pytest

DOC = Path(__file__).resolve().parents[1] / "docs" / "cost.md"
DAY = dt.timedelta(days=1)


def test_the_docs_table_is_the_functions():
    """One formula: the table in docs/cost.md is what `python tools/cost.py --table` prints."""
    (table,) = re.findall(r"<!-- cost-table -->\n(.*?)\n<!-- /cost-table -->", DOC.read_text(), re.S)
    assert table == cost.table()


def test_the_doc_states_what_per_job_alert_policies_cost():
    """100 jobs with one Scheduler-attempt policy each: 4 outcomes + 100 + the missed run = 105 conditions."""
    assert f"${105 * cost.PRICES['alert_condition']:.2f} a month" in DOC.read_text()


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


def test_the_tool_prints_this_projects_bill(capsys):
    assert cost.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    items = {line[:34].strip(): float(line[34:]) for line in lines}
    total = items.pop("total (USD a month)")
    assert set(items) == set(cost.monthly_cost(cost.reference_usage(1, "db"))) and total == pytest.approx(
        sum(items.values()), abs=0.01
    )


def bill(capsys, *argv: str) -> dict[str, float]:
    assert cost.main(list(argv)) == 0
    return {line[:34].strip(): float(line[34:]) for line in capsys.readouterr().out.splitlines()}


def test_the_tools_audit_interval_is_config_yamls(capsys, monkeypatch, tmp_path):
    """config.yaml is the one source: an audit interval edited there is the one the bill counts."""
    import config

    text = config.CONFIG_FILE.read_text(encoding="utf-8")
    assert re.search(r"^audit_interval_minutes: 60$", text, re.M)
    edited = tmp_path / "config.yaml"
    edited.write_text(re.sub(r"^audit_interval_minutes: 60$", "audit_interval_minutes: 5", text, flags=re.M))
    baked = bill(capsys)
    monkeypatch.setattr(config, "CONFIG_FILE", edited)
    assert bill(capsys) == bill(capsys, "--audit-interval-minutes", "5") != baked


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--audit-interval-minutes", "0"], "audit_interval_minutes=0: must be a positive number of minutes"),
        (["--work-seconds", "-1"], "--work-seconds=-1.0: must be at least 0"),
    ],
)
def test_bad_input_is_one_line_naming_the_field(argv, message, capsys):
    assert cost.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == f"error: {message}\n"
