"""The rules' own cron expansion (rules.py, tools/schedule_rules.py; stdlib: the bake hook runs it before any
dependency exists), cross-checked on each job of the bake's config.yaml: its smallest gap against cronsim's, its
daylight saving dates against the ones schedules.py (the function's expansion) finds. The bake's
tests/test_config.py checks the rules themselves."""

import datetime as dt
import zoneinfo

import cronsim
import pytest
from scheduled_dedup_tools import schedule_rules

import config
import schedules

CONFIG = config.load(schedules=True)


def busy_bound(timing) -> int:
    return max(busy.seconds for busy in schedule_rules.busy_after_one_fault(timing) if busy.seconds is not None)


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


@pytest.mark.parametrize("job_id", sorted(CONFIG.jobs))
def test_each_jobs_cronsim_gap_exceeds_what_one_fault_keeps_a_run_busy(job_id):
    job = CONFIG.jobs[job_id]
    start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    gap = cronsim_gap(job.schedule, job.time_zone, start)
    if gap is None:  # fires at most once in nine years: no next run to lose or overlap
        return
    # The job's own numbers: its work is stopped at its own deadline.
    assert gap > busy_bound(job.timing) >= job.timing["attempt_deadline_seconds"], (job.schedule, job.time_zone, gap)
    # The rules count DST's repeated and skipped times at their worst, so never see a larger gap than cronsim.
    assert schedule_rules.smallest_gap(job.schedule, job.time_zone, start.date()).seconds <= gap


@pytest.mark.parametrize("job_id", sorted(CONFIG.jobs))
def test_each_jobs_daylight_saving_dates_are_the_ones_the_function_keys(job_id):
    """Not a refusal: the dates the job's zone repeats or skips one of its fire times in the coming years, as
    `python config.py` prints them; rules.py's expansion must agree with schedules.py, which the function runs by."""
    job = CONFIG.jobs[job_id]
    start = dt.date.today()
    hits = {(hit.day, hit.kind) for hit in schedule_rules.dst_hits(job.schedule, job.time_zone, start)}
    since = dt.datetime.combine(start, dt.time(), dt.UTC)
    last = dt.date(start.year + schedule_rules.DST_WARNING_YEARS, start.month, 1)
    until = dt.datetime.combine(last, dt.time(), dt.UTC)
    rule = schedules.Schedule(job.schedule, job.time_zone, job.dst_gap)
    kinds = {schedules.Dst.AMBIGUOUS: "repeated", schedules.Dst.NONEXISTENT: "skipped"}
    fires = {
        (fire.wall.date(), kinds[fire.dst]) for fire in schedules.fire_times(rule, since, until) if fire.dst is not None
    }
    # The windows' ends differ by a zone's offset: compare away from them.
    inner = {hit for hit in hits | fires if start + dt.timedelta(days=1) < hit[0] < until.date() - dt.timedelta(days=1)}
    assert {hit for hit in hits if hit in inner} == {fire for fire in fires if fire in inner}
