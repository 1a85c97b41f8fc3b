"""The audit (audit.py), max_lateness_seconds and tools/runs.py missed/backfill, against Google's Firestore emulator.

Fire times come from schedules.py (cronsim in each zone, Debian cron's daylight saving rule); the DST
cases are the 2026 transitions of America/New_York (8 Mar, 1 Nov) and Europe/Madrid (29 Mar, 25 Oct).
Records are written through the protocol itself (RunLedger.claim / complete) at the times a test chooses,
so old schedule times work.
"""

import dataclasses
import datetime as dt
import json
import logging

import pytest
from conftest import configured, records, scheduler_headers
from proof_fixtures import a_job
from scheduled_dedup_tools import runs

import audit
import config as configuration
import dedup
import schedules
from keys import RunKey, parse_schedule_time
from ledger import AuditCursor, Claim, RecordChanged, RunLedger
from outcomes import Misconfigured

UTC = dt.UTC
PROJECT_AND_LOCATION = ("audit-test-project", "europe-west1")  # any: fire-time tests only compare times


def at(text):
    return parse_schedule_time(text)


def fire_times(schedule, zone, since, until):
    runs_ = audit.expected_runs("job", a_job("job", schedule, zone), at(since), at(until), *PROJECT_AND_LOCATION)
    return [(audit.rfc3339(run.key.schedule_time), run.dst and run.dst.value) for run in runs_]


# ---------------------------------------------------------------- fire times (no store)


def test_spring_forward_new_york_a_skipped_time_is_nonexistent_once():
    # 02:30 does not exist on 8 Mar 2026: one entry, keyed first by the gap's end (07:00Z = 03:00 EDT).
    assert fire_times("30 2 * * *", "America/New_York", "2026-03-07T00:00:00Z", "2026-03-10T00:00:00Z") == [
        ("2026-03-07T07:30:00Z", None),
        ("2026-03-08T07:00:00Z", "nonexistent"),
        ("2026-03-09T06:30:00Z", None),
    ]


def test_fall_back_new_york_a_repeated_time_is_one_run_at_its_first_instant():
    assert fire_times("30 1 * * *", "America/New_York", "2026-10-31T00:00:00Z", "2026-11-03T00:00:00Z") == [
        ("2026-10-31T05:30:00Z", None),
        ("2026-11-01T05:30:00Z", "ambiguous"),
        ("2026-11-02T06:30:00Z", None),
    ]


def test_an_hourly_schedule_runs_the_repeated_hour_twice_like_debian_cron():
    # A '*' in the hour field runs on the new time as it comes (Debian cron, cronsim): 01:00 EDT and 01:00 EST.
    assert fire_times("0 * * * *", "America/New_York", "2026-11-01T04:00:00Z", "2026-11-01T08:00:00Z") == [
        ("2026-11-01T04:00:00Z", None),
        ("2026-11-01T05:00:00Z", "ambiguous"),
        ("2026-11-01T06:00:00Z", "ambiguous"),
        ("2026-11-01T07:00:00Z", None),
    ]


def test_madrid_spring_forward_and_fall_back():
    assert fire_times("30 2 * * *", "Europe/Madrid", "2026-03-28T00:00:00Z", "2026-03-30T00:00:00Z") == [
        ("2026-03-28T01:30:00Z", None),
        ("2026-03-29T01:00:00Z", "nonexistent"),
    ]
    assert fire_times("30 2 * * *", "Europe/Madrid", "2026-10-24T00:00:00Z", "2026-10-26T00:00:00Z") == [
        ("2026-10-24T00:30:00Z", None),
        ("2026-10-25T00:30:00Z", "ambiguous"),
    ]


def test_an_hourly_schedule_adds_no_run_for_the_gap():
    # 02:00 EST never happens; the 03:00 EDT run (07:00Z) stands for it too, so it is named by the skipped time.
    assert fire_times("0 * * * *", "America/New_York", "2026-03-08T05:00:00Z", "2026-03-08T09:00:00Z") == [
        ("2026-03-08T05:00:00Z", None),
        ("2026-03-08T06:00:00Z", None),
        ("2026-03-08T07:00:00Z", "nonexistent"),
        ("2026-03-08T08:00:00Z", None),
    ]


def test_day_of_month_and_day_of_week_both_restricted_means_either():
    # January 2026: Fridays 2, 9, 16, 23, 30 and the 13th (a Tuesday).
    times = fire_times("0 12 13 * fri", "Etc/UTC", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z")
    assert [time for time, _ in times] == [f"2026-01-{day:02d}T12:00:00Z" for day in (2, 9, 13, 16, 23, 30)]


def test_the_window_is_half_open_and_in_utc():
    assert fire_times("0 3 * * *", "Etc/UTC", "2026-01-01T03:00:00Z", "2026-01-02T03:00:00Z") == [
        ("2026-01-01T03:00:00Z", None)
    ]


@pytest.mark.parametrize(
    ("jobs", "message"),
    [
        ({"j": {"schedule": "61 * * * *", "time_zone": "Etc/UTC"}}, "jobs.j.schedule='61 * * * *'"),
        ({"j": {"schedule": "0 3 * * *", "time_zone": "Mars/Base"}}, "jobs.j.time_zone='Mars/Base'"),
        ({"j": {"time_zone": "Etc/UTC"}}, "jobs.j={'time_zone': 'Etc/UTC'}: must hold a schedule"),
        ({"j": {"job_id": "a/b", "schedule": "0 3 * * *"}}, "jobs='a/b': each job id must be"),
        ({"j": {"schedule": "0 3 * * *", "max_lateness_seconds": 30}}, "jobs.j.max_lateness_seconds=30"),
        ({}, "jobs={}: must be a non-empty mapping"),
    ],
)
def test_bad_jobs_are_misconfigured_naming_the_field(jobs, message):
    with pytest.raises(Misconfigured, match="^config.yaml: " + message.replace("*", r"\*").replace(".", r"\.")):
        configuration.load().with_jobs(jobs)


# ---------------------------------------------------------------- the audit against the records


def ledger_at(monkeypatch, jobs):
    configured(monkeypatch, lambda loaded: loaded.with_jobs(jobs))
    return RunLedger(configuration.current())


def run_to(ledger, job, time, status, now=None):
    """A record of the run at `time` through the protocol, claimed at `now` (default: its schedule time)."""
    key = RunKey(ledger.config.project, ledger.config.location, job, at(time))
    claim = ledger.claim(key, now or key.schedule_time)
    if status == "completed":
        ledger.complete(claim, key.schedule_time)
    elif status == "failed":
        ledger.fail(claim, "bad input", key.schedule_time)
    return key


def states(found):
    return [(run.job, audit.rfc3339(run.key.schedule_time), run.state.value) for run in found]


def test_the_audit_reports_exactly_the_missing_runs_across_zones_and_dst(monkeypatch, collection):
    jobs = {
        "ny": {"job_id": "ny", "schedule": "30 1 * * *", "time_zone": "America/New_York"},  # fall back on 1 Nov
        "madrid": {"job_id": "madrid", "schedule": "30 2 * * *", "time_zone": "Europe/Madrid"},  # fall back on 25 Oct
    }
    ledger = ledger_at(monkeypatch, jobs)
    run_to(ledger, "ny", "2026-10-31T05:30:00Z", "completed")
    run_to(ledger, "ny", "2026-11-01T05:30:00Z", "completed")  # the first 01:30; the second never came
    run_to(ledger, "madrid", "2026-10-24T00:30:00Z", "failed")
    run_to(ledger, "madrid", "2026-10-26T01:30:00Z", "in_progress")  # claimed, then the instance died
    now = at("2026-11-02T12:00:00Z")
    found = audit.audit_runs(ledger, ledger.config.jobs, at("2026-10-24T00:00:00Z"), at("2026-11-02T12:00:00Z"), now)
    by_state = {}
    for job, time, state in states(found):
        by_state.setdefault(state, []).append((job, time))
    assert by_state.pop("missing") == [
        ("ny", "2026-10-24T05:30:00Z"),
        ("ny", "2026-10-25T05:30:00Z"),
        ("ny", "2026-10-26T05:30:00Z"),
        ("ny", "2026-10-27T05:30:00Z"),
        ("ny", "2026-10-28T05:30:00Z"),
        ("ny", "2026-10-29T05:30:00Z"),
        ("ny", "2026-10-30T05:30:00Z"),
        ("ny", "2026-11-02T06:30:00Z"),
        ("madrid", "2026-10-25T00:30:00Z"),  # 02:30 happened twice; the first is the run, and it never came
        ("madrid", "2026-10-27T01:30:00Z"),
        ("madrid", "2026-10-28T01:30:00Z"),
        ("madrid", "2026-10-29T01:30:00Z"),
        ("madrid", "2026-10-30T01:30:00Z"),
        ("madrid", "2026-10-31T01:30:00Z"),
        ("madrid", "2026-11-01T01:30:00Z"),
        ("madrid", "2026-11-02T01:30:00Z"),
    ]
    assert by_state == {
        "completed": [("ny", "2026-10-31T05:30:00Z"), ("ny", "2026-11-01T05:30:00Z")],
        "failed": [("madrid", "2026-10-24T00:30:00Z")],
        "stuck": [("madrid", "2026-10-26T01:30:00Z")],
    }


def test_a_skipped_spring_forward_time_is_expected_at_the_gaps_end_where_the_handler_keys_it(monkeypatch, collection):
    ledger = ledger_at(monkeypatch, {"ny": {"schedule": "30 2 * * *", "time_zone": "America/New_York"}})
    window = (at("2026-03-08T00:00:00Z"), at("2026-03-09T00:00:00Z"))
    now = at("2026-03-10T00:00:00Z")
    assert states(audit.audit_runs(ledger, ledger.config.jobs, *window, now)) == [
        ("ny", "2026-03-08T07:00:00Z", "missing")  # a run the handler would have made: missing if none came
    ]
    run_to(ledger, "ny", "2026-03-08T07:00:00Z", "completed")
    assert states(audit.audit_runs(ledger, ledger.config.jobs, *window, now)) == [
        ("ny", "2026-03-08T07:00:00Z", "completed")
    ]


def test_a_run_within_lease_plus_retry_window_is_pending_not_missing(monkeypatch, collection):
    ledger_at(monkeypatch, {"j": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}})
    numbers = {"lease": dt.timedelta(seconds=100), "retry_window": dt.timedelta(seconds=1000)}
    ledger = RunLedger(configured(monkeypatch, lambda loaded: loaded.everywhere(**numbers)))
    fire = at("2026-01-01T03:00:00Z")
    window = (fire, fire + dt.timedelta(minutes=1))
    for after, state in [(1099, "pending"), (1100, "missing")]:  # lease + retry window = 1100 s
        now = fire + dt.timedelta(seconds=after)
        assert states(audit.audit_runs(ledger, ledger.config.jobs, *window, now)) == [("j", audit.rfc3339(fire), state)]


def test_the_audit_reads_each_window_in_one_batch(monkeypatch, collection):
    """RPC cost: one BatchGetDocuments per ledger.READ_BATCH expected runs, whatever the jobs."""
    jobs = {
        "a": {"job_id": "a", "schedule": "*/5 * * * *", "time_zone": "Etc/UTC"},
        "b": {"job_id": "b", "schedule": "0 * * * *", "time_zone": "Europe/Madrid"},
    }
    ledger = ledger_at(monkeypatch, jobs)
    calls = []
    monkeypatch.setattr(ledger.client, "get_all", lambda refs, **kw: calls.append(len(refs)) or iter(()))
    found = audit.audit_runs(ledger, ledger.config.jobs, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"),
                             at("2026-01-03T00:00:00Z"))  # fmt: skip
    assert len(found) == 288 + 24 and calls == [312]
    monkeypatch.setattr(RunLedger, "READ_BATCH", 100)
    calls.clear()
    audit.audit_runs(ledger, ledger.config.jobs, at("2026-01-01T00:00:00Z"), at("2026-01-02T00:00:00Z"),
                     at("2026-01-03T00:00:00Z"))  # fmt: skip
    assert calls == [100, 100, 100, 12]


# ---------------------------------------------------------------- the audit job, through the handler


def test_the_first_audit_of_a_job_marks_it_and_reports_nothing_before(monkeypatch, http, collection, now, caplog):
    """A first deploy, or a job just added: the day before it existed is not reported missing; the bookmark is
    the function's clock, even for an audit delivery dated ahead (issue 16: it must not move the audit)."""
    configured(
        monkeypatch, lambda loaded: loaded.with_jobs({"fresh": {"schedule": "*/5 * * * *", "time_zone": "Etc/UTC"}})
    )
    config = configuration.current()
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(dedup, "utcnow", lambda: now)
    # A Force run of the audit: its next fire time (its own cron, issue 24), ahead of the clock.
    forced = schedules.next_fire_after(config.spec_of(config.audit_job).fire_rule, now + schedules.CLOCK_MARGIN)
    ahead = audit.rfc3339(forced)
    assert http.post("/", headers=scheduler_headers(config.audit_job, ahead)).text.startswith("processed:")
    assert not [r for r in caplog.records if getattr(r, "json_fields", {}).get("audit_state")]
    cursor = RunLedger(config).read_audit_cursor()
    (era,) = cursor.jobs["fresh"].pop("eras")  # its schedule as first seen, reaching back
    assert era == {"from": now, "seen": now, "cron": "*/5 * * * *", "time_zone": "Etc/UTC", "dst_gap": "end_of_gap",
                   "paused": False}  # fmt: skip
    assert cursor.jobs == {"fresh": {"since": now, "judged_until": now, "audited": now}}
    assert cursor.last_full_sweep == now
    # Even an audit that found nothing logs its summary with audit_until: the dead man's switch
    # (terraform audit.tf, google_logging_metric.audit_ran) counts that field.
    summaries = [r for r in caplog.records if getattr(r, "json_fields", {}).get("audit_until")]
    assert len(summaries) == 1, [r.getMessage() for r in caplog.records]


def test_the_audit_job_is_deduplicated_and_logs_each_missing_run(monkeypatch, http, collection, now, caplog, work):
    configured(
        monkeypatch, lambda loaded: loaded.with_jobs({"hourly": {"schedule": "0 * * * *", "time_zone": "Etc/UTC"}})
    )
    config = configuration.current()
    ledger = RunLedger(config)
    long_ago = now - dt.timedelta(days=2)  # audited for long, never swept: a full sweep of the whole lookback
    ledger.write_audit_cursor(AuditCursor({"hourly": {"since": long_ago, "judged_until": long_ago}}))
    hour = now.replace(minute=0)
    ran = hour - dt.timedelta(hours=3)
    run_to(ledger, "hourly", audit.rfc3339(ran), "completed", now=now)
    audit_time = audit.rfc3339(now)
    caplog.set_level(logging.INFO)
    # The audit's clock is this test's: on a loaded machine the wall clock may pass an hour after `now` was read.
    monkeypatch.setattr(dedup, "utcnow", lambda: now)
    first = http.post("/", headers=scheduler_headers(config.audit_job, audit_time))
    assert first.status_code == 200 and first.text.startswith("processed:")
    assert work.calls == []  # the audit job's work is the audit, never job.run
    missing = [r.json_fields for r in caplog.records if getattr(r, "json_fields", {}).get("audit_state")]
    settled = now - config.settle
    expected = [
        hour - dt.timedelta(hours=h)
        for h in range(24, -1, -1)
        if hour - dt.timedelta(hours=h) >= now - audit.lookback(config) and hour - dt.timedelta(hours=h) <= settled
    ]
    expected.remove(ran)
    assert [(f["job"], f["schedule_time"]) for f in missing] == [("hourly", t.isoformat()) for t in expected]
    assert all(f["audit_state"] == "missing" and len(f["run_id"]) == 64 for f in missing)
    summary = [r for r in caplog.records if "audit_summary" in getattr(r, "json_fields", {})]
    assert len(summary) == 1 and summary[0].json_fields["audit_summary"]["missing"] == len(expected)
    caplog.clear()
    replay = http.post("/", headers=scheduler_headers(config.audit_job, audit_time))
    assert replay.status_code == 200 and replay.text.startswith("duplicate:")
    assert not [r for r in caplog.records if "audit_summary" in getattr(r, "json_fields", {})]
    audit_key = RunKey(config.project, config.location, config.audit_job, at(audit_time))
    assert records(collection)[audit_key.run_id]["status"] == "completed"


# ---------------------------------------------------------------- max_lateness_seconds


def test_a_delivery_past_max_lateness_is_recorded_skipped_and_never_runs(monkeypatch, http, collection, now, work):
    jobs = {
        "report": {"job_id": "report", "schedule": "0 3 * * *", "time_zone": "Etc/UTC", "max_lateness_seconds": 3600}
    }
    configured(monkeypatch, lambda loaded: loaded.with_jobs(jobs))
    monkeypatch.setattr(dedup, "utcnow", lambda: now)  # lateness is judged on this test's clock, not the wall's
    late = audit.rfc3339(now - dt.timedelta(seconds=3700))
    answer = http.post("/", headers=scheduler_headers("report", late))
    assert answer.status_code == 200 and answer.text.startswith("skipped_late:"), answer.text
    assert "past max_lateness_seconds=3600" in answer.text
    assert work.calls == []
    (record,) = records(collection).values()
    assert record["status"] == "skipped" and "3600" in record["last_error"]
    replay = http.post("/", headers=scheduler_headers("report", late))
    assert replay.status_code == 200 and replay.text.startswith("duplicate:") and work.calls == []
    # Within the limit, and for a job without one, the work runs.
    on_time = audit.rfc3339(now - dt.timedelta(seconds=3500))
    assert http.post("/", headers=scheduler_headers("report", on_time)).text.startswith("processed:")
    assert http.post("/", headers=scheduler_headers("other", late)).text.startswith("processed:")
    assert len(work.calls) == 2


def test_the_outcome_line_carries_the_works_duration(http, collection, now, caplog, work):
    caplog.set_level(logging.INFO)
    http.post("/", headers=scheduler_headers("timed", audit.rfc3339(now)))
    (line,) = [r for r in caplog.records if "outcome" in getattr(r, "json_fields", {})]
    assert line.json_fields["outcome"] == "processed"
    assert isinstance(line.json_fields["duration_ms"], int) and line.json_fields["duration_ms"] >= 0


# ---------------------------------------------------------------- tools/runs.py missed and backfill


def ten_minute_job(monkeypatch):
    configured(
        monkeypatch, lambda loaded: loaded.with_jobs({"ten": {"schedule": "*/10 * * * *", "time_zone": "Etc/UTC"}})
    )


def window_3h_ago(now):
    start = (now - dt.timedelta(hours=3)).replace(minute=now.minute // 10 * 10)
    return audit.rfc3339(start), audit.rfc3339(start + dt.timedelta(minutes=30))


def test_missed_prints_a_table_and_json(monkeypatch, collection, now, capsys):
    ten_minute_job(monkeypatch)
    since, until = window_3h_ago(now)
    ledger = RunLedger(configuration.current())
    run_to(ledger, "ten", since, "completed", now=now)
    assert runs.main(["missed", "--since", since, "--until", until, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    second, third = (at(since) + dt.timedelta(minutes=m) for m in (10, 20))
    assert [(row["job"], row["schedule_time"], row["state"]) for row in listed] == [
        ("ten", audit.rfc3339(second), "missing"),
        ("ten", audit.rfc3339(third), "missing"),
    ]
    assert runs.main(["missed", "--since", since, "--until", until, "--job", "ten"]) == 0
    out, err = capsys.readouterr()
    assert out.splitlines()[0].split() == runs.RUN_HEADER and len(out.splitlines()) == 3
    assert "2 of 3 expected run(s)" in err


def test_missed_judges_a_job_from_the_first_audit_that_saw_it(monkeypatch, collection, now, capsys):
    ten_minute_job(monkeypatch)
    since, until = window_3h_ago(now)
    ledger = RunLedger(configuration.current())
    first_seen = at(since) + dt.timedelta(minutes=15)
    ledger.write_audit_cursor(AuditCursor({"ten": {"since": first_seen, "judged_until": at(until)}}))
    assert runs.main(["missed", "--since", since, "--until", until, "--json"]) == 0
    assert [row["schedule_time"] for row in json.loads(capsys.readouterr().out)] == [
        audit.rfc3339(at(since) + dt.timedelta(minutes=20))
    ]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--since", "yesterday", "--until", "2026-01-01T00:00:00Z"], "--since='yesterday': is not an RFC 3339"),
        (["--since", "2026-01-02T00:00:00Z", "--until", "2026-01-01T00:00:00Z"], "must be later than --since"),
        (["--since", "2000-01-01T00:00:00Z", "--until", "2000-01-02T00:00:00Z"], "older than the retention window"),
        (["--since", "{recent}", "--until", "{now}", "--job", "nope"], "--job='nope': not a job of this project"),
    ],
)
def test_missed_refuses_bad_arguments_in_one_line(monkeypatch, collection, now, capsys, args, message):
    ten_minute_job(monkeypatch)
    values = {"recent": audit.rfc3339(now - dt.timedelta(hours=1)), "now": audit.rfc3339(now)}
    assert runs.main(["missed", *[arg.format(**values) for arg in args]]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and "\n" not in err


def test_progress_bar_draws_only_for_long_windows():
    import io

    stream = io.StringIO()
    bar = runs.Progress("reading", stream)
    bar(10, runs.PROGRESS_FROM - 1)
    assert stream.getvalue() == ""
    bar(runs.PROGRESS_FROM, runs.PROGRESS_FROM)
    assert stream.getvalue().endswith(f"{runs.PROGRESS_FROM}/{runs.PROGRESS_FROM} 100%\n")


# ---------------------------------------------------------------- the incremental audit (issue 19)


def hourly_jobs(count):
    return {f"h{i}": {"job_id": f"h{i}", "schedule": "0 * * * *", "time_zone": "Etc/UTC"} for i in range(count)}


def audit_at(monkeypatch, moment, config):
    """One audit run at `moment` on the function's clock; returns (documents read, lines it logged)."""
    read = []
    real_get_all = RunLedger._get_all

    def counted(self, refs, **kwargs):
        read.append(len(refs))
        return real_get_all(self, refs, **kwargs)

    monkeypatch.setattr(RunLedger, "_get_all", counted)
    monkeypatch.setattr(dedup, "utcnow", lambda: moment)
    lines = []
    handler = logging.Handler()
    handler.emit = lines.append
    audit.logger.addHandler(handler)
    level = audit.logger.level
    audit.logger.setLevel(logging.INFO)  # the summary is INFO, whatever the root logger's level
    try:
        key = RunKey(config.project, config.location, config.audit_job, moment)
        audit.run(Claim(key, "a", 1, moment).context(None))
    finally:
        audit.logger.setLevel(level)
        audit.logger.removeHandler(handler)
        monkeypatch.setattr(RunLedger, "_get_all", real_get_all)
    return sum(read), [line.json_fields for line in lines]


def test_an_incremental_audit_reads_only_the_runs_settled_since_the_last_one(monkeypatch, collection):
    """Reads per audit follow the new fire times, not the lookback: 20 hourly jobs audited hourly read 20
    records an audit (the lookback audit read 24 x 20 + 20 markers), and each run is judged exactly once."""
    ledger = ledger_at(monkeypatch, hourly_jobs(20))
    config = ledger.config
    start = at("2026-03-01T00:00:00Z")
    entry = {"since": start - dt.timedelta(days=3), "judged_until": start - config.settle}
    ledger.write_audit_cursor(AuditCursor(dict.fromkeys(config.jobs, entry), last_full_sweep=start))
    # The first judged fire time: the first hour at or after the bookmark (its settle depends on the bake's timing).
    first = (start - config.settle + dt.timedelta(minutes=59, seconds=59)).replace(minute=0, second=0, microsecond=0)
    run_to(ledger, "h3", audit.rfc3339(first), "completed")
    judged = []
    for hour in range(1, 4):
        read, lines = audit_at(monkeypatch, start + dt.timedelta(hours=hour), config)
        (summary,) = [line for line in lines if "audit_summary" in line]
        assert summary["audit_kind"] == "incremental" and read == 20, (hour, read)
        judged += [(line["job"], line["schedule_time"]) for line in lines if "audit_state" in line]
        assert sum(summary["audit_summary"].values()) == 20
    # Every hour of every job but the completed one, each reported missing once.
    assert len(judged) == len(set(judged)) == 3 * 20 - 1


def test_a_full_sweep_runs_once_a_day_and_reports_a_still_missing_run_again(monkeypatch, collection):
    ledger = ledger_at(monkeypatch, hourly_jobs(1))
    config = ledger.config
    start = at("2026-03-01T00:00:00Z")
    entry = {"since": start - dt.timedelta(days=3), "judged_until": start - config.settle}
    ledger.write_audit_cursor(AuditCursor({"h0": entry}, last_full_sweep=start - dt.timedelta(hours=23)))
    kinds, missing = [], []
    for hour in (0, 1, 2):  # the sweep is due at 01:00 (a day after the last one), then not for a day
        read, lines = audit_at(monkeypatch, start + dt.timedelta(hours=hour), config)
        (summary,) = [line for line in lines if "audit_summary" in line]
        kinds.append(summary["audit_kind"])
        missing.append(summary["audit_summary"].get("missing", 0))
    assert kinds == ["incremental", "full sweep", "incremental"]
    # 00:00 judges nothing new (the bookmark is at its horizon), 01:00 the whole lookback, 02:00 one hour.
    sweep = start + dt.timedelta(hours=1)
    hours = [sweep - dt.timedelta(hours=h) for h in range(48)]
    in_lookback = [h for h in hours if sweep - audit.lookback(config) <= h < sweep - config.settle]
    assert missing == [0, len(in_lookback), 1]


def test_the_plan_keeps_first_seen_and_never_moves_the_bookmark_back(monkeypatch, collection):
    config = ledger_at(monkeypatch, hourly_jobs(2)).config
    now = at("2026-03-01T12:00:00Z")
    ahead = now + dt.timedelta(hours=5)
    cursor = AuditCursor({"h0": {"since": now - dt.timedelta(days=9), "judged_until": ahead}}, now)
    sweep = audit.plan(cursor, config.jobs, now, config)
    assert not sweep.full and sweep.until == now - config.settle
    assert sweep.windows == {"h0": (ahead, sweep.until), "h1": (now, sweep.until)}  # a new job: from this audit on
    entries = {name: {k: v for k, v in entry.items() if k != "eras"} for name, entry in sweep.cursor.jobs.items()}
    assert entries["h0"] == {"since": now - dt.timedelta(days=9), "judged_until": ahead, "audited": now}
    assert entries["h1"] == {"since": now, "judged_until": now, "audited": now}
    assert audit.plan(AuditCursor({}), config.jobs, now, config).full  # never swept: a full sweep


def test_each_job_is_judged_up_to_its_own_settle_time(monkeypatch, collection):
    """Per-job timing (config.yaml): a job with its own longer lease and retry window settles later; no run of it is
    judged (and so bookmarked) before it settles, and no other job waits for it (issue 24)."""
    project = ledger_at(monkeypatch, hourly_jobs(1)).config  # the bake's own numbers: h1 outlasts them by 600 s
    lease, window = int(project.lease.total_seconds()) + 300, int(project.retry_window.total_seconds()) + 300
    two = ledger_at(monkeypatch, hourly_jobs(2)).config
    own = {"lease": dt.timedelta(seconds=lease), "retry_window": dt.timedelta(seconds=window)}
    h1 = dataclasses.replace(two.jobs["h1"], **own)
    config = configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, jobs={**loaded.jobs, "h1": h1}))
    now = at("2026-03-01T12:00:00Z")
    slowest = dt.timedelta(seconds=lease + window)
    assert config.settle_for("h1") == slowest > config.settle_for("h0") == config.settle
    old = {"since": now - dt.timedelta(days=9), "judged_until": now - dt.timedelta(days=2)}
    sweep = audit.plan(AuditCursor(dict.fromkeys(config.jobs, old)), config.jobs, now, config)
    ends = {"h0": now - config.settle, "h1": now - slowest}
    assert {name: end for name, (_, end) in sweep.windows.items()} == ends
    assert {name: entry["judged_until"] for name, entry in sweep.cursor.jobs.items()} == ends


def test_two_audits_from_one_bookmark_cannot_both_move_it(monkeypatch, collection):
    ledger = ledger_at(monkeypatch, hourly_jobs(1))
    ledger.write_audit_cursor(AuditCursor({}))
    read = ledger.read_audit_cursor()
    ledger.write_audit_cursor(audit.plan(read, ledger.config.jobs, at("2026-03-01T00:00:00Z"), ledger.config).cursor)
    with pytest.raises(RecordChanged):
        ledger.write_audit_cursor(
            audit.plan(read, ledger.config.jobs, at("2026-03-01T01:00:00Z"), ledger.config).cursor
        )
    with pytest.raises(RecordChanged):  # and the first write creates it only once
        ledger.write_audit_cursor(AuditCursor({}))
