"""Capacity follows the schedule (issue 27): schedule_rules.busiest_minute counts the runs the schedule has in flight
at once, schedule_rules.check_capacity refuses a function that cannot start them all at their first attempt, the bake
writes the instances that can (config.yaml's `function:` block), and the module's defaults are the rules'."""

from __future__ import annotations

import datetime as dt
import json
import re

import baking  # the hook's config.yaml writer (hooks/baking.py)
import pytest
import questions  # the hook's checks of the answers (hooks/questions.py)
import rules
import schedules  # the bake's (cronsim): the function's own expansion, for an independent count
import yaml
from conftest import ROOT, bake, rendered_answers
from scheduled_dedup_tools import schedule_rules

from tests.terraform_offline import terraform

START = dt.date(2026, 12, 2)
UTC = "Etc/UTC"
HOURLY_AUDIT = (rules.audit_cron(60), rules.AUDIT_TIME_ZONE)
FIVE_MINUTES = 300  # the default attempt deadline: how long a run may hold its instance


def utc(*args: int) -> dt.datetime:
    return dt.datetime(*args, tzinfo=dt.UTC)


def test_a_herd_on_one_minute_counts_every_job_and_the_audit():
    herd = schedule_rules.busiest_minute([("0 3 * * *", UTC)] * 300 + [HOURLY_AUDIT], FIVE_MINUTES, START)
    assert herd == schedule_rules.Herd(301, utc(2026, 12, 2, 3, 0))
    assert herd.where() == "2026-12-02T03:00Z"


def test_jobs_spread_over_an_hour_count_the_runs_still_holding_an_instance():
    """300 jobs, 5 on each minute of an hour: a run fired k minutes earlier still holds its instance while
    k * 60 < the hold, so with 5-minute runs 5 minutes' worth (25) and the audit of minute 0 are in flight."""
    spread = [(f"{i % 60} 3 * * *", UTC) for i in range(300)] + [HOURLY_AUDIT]
    assert schedule_rules.busiest_minute(spread, FIVE_MINUTES, START) == schedule_rules.Herd(26, utc(2026, 12, 2, 3, 4))
    assert schedule_rules.busiest_minute(spread, 60, START) == schedule_rules.Herd(6, utc(2026, 12, 2, 3, 0))


@pytest.mark.parametrize(("hold", "runs"), [(300, 1), (301, 2)])
def test_two_runs_overlap_only_while_the_first_may_still_hold_its_instance(hold, runs):
    assert schedule_rules.busiest_minute([("0 3 * * *", UTC), ("5 3 * * *", UTC)], hold, START).runs == runs


def test_a_herd_across_midnight_counts_the_day_before():
    """The window reaches into the previous UTC day: 23:58 and 00:01 with 5-minute runs overlap."""
    herd = schedule_rules.busiest_minute([("58 23 * * *", UTC), ("1 0 * * *", UTC)], FIVE_MINUTES, START)
    assert herd == schedule_rules.Herd(2, utc(2026, 12, 3, 0, 1))


def test_time_zones_meet_when_their_offsets_do():
    """09:00 UTC and 10:00 London are one minute from the day British Summer Time starts."""
    herd = schedule_rules.busiest_minute([("0 9 * * *", UTC), ("0 10 * * *", "Europe/London")], 60, START)
    assert herd == schedule_rules.Herd(2, utc(2027, 3, 28, 9, 0))


def test_a_skipped_time_fires_at_the_gaps_end():
    """01:30 London does not exist on 2027-03-28: it fires when the clocks jump (01:00 UTC), with the 01:00 job."""
    herd = schedule_rules.busiest_minute([("30 1 * * *", "Europe/London"), ("0 1 * * *", UTC)], 60, START)
    assert herd == schedule_rules.Herd(2, utc(2027, 3, 28, 1, 0))


def test_a_repeated_time_counts_at_both_its_instants():
    """01:30 London happens twice on 2027-10-31 (00:30 and 01:30 UTC); the second meets a job of October's 01:30
    UTC. Before that day London's 01:30 is 00:30 UTC: only the repeated reading meets it."""
    herd = schedule_rules.busiest_minute([("30 1 * * *", "Europe/London"), ("30 1 * 10 *", UTC)], 60, START)
    assert herd == schedule_rules.Herd(2, utc(2027, 10, 31, 1, 30))


def test_the_count_agrees_with_the_functions_own_expansion():
    """The rule's walk (rules.py, standard library: the hook runs it) against schedules.py's (cronsim), over a year of
    jobs in zones with and without daylight saving, on days of week, of month and months, none at a time the
    clocks repeat or skip: the same busiest minute and count."""
    jobs = [
        ("0 12 * * *", "Europe/Madrid"),
        ("0 6 * * 1-5", "America/New_York"),
        ("0 11 * * *", UTC),
        ("30 16 1,15 * *", "Asia/Kolkata"),
        ("0 22 * 1-3 *", "Australia/Sydney"),
        ("*/20 11 * * 0", "Europe/London"),
        HOURLY_AUDIT,
    ]
    hold = 120
    herd = schedule_rules.busiest_minute(jobs, hold, START, years=1)
    since = dt.datetime.combine(START, dt.time(), dt.UTC)
    until = dt.datetime.combine(schedule_rules._last_day(START, 1) + dt.timedelta(days=1), dt.time(), dt.UTC)
    fires: dict[dt.datetime, int] = {}
    for cron, zone in jobs:
        for fire in schedules.runs(schedules.Schedule(cron, zone), since, until):
            fires[fire.instant] = fires.get(fire.instant, 0) + 1
    window = -(-hold // 60)
    in_flight = {
        minute: sum(fires.get(minute - dt.timedelta(minutes=k), 0) for k in range(window)) for minute in sorted(fires)
    }
    most = max(in_flight.values())
    assert herd == schedule_rules.Herd(most, min(minute for minute, runs in in_flight.items() if runs == most))
    assert most >= 3  # the walk found a coincidence worth checking


CAPACITY = rules.FUNCTION_DEFAULTS


def test_a_herd_the_function_can_start_at_once_passes_at_its_edge():
    schedule_rules.check_capacity(
        {**CAPACITY, "max_instance_count": 301}, schedule_rules.Herd(301, utc(2026, 12, 2, 3, 0)), 5
    )
    schedule_rules.check_capacity(
        {"max_instance_count": 4, "max_instance_request_concurrency": 76},
        schedule_rules.Herd(301, utc(2026, 12, 2, 3)),
        5,
    )


def test_a_herd_past_the_capacity_is_refused_naming_the_minute_the_runs_and_the_capacity():
    herd = schedule_rules.Herd(301, utc(2026, 12, 2, 3, 0))
    with pytest.raises(rules.RuleError) as refusal:
        schedule_rules.check_capacity({**CAPACITY, "max_instance_count": 300}, herd, 5)
    message = str(refusal.value)
    assert "\n" not in message
    assert message.startswith(
        "function.max_instance_count=300: the busiest minute, 2026-12-02T03:00Z, has 301 runs in flight at once"
    )
    assert "the function serves 300 (300 instances x concurrency 1)" in message
    assert "(2 waves of 300; retry_count 5 gives 6" in message
    assert message.endswith("a value that passes: function.max_instance_count 301")


def test_the_passing_value_counts_the_concurrency_and_keeps_the_default_at_the_least():
    assert schedule_rules.instances_for(schedule_rules.Herd(301, utc(2026, 1, 1)), 1) == 301
    assert schedule_rules.instances_for(schedule_rules.Herd(301, utc(2026, 1, 1)), 50) == 7
    assert schedule_rules.instances_for(schedule_rules.Herd(2, utc(2026, 1, 1)), 1) == CAPACITY["max_instance_count"]


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ([5], r"function=\[5\]: must be a mapping of some of max_instance_count, max_instance_request_concurrency"),
        ({"cpu": 1}, r"function=\{'cpu': 1\}: must be a mapping"),
        ({"max_instance_count": 0}, r"function\.max_instance_count=0: must be a whole number, at least 1"),
        ({"max_instance_count": "5x"}, r"function\.max_instance_count='5x': must be a whole number"),
        ({"max_instance_request_concurrency": 0}, r"function\.max_instance_request_concurrency=0: .*from 1 to 1000"),
        ({"max_instance_request_concurrency": 1001}, r"function\.max_instance_request_concurrency=1001: .*1 to 1000"),
        # Cloud Run's CPU limits (https://cloud.google.com/run/docs/configuring/cpu), as the module's variables.tf.
        ({"available_cpu": "0.079"}, r"function\.available_cpu='0\.079': must be a number of vCPUs from 0\.08 to 1"),
        ({"available_cpu": 1.5}, r"function\.available_cpu=1\.5: must be a number of vCPUs"),
        ({"available_cpu": "9"}, r"function\.available_cpu='9': .*a whole number from 1 to 8"),
        ({"available_cpu": "1 vCPU"}, r"function\.available_cpu='1 vCPU': must be a number of vCPUs"),
        (
            {"max_instance_request_concurrency": 2, "available_cpu": "0.999"},
            r"function\.available_cpu='0\.999': max_instance_request_concurrency 2 needs a whole CPU",
        ),
        ({"cpu": 1}, r"function=\{'cpu': 1\}: must be a mapping of some of .*available_cpu"),
    ],
)
def test_a_bad_function_block_is_refused_in_one_line(value, error):
    with pytest.raises(rules.RuleError, match=rf"^{error}"):
        rules.check_function(value)


def test_no_function_block_is_the_modules_defaults():
    assert rules.check_function(None) == rules.FUNCTION_DEFAULTS
    assert rules.check_function({"max_instance_request_concurrency": 8}) == {
        "max_instance_count": 5,
        "max_instance_request_concurrency": 8,
    }


def test_a_cpu_within_cloud_runs_limits_is_taken_as_text():
    """As Terraform's optional(string) takes it: config.yaml may write 2 or "0.5"."""
    assert rules.check_function({"available_cpu": 2, "max_instance_request_concurrency": 4})["available_cpu"] == "2"
    assert rules.check_function({"available_cpu": "0.5"})["available_cpu"] == "0.5"
    assert rules.check_function({"available_cpu": "8"})["available_cpu"] == "8"
    assert rules.check_function({"available_cpu": 0.08})["available_cpu"] == "0.08"
    assert "available_cpu" not in rules.check_function({"max_instance_request_concurrency": 4})  # the module's default


def test_the_rules_defaults_are_the_modules():
    """A config.yaml without a `function:` block is checked against what Terraform then plans."""
    variables = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "variables.tf").read_text()
    for key, value in rules.FUNCTION_DEFAULTS.items():
        assert re.search(rf"^    {key} += optional\(number, {value}\)$", variables, re.M), key


def test_the_audit_fires_in_the_zone_the_rules_count_it_in():
    audit = (ROOT / "terraform" / "modules" / "scheduled-dedup" / "audit.tf").read_text()
    assert re.findall(r'^ +time_zone += "(.*)"$', audit, re.M) == [rules.AUDIT_TIME_ZONE]


def herd_answers(jobs: dict[str, dict[str, str]]) -> dict[str, object]:
    return questions.validate(rendered_answers({"jobs": json.dumps(jobs)}))


def test_the_bake_writes_the_instances_the_busiest_minute_needs():
    """The hook's config.yaml: 300 jobs on 03:00 and the audit need 301 instances; the same jobs spread over the
    hour need 26; one job keeps the module's default."""
    on_one_minute = {f"j{i:03}": {"schedule": "0 3 * * *", "time_zone": UTC} for i in range(300)}
    spread = {f"j{i:03}": {"schedule": f"{i % 60} 3 * * *", "time_zone": UTC} for i in range(300)}
    assert herd_answers(on_one_minute)["config"]["function"] == {"max_instance_count": 301}
    assert herd_answers(spread)["config"]["function"] == {"max_instance_count": 26}
    one = herd_answers({"nightly": {"schedule": "0 3 * * *", "time_zone": UTC}})
    assert one["config"]["function"] == {"max_instance_count": rules.FUNCTION_DEFAULTS["max_instance_count"]}


def planned_function(workdir) -> dict[str, str]:
    """The function's service_config in an offline apply of the bake's root (`terraform test -verbose` against mock
    providers, tests/root.tftest.hcl): each attribute as Terraform prints it."""
    result = terraform(workdir, "test", "-filter=tests/root.tftest.hcl", "-verbose", timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    (resource,) = re.findall(
        r"# module\.scheduled_dedup\.google_cloudfunctions2_function\.this:\n(.*?)\n\}\n", result.stdout, re.S
    )
    (service,) = re.findall(r"^    service_config \{\n(.*?)\n    \}$", resource, re.S | re.M)
    return dict(re.findall(r"^\s*(\w+)\s+= \"?([^\"\n]*)\"?$", service, re.M))


@pytest.mark.terraform
def test_an_offline_plan_gives_the_function_the_capacity_the_rules_derive(tmp_path):
    """Python and Terraform agree: the bake writes the rules' instances into config.yaml, the root passes them as
    written. 300 jobs on one minute plan 301 instances (>= 300 runs at once); the same 300 spread over an hour plan
    26 (>= 5); a concurrency above 1 plans a whole CPU, at 1 the memory's share (none set)."""
    on_one_minute = {f"j{i:03}": {"schedule": "0 3 * * *", "time_zone": UTC} for i in range(300)}
    project = bake(tmp_path, jobs=json.dumps(on_one_minute))
    workdir = project / "terraform"
    assert terraform(workdir, "init", "-backend=false").returncode == 0
    written = yaml.safe_load((project / "config.yaml").read_text())["function"]
    planned = planned_function(workdir)
    assert written == {"max_instance_count": 301}
    assert (planned["max_instance_count"], planned["max_instance_request_concurrency"]) == ("301", "1")
    assert planned["available_cpu"] != "1"  # unset: the mock provider makes up the computed value

    spread = {f"j{i:03}": {"schedule": f"{i % 60} 3 * * *", "time_zone": UTC} for i in range(300)}
    config = herd_answers(spread)["config"]
    (project / "config.yaml").write_text(baking.render_config(config))
    assert planned_function(workdir)["max_instance_count"] == str(config["function"]["max_instance_count"]) == "26"

    config["function"] = {"max_instance_count": 13, "max_instance_request_concurrency": 2}
    (project / "config.yaml").write_text(baking.render_config(config))
    assert rules.check_config(yaml.safe_load((project / "config.yaml").read_text()), START)["function"] == {
        "max_instance_count": 13,
        "max_instance_request_concurrency": 2,
    }
    planned = planned_function(workdir)
    assert (planned["max_instance_count"], planned["max_instance_request_concurrency"]) == ("13", "2")
    assert planned["available_cpu"] == "1"

    # A CPU written in the block is the function's (rules.check_cpu and the module's validations agree on it).
    config["function"] = {"max_instance_count": 7, "max_instance_request_concurrency": 4, "available_cpu": "2"}
    (project / "config.yaml").write_text(baking.render_config(config))
    assert rules.check_config(yaml.safe_load((project / "config.yaml").read_text()), START)["function"] == {
        "max_instance_count": 7,
        "max_instance_request_concurrency": 4,
        "available_cpu": "2",
    }
    assert planned_function(workdir)["available_cpu"] == "2"


def test_the_configuration_check_refuses_a_function_block_below_its_herd():
    """check_config (the hook's and `python config.py`'s) runs the capacity rule with the schedule rules; the
    function's own load, which expands no cron, does not."""
    config = herd_answers({f"j{i}": {"schedule": "0 3 * * *", "time_zone": UTC} for i in range(10)})["config"]
    config["function"] = {"max_instance_count": 10}
    with pytest.raises(
        rules.RuleError, match=r"^function\.max_instance_count=10: the busiest minute, \S+T03:00Z, has 11"
    ):
        rules.check_config(config, START)
    assert rules.check_config(config, START, schedules=False)["function"]["max_instance_count"] == 10
