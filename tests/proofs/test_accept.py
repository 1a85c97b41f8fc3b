"""What the handler accepts (only what Cloud Scheduler sends), Force runs, and daylight saving: in process,
through the HTTP entry point, with the clock moved by time-machine, against Google's Firestore emulator.

The moved clock is always ahead of the real one: gRPC turns each call's timeout into a deadline from
time.time() (grpc/_channel.py), which time-machine moves too, and the emulator judges it by the real clock.
So the days are the day after tomorrow, and the daylight saving changes the next ones after today.
"""

import dataclasses
import datetime as dt
import logging
import zoneinfo

import pytest
from conftest import configured, records, scheduler_headers

import audit
import config
import schedules
from keys import RunKey, parse_schedule_time
from ledger import RunLedger
from outcomes import Misconfigured

try:
    import time_machine
except ImportError:  # a missing test dependency fails, never skips
    pytest.fail("time-machine is missing: pip install -r requirements-dev.txt", pytrace=False)

UTC = dt.UTC
DAY = (dt.datetime.now(UTC) + dt.timedelta(days=2)).date().isoformat()
NEXT_DAY = (dt.date.fromisoformat(DAY) + dt.timedelta(days=1)).isoformat()


def on(time: str, day: str = DAY) -> str:
    """`time` (HH:MM:SS) on `day`, as Scheduler spells a schedule time."""
    return f"{day}T{time}Z"


def at(text: str) -> dt.datetime:
    return parse_schedule_time(text)


def with_jobs(monkeypatch, **jobs) -> config.Config:
    """These jobs in place of config.yaml's, each {"schedule", "time_zone", ...} by its Scheduler name."""
    return configured(monkeypatch, lambda loaded: loaded.with_jobs(jobs))


def deliver(http, job, schedule_time, clock, method="POST", **extra):
    """One delivery of `job` dated `schedule_time`, received when the function's clock reads `clock`."""
    with time_machine.travel(at(clock), tick=False):
        return http.open("/", method=method, headers=scheduler_headers(job, schedule_time, **extra))


def outcome_lines(log_lines):
    return [line for line in log_lines() if "outcome" in line]


# ---------------------------------------------------------------- only what Scheduler sends (issue 16)


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
def test_a_delivery_that_is_not_a_post_runs_nothing_and_gets_405(http, collection, work, log_lines, method):
    answer = deliver(http, "nightly", on("03:00:00"), on("03:00:01"), method=method)
    assert answer.status_code == 405 and answer.text.startswith("method_not_allowed:"), answer.text
    assert f"method '{method}'" in answer.text and answer.text.count("\n") == 1
    assert work.calls == [] and records(collection) == {}
    (line,) = outcome_lines(log_lines)
    assert (line["outcome"], line["http_status"]) == ("method_not_allowed", 405)


def test_a_schedule_time_past_the_jobs_next_fire_time_is_refused_and_nothing_is_written(
    monkeypatch, http, collection, work
):
    with_jobs(monkeypatch, hourly={"schedule": "0 * * * *", "time_zone": "Etc/UTC"})
    # At 10:20 the next fire time is 11:00: a delivery dated 12:00 runs the 12:00 run early, which Scheduler never does.
    answer = deliver(http, "hourly", on("12:00:00"), on("10:20:00"))
    assert answer.status_code == 400 and answer.text.startswith("invalid_delivery:"), answer.text
    assert f"X-CloudScheduler-ScheduleTime='{on('12:00:00')}': later than the job's next fire time" in answer.text
    assert f"{DAY}T11:00:00+00:00" in answer.text and answer.text.count("\n") == 1
    assert work.calls == [] and records(collection) == {}
    # The clock margin: 30 s before 11:00, Scheduler's clock may already read past it and send 12:00.
    late_clock = deliver(http, "hourly", on("12:00:00"), on("10:59:30"))
    assert late_clock.status_code == 200 and len(work.calls) == 1


def test_a_run_keyed_under_a_place_the_function_does_not_serve_is_refused(monkeypatch, http, collection, work):
    other = {"X-Scheduler-Project": "other-proj-1"}
    refused = deliver(http, "nightly", on("03:00:00"), on("03:00:01"), **other)
    assert refused.status_code == 400 and "X-Scheduler-Project='other-proj-1'" in refused.text, refused.text
    assert "serves only" in refused.text and "`serve`" in refused.text
    assert work.calls == [] and records(collection) == {}
    own = config.current()
    served = tuple((project, own.location) for project in (own.project, "other-proj-1"))
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, serve=served))
    accepted = deliver(http, "nightly", on("03:00:00"), on("03:00:01"), **other)
    assert accepted.status_code == 200 and work.calls[0].project == "other-proj-1"


def test_serve_in_config_yaml_is_what_the_function_serves(monkeypatch):
    """config.yaml's `serve` is what the function serves; left out, only the function's own place (even an
    overridden project's)."""
    own = config.load()
    assert own.served == ((own.project, own.location),)
    assert dataclasses.replace(own, project="other-proj-2").served == (("other-proj-2", own.location),)
    serve = [{"project": own.project, "location": own.location}, {"project": "other-proj-1", "location": "us-east1"}]
    edited = config.from_raw({**own.source, "serve": serve})
    assert edited.served == ((own.project, own.location), ("other-proj-1", "us-east1"))


@pytest.mark.parametrize(
    ("serve", "message"),
    [
        ([], "serve=[]: must be a list of"),
        ({}, "serve={}: must be a list of"),
        ([{"project": "Bad_Project", "location": "europe-west1"}], "serve.project='Bad_Project': "),
        ([{"project": "other-proj-1"}], "serve={'project': 'other-proj-1'}: must be a list of"),
    ],
)
def test_a_bad_serve_list_is_misconfigured_naming_it(serve, message):
    with pytest.raises(Misconfigured, match="^config.yaml: ") as raised:
        config.from_raw({**config.load().source, "serve": serve})
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_an_audit_dated_ahead_leaves_the_marker_at_the_functions_clock(monkeypatch, http, collection, caplog):
    config = with_jobs(monkeypatch, hourly={"schedule": "0 * * * *", "time_zone": "Etc/UTC"})
    # A Force run of the audit job at 10:05 sends its next fire time (its own cron: issue 24), ahead of the clock.
    forced = schedules.next_fire_after(config.spec_of(config.audit_job).fire_rule, at(on("10:05:00")))
    assert deliver(http, config.audit_job, forced.isoformat().replace("+00:00", "Z"), on("10:05:00")).status_code == 200
    assert RunLedger(config).read_audit_cursor().jobs["hourly"]["since"] == at(on("10:05:00"))
    # So the 11:00 run, never delivered, is reported by the next audit after it settled (before 12:00's did)
    # instead of hidden until tomorrow.
    caplog.set_level(logging.INFO)
    settled = (at(on("11:00:00")) + config.settle_for("hourly") + dt.timedelta(minutes=1)).replace(second=0)
    now = (settled + dt.timedelta(seconds=2)).isoformat().replace("+00:00", "Z")
    assert deliver(http, config.audit_job, settled.isoformat().replace("+00:00", "Z"), now).status_code == 200
    missing = [r.json_fields for r in caplog.records if getattr(r, "json_fields", {}).get("audit_state") == "missing"]
    assert [found["schedule_time"] for found in missing] == [f"{DAY}T11:00:00+00:00"]


def test_a_takeover_past_the_lateness_limit_finishes_the_run_claimed_in_time(monkeypatch, http, collection, work):
    """max_lateness_seconds below the lease: a run claimed in time whose attempt died is taken over and run,
    never recorded `skipped` (its work may have started)."""
    with_jobs(monkeypatch, report={"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "max_lateness_seconds": 60})
    config = configured(monkeypatch, lambda loaded: loaded.everywhere(lease=dt.timedelta(seconds=600)))
    key = RunKey(config.project, config.location, "report", at(on("03:00:00")))
    RunLedger(config).claim(key, at(on("03:00:05")))  # claimed in time, then the instance died
    answer = deliver(http, "report", on("03:00:00"), on("03:10:30"))  # past the lease
    assert answer.status_code == 200 and answer.text.startswith("processed:"), answer.text
    assert len(work.calls) == 1 and records(collection)[key.run_id]["status"] == "completed"


# ---------------------------------------------------------------- a Force run is a manual run (issue 18)


def test_a_force_run_before_its_time_runs_now_and_the_scheduled_run_still_runs(
    monkeypatch, http, collection, work, log_lines
):
    with_jobs(monkeypatch, nightly={"schedule": "0 3 * * *", "time_zone": "Etc/UTC"})
    forced = deliver(http, "nightly", on("03:00:00"), on("02:50:00"))
    retry = deliver(http, "nightly", on("03:00:00"), on("02:50:20"))
    again = deliver(http, "nightly", on("03:00:00"), on("02:55:00"))  # a second Force run
    real = deliver(http, "nightly", on("03:00:00"), on("03:00:01"))
    real_retry = deliver(http, "nightly", on("03:00:00"), on("03:00:40"))

    assert forced.status_code == 200 and forced.text.startswith("processed:"), forced.text
    assert retry.text.startswith("duplicate:") and again.text.startswith("duplicate:")
    assert f"a manual run for {DAY}T03:00:00+00:00 is already completed" in again.text
    assert "the scheduled run at that time still runs" in again.text
    assert real.text.startswith("processed:") and real_retry.text.startswith("duplicate:")
    assert [call.trigger for call in work.calls] == ["manual", "scheduled"]  # two executions
    assert sorted(record["trigger"] for record in records(collection).values()) == ["manual", "scheduled"]
    lines = outcome_lines(log_lines)
    assert [(line["outcome"], line["trigger"]) for line in lines] == [
        ("processed", "manual"),
        ("duplicate", "manual"),
        ("duplicate", "manual"),
        ("processed", "scheduled"),
        ("duplicate", "scheduled"),
    ]


def test_a_force_run_without_the_schedule_time_header_says_what_to_do(http, collection, work):
    answer = http.post("/", headers={"X-CloudScheduler-JobName": "nightly"})
    assert answer.status_code == 400 and "missing X-CloudScheduler-ScheduleTime" in answer.text
    assert "Force run" in answer.text and "docs/schedules-and-manual-runs.md" in answer.text
    assert work.calls == [] and records(collection) == {}


# ---------------------------------------------------------------- daylight saving (issue 18)


def next_change(zone_name: str, forward: bool) -> dt.date:
    """The first day from DAY on which the zone's clocks go forward (or back)."""
    zone, day = zoneinfo.ZoneInfo(zone_name), dt.date.fromisoformat(DAY)
    while True:
        before = dt.datetime.combine(day, dt.time(0), zone).utcoffset()
        after = dt.datetime.combine(day, dt.time(12), zone).utcoffset()
        if before != after and (after > before) == forward:
            return day
        day += dt.timedelta(days=1)


def utc_of(day: dt.date, wall: dt.time, zone_name: str, fold: int = 0) -> dt.datetime:
    return dt.datetime.combine(day, wall, zoneinfo.ZoneInfo(zone_name)).replace(fold=fold).astimezone(UTC)


def later(moment: dt.datetime, seconds: int = 2) -> str:
    return audit.rfc3339(moment + dt.timedelta(seconds=seconds))


def test_the_fall_back_0130_delivered_at_both_instants_runs_once(monkeypatch, http, collection, work):
    config = with_jobs(monkeypatch, ny={"schedule": "30 1 * * *", "time_zone": "America/New_York"})
    day = next_change("America/New_York", forward=False)
    edt, est = (utc_of(day, dt.time(1, 30), "America/New_York", fold) for fold in (0, 1))  # 01:30, twice
    assert est - edt == dt.timedelta(hours=1)
    first = deliver(http, "ny", audit.rfc3339(edt), later(edt))
    second = deliver(http, "ny", audit.rfc3339(est), later(est))
    assert first.text.startswith("processed:") and second.text.startswith("duplicate:"), second.text
    assert len(work.calls) == 1
    assert audit_day(config, edt - dt.timedelta(hours=5)) == [("ny", audit.rfc3339(edt), "completed")]


def spring_forward_in_berlin() -> tuple[dt.datetime, dict[str, dt.datetime]]:
    """The next day 02:30 does not exist in Berlin (02:00 CET -> 03:00 CEST): the gap's end, and 02:30 read
    with the new offset and with the old (Scheduler documents none of them)."""
    day = next_change("Europe/Berlin", forward=True)
    end = utc_of(day, dt.time(3, 0), "Europe/Berlin")
    readings = {
        "gap end": end,
        "new offset": utc_of(day, dt.time(2, 30), "Europe/Berlin", fold=1),
        "old offset": utc_of(day, dt.time(2, 30), "Europe/Berlin", fold=0),
    }
    assert sorted(readings.values()) == [end - dt.timedelta(minutes=30), end, end + dt.timedelta(minutes=30)]
    return end, readings


@pytest.mark.parametrize("reading", ["gap end", "new offset", "old offset"])
def test_a_spring_forward_time_runs_once_at_the_end_of_the_gap(monkeypatch, http, collection, work, reading):
    """Whichever reading Scheduler sends, and if it sends two, the skipped 02:30 is one run at the gap's end."""
    config = with_jobs(monkeypatch, berlin={"schedule": "30 2 * * *", "time_zone": "Europe/Berlin"})
    end, readings = spring_forward_in_berlin()
    delivered = readings[reading]
    answer = deliver(http, "berlin", audit.rfc3339(delivered), later(delivered))
    replay = deliver(http, "berlin", audit.rfc3339(end), later(end, 1800))
    assert answer.text.startswith("processed:") and replay.text.startswith("duplicate:"), (answer.text, replay.text)
    assert len(work.calls) == 1 and work.calls[0].schedule_time == end
    assert audit_day(config, end - dt.timedelta(hours=1)) == [("berlin", audit.rfc3339(end), "completed")]


def test_a_spring_forward_time_of_a_job_that_skips_the_gap_runs_nothing(monkeypatch, http, collection, work):
    config = with_jobs(monkeypatch, berlin={"schedule": "30 2 * * *", "time_zone": "Europe/Berlin", "dst_gap": "skip"})
    end, readings = spring_forward_in_berlin()
    for delivered in readings.values():
        answer = deliver(http, "berlin", audit.rfc3339(delivered), later(delivered))
        assert answer.status_code == 200 and answer.text.startswith("skipped_dst_gap:"), answer.text
        assert f"{end.astimezone(zoneinfo.ZoneInfo('Europe/Berlin')):%Y-%m-%d} 02:30 does not exist" in answer.text
    assert work.calls == [] and records(collection) == {}
    assert audit_day(config, end - dt.timedelta(hours=1)) == []  # the audit expects what the handler does


def test_a_bad_dst_gap_is_misconfigured_naming_it(monkeypatch):
    with pytest.raises(Misconfigured, match=r"jobs\.j\.dst_gap='later': must be one of end_of_gap, skip"):
        with_jobs(monkeypatch, j={"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "dst_gap": "later"})


def audit_day(config, since):
    """The audit's states for the day from `since`, judged two days later."""
    ledger = RunLedger(config)
    found = audit.audit_runs(ledger, config.jobs, since, since + dt.timedelta(days=1), since + dt.timedelta(days=2))
    return [(run.job, audit.rfc3339(run.key.schedule_time), run.state.value) for run in found]
