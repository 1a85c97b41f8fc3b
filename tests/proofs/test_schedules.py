"""schedules.py, the one expansion of a job's cron: its runs are cronsim's zone-aware ones (Debian cron's daylight
saving rule), every instant a delivery for a fire time may carry leads back to it, and the next fire time."""

import datetime as dt
import zoneinfo

import cronsim
import pytest

import schedules

UTC = dt.UTC
YEAR = (dt.datetime(2026, 1, 1, tzinfo=UTC), dt.datetime(2027, 1, 1, tzinfo=UTC))
CASES = [
    ("30 1 * * *", "America/New_York"),  # 01:30 twice on 1 Nov
    ("30 2 * * *", "Europe/Berlin"),  # 02:30 never on 29 Mar, twice on 25 Oct
    ("0,20,40 2 * * *", "Europe/Berlin"),  # three skipped times, one run
    ("*/20 1-3 * * *", "America/New_York"),  # '*': the repeated hour runs twice, the skipped one not at all
    ("15 1,2 * * 0", "Australia/Lord_Howe"),  # a 30-minute change
    ("0 3 * * *", "Etc/UTC"),
]


def cronsim_runs(cron, zone, since, until):
    """cronsim's zone-aware iteration: the runs Debian cron would make."""
    found = []
    for moment in cronsim.CronSim(cron, (since - dt.timedelta(microseconds=1)).astimezone(zoneinfo.ZoneInfo(zone))):
        if moment.astimezone(UTC) >= until:
            return found
        found.append(moment.astimezone(UTC))
    return found


@pytest.mark.parametrize(("cron", "zone"), CASES)
def test_the_runs_are_cronsims_zone_aware_ones(cron, zone):
    runs = schedules.runs(schedules.Schedule(cron, zone), *YEAR)
    assert [fire.instant for fire in runs] == cronsim_runs(cron, zone, *YEAR)


@pytest.mark.parametrize(("cron", "zone"), CASES)
def test_every_reading_of_a_fire_time_leads_back_to_its_run(cron, zone):
    schedule = schedules.Schedule(cron, zone)
    fires = schedules.fire_times(schedule, *YEAR)
    readings = [reading for fire in fires for reading in fire.readings]
    assert len(readings) == len(set(readings))  # no instant stands for two fire times
    for fire in [fire for fire in fires if fire.dst] + fires[:3]:  # looking each up is the slow part
        for reading in fire.readings:
            assert schedules.fire_time_of(schedule, reading) == fire


def test_a_repeated_time_is_read_at_both_instants_and_run_at_the_first():
    fire = schedules.fire_time_of(schedules.Schedule("30 1 * * *", "America/New_York"), at("2026-11-01T06:30:00Z"))
    assert (fire.instant, fire.readings, fire.dst) == (
        at("2026-11-01T05:30:00Z"),
        (at("2026-11-01T05:30:00Z"), at("2026-11-01T06:30:00Z")),
        schedules.Dst.AMBIGUOUS,
    )


@pytest.mark.parametrize("rule", schedules.DST_GAP_RULES)
def test_a_skipped_time_runs_at_the_gaps_end_or_not_by_the_jobs_rule(rule):
    schedule = schedules.Schedule("30 2 * * *", "Europe/Berlin", rule)
    day = (at("2026-03-29T00:00:00Z"), at("2026-03-30T00:00:00Z"))
    (fire,) = schedules.fire_times(schedule, *day)
    assert fire.readings == (at("2026-03-29T01:00:00Z"), at("2026-03-29T01:30:00Z"), at("2026-03-29T00:30:00Z"))
    assert fire.instant == (at("2026-03-29T01:00:00Z") if rule == schedules.END_OF_GAP else None)
    assert [run.instant for run in schedules.runs(schedule, *day)] == ([fire.instant] if fire.instant else [])


def test_skip_keeps_a_real_fire_time_at_the_gaps_end():
    """02:30 is skipped, but 03:00 CEST is a fire time of its own: it runs, and a reading of 02:30 is it."""
    schedule = schedules.Schedule("0,30 2,3 * * *", "Europe/Berlin", schedules.SKIP)
    runs = schedules.runs(schedule, at("2026-03-29T00:00:00Z"), at("2026-03-29T02:00:00Z"))
    assert [run.instant for run in runs] == [at("2026-03-29T01:00:00Z"), at("2026-03-29T01:30:00Z")]
    assert schedules.fire_time_of(schedule, at("2026-03-29T00:30:00Z")).instant == at("2026-03-29T01:00:00Z")


@pytest.mark.parametrize(
    ("cron", "zone", "after", "expected"),
    [
        ("0 * * * *", "Etc/UTC", "2026-01-01T10:20:00Z", "2026-01-01T11:00:00Z"),
        ("0 * * * *", "Etc/UTC", "2026-01-01T11:00:00Z", "2026-01-01T12:00:00Z"),  # strictly after
        ("30 1 * * *", "America/New_York", "2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"),  # not 01:30 again
        ("30 2 * * *", "Europe/Berlin", "2026-03-28T12:00:00Z", "2026-03-29T01:00:00Z"),  # the gap's end
        ("0 0 29 2 *", "Etc/UTC", "2026-01-01T00:00:00Z", "2028-02-29T00:00:00Z"),
    ],
)
def test_next_fire_after(cron, zone, after, expected):
    assert schedules.next_fire_after(schedules.Schedule(cron, zone), at(after)) == at(expected)


def at(text):
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
