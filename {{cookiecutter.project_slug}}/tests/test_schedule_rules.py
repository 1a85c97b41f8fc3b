"""The rules Terraform cannot check, on the values terraform/main.tf deploys: a Terraform validation cannot
expand a cron, so an edit of a schedule or a timing in main.tf is checked here (docs: choosing-the-numbers.md
in the template). tests/harness/rules.py is the template's hooks/rules.py, vendored by the bake; cronsim expands each
job's cron independently of it."""

import datetime as dt
import json
import re
import zoneinfo
from pathlib import Path

import cronsim
import pytest
import rules

MAIN_TF = Path(__file__).resolve().parent.parent / "terraform" / "main.tf"
TIMING_NAMES = (
    "attempt_deadline_seconds",
    "function_timeout_seconds",
    "lease_seconds",
    "retention_seconds",
    "retry_count",
    "min_backoff_seconds",
    "max_backoff_seconds",
    "max_doublings",
    "max_retry_duration_seconds",
)
HCL_STRING = r'"(?:[^"\\]|\\.)*"'  # the baked main.tf writes its strings with tojson
# job id = { schedule = "...", time_zone = "..." } (no f-string: this file goes through Jinja when baked)
JOB = re.compile(
    "("
    + HCL_STRING
    + r")\s*=\s*[{]\s*schedule\s*=\s*("
    + HCL_STRING
    + r")\s*time_zone\s*=\s*("
    + HCL_STRING
    + r")[^}]*[}]"  # then the job's other keys (paused, catch_up, max_lateness_seconds, ...), none holding a brace
)


def deployed_values(text: str) -> tuple[dict[str, dict[str, str]], dict[str, int]]:
    """(jobs, timing) as terraform/main.tf passes them to the module."""
    jobs = {
        json.loads(job_id): {"schedule": json.loads(schedule), "time_zone": json.loads(zone)}
        for job_id, schedule, zone in JOB.findall(text)
    }
    timing = {name: int(value) for name, value in re.findall(r"^\s*(\w+)\s*=\s*(\d+)\s*$", text, re.M)}
    missing = [name for name in TIMING_NAMES if name not in timing]
    assert jobs and not missing, f"terraform/main.tf: no jobs or no {missing} found; was its layout changed?"
    return jobs, {name: timing[name] for name in TIMING_NAMES}


JOBS, TIMING = deployed_values(MAIN_TF.read_text(encoding="utf-8"))


def busy_bound(timing: dict[str, int]) -> int:
    return max(outcome.seconds for outcome in rules.busy_after_one_fault(timing) if outcome.seconds is not None)


def cronsim_gap(schedule: str, time_zone: str, start: dt.datetime) -> int | None:
    """The smallest gap between consecutive fire times over a year (nine for a job that fires rarer)."""
    zone = zoneinfo.ZoneInfo(time_zone)
    a_year, nine_years = start + dt.timedelta(days=366), start + dt.timedelta(days=9 * 366)
    previous, smallest = None, None
    for moment in cronsim.CronSim(schedule, start.astimezone(zone)):
        if moment >= nine_years or (moment >= a_year and smallest is not None):
            break
        if previous is not None:
            # In UTC: aware datetimes of one tzinfo subtract as wall times, so the two 01:00s of a
            # fall-back night would be 0 s apart (Python datetime docs, "aware subtraction").
            step = int((moment.astimezone(dt.UTC) - previous.astimezone(dt.UTC)).total_seconds())
            smallest = step if smallest is None else min(smallest, step)
        previous = moment
    return smallest


def test_main_tf_passes_the_schedule_rules():
    # Terraform checks a cron's shape only (five fields of the right characters); the grammar is checked here.
    jobs = rules.check_jobs(JOBS)
    timing = rules.check_timing(TIMING)  # Terraform's validations check these too
    rules.check_schedule_timing(jobs, timing, dt.date.today())


@pytest.mark.parametrize("job_id", sorted(JOBS))
def test_each_jobs_cronsim_gap_exceeds_what_one_fault_keeps_a_run_busy(job_id):
    schedule, time_zone = JOBS[job_id]["schedule"], JOBS[job_id]["time_zone"]
    start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    gap = cronsim_gap(schedule, time_zone, start)
    if gap is None:  # fires at most once in nine years: no next run to lose or overlap
        return
    assert gap > busy_bound(TIMING) >= TIMING["function_timeout_seconds"], (schedule, time_zone, gap)
    # The rules count DST's repeated and skipped times at their worst, so never see a larger gap than cronsim.
    assert rules.smallest_gap(schedule, time_zone, start.date()).seconds <= gap


def test_an_edit_to_a_schedule_of_the_right_shape_but_out_of_range_is_refused():
    """An hour of 24 has the shape Terraform's validation checks; the grammar here refuses it."""
    job_id = sorted(JOBS)[0]
    edited = MAIN_TF.read_text(encoding="utf-8").replace(json.dumps(JOBS[job_id]["schedule"]), '"0 24 * * *"', 1)
    jobs, _ = deployed_values(edited)
    assert jobs[job_id]["schedule"] == "0 24 * * *"
    with pytest.raises(rules.RuleError, match=r"hour value '24' is outside 0-23"):
        rules.check_jobs(jobs)


def test_an_edit_to_a_busier_schedule_is_refused():
    job_id = sorted(JOBS)[0]
    edited = MAIN_TF.read_text(encoding="utf-8").replace(json.dumps(JOBS[job_id]["schedule"]), '"* * * * *"', 1)
    jobs, timing = deployed_values(edited)
    assert jobs[job_id]["schedule"] == "* * * * *"
    with pytest.raises(
        rules.RuleError, match=rf"^jobs\.{re.escape(job_id)}\.schedule='\* \* \* \* \*': fires only 60 s"
    ):
        rules.check_schedule_timing(jobs, rules.check_timing(timing), dt.date.today())
    assert cronsim_gap("* * * * *", "Etc/UTC", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) == 60 <= busy_bound(timing)
