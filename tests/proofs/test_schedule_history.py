"""Issue 24, items 1 and 2: a schedule change never rewrites history, and pause is a state the handler honours.

Each fire time is judged by the schedule (cron, zone, paused) in force at it: the audit keeps each job's history in
its bookmark (audit.plan), and the audit, `runs.py missed` and `runs.py backfill` judge by it (audit.expected_runs).
Through the bake's surfaces: deliveries with Scheduler's headers (the audit job's too), the jobs as config.py
writes it, tools/runs.py; the clock is the protocol's (dedup.utcnow), on Google's Firestore emulator.
"""

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
from ledger import RunLedger

DAY = dt.timedelta(days=1)
SECOND = dt.timedelta(seconds=1)
DAY0 = parse_schedule_time("2027-01-04T00:00:00Z")  # any dates: the clock is the test's (January: no DST in NY)


def rfc(moment):
    return audit.rfc3339(moment)


def with_job(monkeypatch, **job):
    job = {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"} | job
    return configured(monkeypatch, lambda loaded: loaded.with_jobs({"daily": job}))


def deliver(monkeypatch, http, job, schedule_time, at=None, **extra):
    """One delivery of `job` for `schedule_time`, with the function's clock at `at` (default: a minute later)."""
    monkeypatch.setattr(dedup, "utcnow", lambda: at or schedule_time + dt.timedelta(minutes=1))
    return http.post("/", headers=scheduler_headers(job, rfc(schedule_time), **extra))


def audit_at(monkeypatch, http, config, moment, caplog, deployed=None):
    """The audit job's delivery at `moment` (with history.tf's header `deployed`, if given); the runs it logged as
    needing a person, (schedule time, state)."""
    caplog.clear()
    extra = {audit.DEPLOYED_HEADER: deployed} if deployed else {}
    answer = deliver(monkeypatch, http, config.audit_job, moment, at=moment, **extra)
    assert answer.status_code == 200 and answer.text.startswith("processed:"), answer.text
    fields = [getattr(r, "json_fields", {}) for r in caplog.records]
    return [(f["schedule_time"], f["audit_state"]) for f in fields if f.get("audit_state")]


def missed(monkeypatch, capsys, since, until, *flags, command="missed"):
    """runs.py `command` over [since, until) at `until` on the clock: (what it printed, its summary line)."""
    monkeypatch.setattr(dedup, "utcnow", lambda: until)
    assert runs.main([command, "--since", rfc(since), "--until", rfc(until), *flags]) == 0
    out, err = capsys.readouterr()
    return out, err.strip().splitlines()[-1]


# ---------------------------------------------------------------- item 1: a schedule change


@pytest.mark.parametrize(
    "new",
    [{"schedule": "0 5 * * *"}, {"time_zone": "America/New_York"}],
    ids=["cron-03:00-to-05:00", "zone-UTC-to-New-York"],
)
def test_a_schedule_change_never_rewrites_the_runs_before_it(monkeypatch, http, collection, work, caplog, capsys, new):
    """Three days at 03:00 UTC, then config.yaml moves the job: no completed run vanishes from the audit, `missed` or
    `backfill`, no never-scheduled time of the new schedule is missing before the change, backfill delivers nothing."""
    caplog.set_level(logging.INFO)
    config = with_job(monkeypatch)
    changed, end = DAY0 + 2 * DAY + dt.timedelta(hours=20), DAY0 + 5 * DAY
    old_times = [DAY0 + day * DAY + dt.timedelta(hours=3) for day in range(3)]
    new_rule = schedules.Schedule(new.get("schedule", "0 3 * * *"), new.get("time_zone", "Etc/UTC"))
    new_times = [fire.instant for fire in schedules.runs(new_rule, changed, end - DAY / 2)]
    # In time order: an audit every 6 h (hourly in a bake: fewer here, same rule), the deploy, the deliveries.
    events = [(DAY0 + dt.timedelta(hours=6 * i), "audit") for i in range(21)] + [(changed, "deploy")]
    needing = []
    for moment, what in sorted(events + [(fire, "deliver") for fire in old_times + new_times]):
        if what == "audit":
            needing += audit_at(monkeypatch, http, config, moment, caplog)
        elif what == "deploy":
            config = with_job(monkeypatch, **new)
        else:
            assert deliver(monkeypatch, http, "daily", moment).text.startswith("processed:")
    assert len(work.calls) == 5 and len(new_times) == 2
    assert needing == []  # neither the incremental audits nor the daily full sweeps report a run
    out, summary = missed(monkeypatch, capsys, DAY0, end, "--all", "--json")
    listed = [(row["schedule_time"], row["state"]) for row in json.loads(out)]
    assert listed == [(rfc(fire), "completed") for fire in old_times + new_times], summary
    out, summary = missed(monkeypatch, capsys, DAY0, end, "--dry-run", command="backfill")
    assert summary.endswith("would deliver 0, 0 not answered 2xx"), (out, summary)


def test_expected_runs_judges_each_time_by_the_era_in_force_and_a_changes_window_by_both():
    """The function the audit, `missed`, `backfill`, catch-up (and the simulation) share. Between `from` (the audit
    before a change) and `seen` (the audit that saw it) the deploy's instant is unknown: a time only one era names is
    `maybe` there (judged only by its record), and paused if either era says so."""
    hourly, half = a_job("j", "0 * * * *", "Etc/UTC"), a_job("j", "30 * * * *", "Etc/UTC")
    t = DAY0 + dt.timedelta(hours=10)
    eras = [
        audit.era(hourly, DAY0 - 9 * DAY),
        audit.era(half, t + dt.timedelta(hours=2), t + dt.timedelta(hours=3)),  # :00 -> :30 between 12:00 and 13:00
        # paused between 14:00 and 15:00
        audit.era(
            a_job("j", "30 * * * *", "Etc/UTC", paused=True), t + dt.timedelta(hours=4), t + dt.timedelta(hours=5)
        ),
    ]
    found = audit.expected_runs("j", eras, t, t + dt.timedelta(hours=7), "p", "europe-west1")
    assert [(f"{run.wall_time:%H:%M}", run.paused, run.maybe) for run in found] == [
        ("10:00", False, False),
        ("11:00", False, False),
        ("12:00", False, True),  # the change's window: only the old era names it, judged only if it has a record
        ("12:30", False, True),  # only the new one
        ("13:30", False, False),
        ("14:30", True, False),  # the pause's window: paused if either era says so (nobody was to deliver it)
        ("15:30", True, False),
        ("16:30", True, False),
    ]
    assert found[0].key == RunKey("p", "europe-west1", "j", t)
    # A config.Job is one era for all time.
    assert [
        run.key.schedule_time for run in audit.expected_runs("j", hourly, t, t + dt.timedelta(hours=2), "p", "l")
    ] == [
        t,
        t + dt.timedelta(hours=1),
    ]


def test_in_a_changes_window_a_time_only_one_schedule_names_is_judged_only_by_its_record(monkeypatch, collection):
    """The deploy came between two audits: the run the new schedule made in between is judged (completed), the time
    only the old one named, never delivered, is not (no never-scheduled time is missing)."""
    config = with_job(monkeypatch, schedule="0 * * * *")
    ledger = RunLedger(config)
    t = DAY0 + dt.timedelta(hours=10)
    eras = [
        audit.era(a_job("daily", "0 * * * *", "Etc/UTC"), DAY0),
        audit.era(a_job("daily", "30 * * * *", "Etc/UTC"), t, t + dt.timedelta(hours=1)),
    ]
    ran = RunKey(config.project, config.location, "daily", t + dt.timedelta(minutes=30))
    ledger.complete(ledger.claim(ran, ran.schedule_time), ran.schedule_time)
    found = audit.audit_runs(ledger, config.jobs, t, t + dt.timedelta(hours=1), t + DAY, eras={"daily": eras})
    assert [(run.key.schedule_time, run.state) for run in found] == [(ran.schedule_time, audit.State.COMPLETED)]


def test_a_job_added_between_audits_and_removed_and_re_added_keeps_each_run_judged_by_its_own_era(
    monkeypatch, http, collection, work, caplog, capsys
):
    """`other` (11:00 daily) is deployed at 10:00 on day 1, between the 06:00 and 12:00 audits, removed on day 2 at
    20:00 and re-added on day 3 at 20:00. Nothing before it existed is missing; its day-1 run (before the first audit
    that saw it) and its runs before the removal stay listed; its day-3 time (removed then) is not due."""
    caplog.set_level(logging.INFO)
    daily = {"job_id": "daily", "schedule": "0 3 * * *", "time_zone": "Etc/UTC"}
    other = {"job_id": "other", "schedule": "0 11 * * *", "time_zone": "Etc/UTC"}

    def deploy(*jobs):
        return configured(monkeypatch, lambda loaded: loaded.with_jobs({job["job_id"]: job for job in jobs}))

    config, end = deploy(daily), DAY0 + 5 * DAY
    hours = dt.timedelta(hours=1)
    events = [(DAY0 + 6 * i * hours, "audit", ()) for i in range(19)]
    events += [(DAY0 + DAY + 10 * hours, "deploy", (daily, other)), (DAY0 + 2 * DAY + 20 * hours, "deploy", (daily,))]
    events += [(DAY0 + 3 * DAY + 20 * hours, "deploy", (daily, other))]
    events += [(DAY0 + day * DAY + 3 * hours, "daily", ()) for day in range(5)]
    ran = [DAY0 + day * DAY + 11 * hours for day in (1, 2, 4)]  # day 0: not yet; day 3: removed
    needing = []
    for moment, what, jobs in sorted(events + [(fire, "other", ()) for fire in ran]):
        if what == "audit":
            needing += audit_at(monkeypatch, http, config, moment, caplog)
        elif what == "deploy":
            config = deploy(*jobs)
        else:
            assert deliver(monkeypatch, http, what, moment).text.startswith("processed:")
    assert needing == [] and len(work.calls) == 8
    out, summary = missed(monkeypatch, capsys, DAY0, end, "--job", "other", "--all", "--json")
    assert [(row["schedule_time"], row["state"]) for row in json.loads(out)] == [
        (rfc(fire), "completed") for fire in ran
    ], summary


# ---------------------------------------------------------------- item 2: pause


def test_a_paused_jobs_deliveries_do_not_run_the_work_and_a_rerun_does(monkeypatch, http, collection, work, log_lines):
    """A retry in flight, a queued catch-up or backfill (Scheduler's headers, through Cloud Tasks), `make fire`, a Force
    run: 200 skipped_paused, recorded `skipped`, one outcome line each. An explicit re-run runs the work."""
    with_job(monkeypatch)
    fire = DAY0 + dt.timedelta(hours=3)
    work.errors[0] = RuntimeError("the export failed")
    assert deliver(monkeypatch, http, "daily", fire).status_code == 500  # released for Scheduler's retry
    with_job(monkeypatch, paused=True)  # paused during the incident
    lines = len(log_lines())
    deliveries = [
        (fire, fire + dt.timedelta(minutes=2)),  # Scheduler's retry in flight
        (fire - DAY, fire),  # a catch-up or backfill queued before the pause
        (fire + dt.timedelta(minutes=7), fire + dt.timedelta(minutes=7, seconds=20)),  # `make fire`: now, rounded
        (fire + DAY, fire + dt.timedelta(minutes=8)),  # a Force run: the next fire time
    ]
    for schedule_time, clock in deliveries:
        answer = deliver(monkeypatch, http, "daily", schedule_time, at=clock)
        assert answer.status_code == 200 and answer.text.startswith("skipped_paused:"), answer.text
    assert len(work.calls) == 1
    outcomes = [line["outcome"] for line in log_lines()[lines:] if "outcome" in line]
    assert outcomes == ["skipped_paused"] * 4
    assert sorted(record["status"] for record in records(collection).values()) == ["skipped"] * 4
    assert all("paused" in record["last_error"] for record in records(collection).values())
    rerun = {"X-Rerun-Id": "r1", "X-Rerun-By": "ana@example.com", "X-Rerun-Reason": "fixed, run it now"}
    answer = deliver(monkeypatch, http, "daily", fire, at=fire + dt.timedelta(minutes=9), **rerun)
    assert answer.text.startswith("processed:") and len(work.calls) == 2 and work.calls[1].rerun_id == "r1"


def test_a_run_missed_before_a_pause_and_resumed_before_it_was_judged_is_reported(
    monkeypatch, http, collection, caplog, capsys
):
    """03:00 fails for good; the job is paused at 03:02 and resumed at 03:07, before the run settled: the audit after
    it settled and `runs.py missed` both report it missing (the pause period itself is `paused`, never missing)."""
    caplog.set_level(logging.INFO)
    config = with_job(monkeypatch)
    fire = DAY0 + dt.timedelta(hours=3)
    minute = dt.timedelta(minutes=1)
    assert audit_at(monkeypatch, http, config, fire - dt.timedelta(hours=1), caplog) == []
    assert audit_at(monkeypatch, http, config, fire + minute / 2, caplog) == []  # not settled yet: pending
    config = with_job(monkeypatch, paused=True)
    assert audit_at(monkeypatch, http, config, fire + 5 * minute, caplog) == []
    config = with_job(monkeypatch)
    assert audit_at(monkeypatch, http, config, fire + 10 * minute, caplog) == []
    settled = fire + config.settle_for("daily") + minute
    assert audit_at(monkeypatch, http, config, settled, caplog) == [(fire.isoformat(), "missing")]
    out, summary = missed(monkeypatch, capsys, fire - dt.timedelta(hours=1), settled, "--json")
    assert [(row["schedule_time"], row["state"]) for row in json.loads(out)] == [(rfc(fire), "missing")]
    assert summary.startswith("1 of 1 expected run(s)")


def deployed_header(config, start, seen):
    """What the audit's Scheduler job sends after an apply that changed a schedule (history.tf): the instants before
    and after the apply changed the function and the Scheduler jobs, and the digest of config.yaml's schedules."""
    return f"{rfc(start)} {rfc(seen)} {audit.schedules_digest(config.jobs)}"


def test_a_run_missed_just_before_a_pause_inside_an_audit_interval_is_reported_missing(
    monkeypatch, http, collection, caplog, capsys
):
    """03:00 is never delivered; an apply pauses the job at 03:02 and another resumes it at 03:40, with hourly audits
    around both. The audit dates each change by the apply (history.tf's X-Schedules-Deployed), not by the audits
    around it: 03:00 was due under the schedule in force then, and is reported missing by the audit and `runs.py
    missed`, not paused.
    (Dated by the audits alone, the pause's era would reach back to 02:30 and call it paused: a lost run unreported.)"""
    caplog.set_level(logging.INFO)
    config = with_job(monkeypatch, schedule="0 * * * *")
    fire, minute = DAY0 + dt.timedelta(hours=3), dt.timedelta(minutes=1)
    assert audit_at(monkeypatch, http, config, fire - 30 * minute, caplog) == []
    config = with_job(monkeypatch, schedule="0 * * * *", paused=True)
    header = deployed_header(config, fire + 2 * minute, fire + 3 * minute)
    assert audit_at(monkeypatch, http, config, fire + 30 * minute, caplog, header) == []
    config = with_job(monkeypatch, schedule="0 * * * *")
    header = deployed_header(config, fire + 40 * minute, fire + 41 * minute)
    settled = max(fire + config.settle_for("daily"), fire + 90 * minute) + minute
    found = audit_at(monkeypatch, http, config, settled, caplog, header)
    assert (fire.isoformat(), "missing") in found, found
    out, _ = missed(monkeypatch, capsys, fire - 30 * minute, settled, "--json", "--all")
    assert {row["schedule_time"]: row["state"] for row in json.loads(out)}[rfc(fire)] == "missing"


def test_a_change_is_dated_by_the_apply_only_when_it_deployed_the_functions_schedules():
    """audit.plan: the apply's bracket dates a change only if its digest is the function's schedules' (an audit
    between the function's deploy and its own job's update, or a change outside Terraform, keeps the audits'
    dating); never before the era it follows began, never after now. A malformed header is ignored."""
    old, new = a_job("daily", "0 3 * * *", "Etc/UTC"), a_job("daily", "0 5 * * *", "Etc/UTC")
    config = configuration.current()
    hour = dt.timedelta(hours=1)
    last = {
        "daily": {
            "since": DAY0 - DAY,
            "judged_until": DAY0 - DAY,
            "audited": DAY0,
            "eras": [audit.era(old, DAY0 - DAY)],
        }
    }
    cursor = audit.AuditCursor(last)

    def eras_after(deployed, jobs=None):
        jobs = {"daily": new} if jobs is None else jobs
        return audit.plan(cursor, jobs, DAY0 + DAY, config, deployed).eras["daily"]

    def header(start, seen, jobs=None):
        return audit.Deployed(start, seen, audit.schedules_digest({"daily": new} if jobs is None else jobs))

    dated = eras_after(header(DAY0 + 5 * hour, DAY0 + 5 * hour + 40 * SECOND))[-1]
    assert (dated["from"], dated["seen"], dated["cron"]) == (
        DAY0 + 5 * hour,
        DAY0 + 5 * hour + 40 * SECOND,
        "0 5 * * *",
    )
    by_audits = eras_after(None)[-1]
    assert (by_audits["from"], by_audits["seen"]) == (DAY0, DAY0 + DAY)
    stale = eras_after(header(DAY0 + 5 * hour, DAY0 + 6 * hour, {"daily": old}))[-1]
    assert (stale["from"], stale["seen"]) == (DAY0, DAY0 + DAY)
    early = eras_after(header(DAY0 - 3 * DAY, DAY0 + 3 * DAY))[-1]
    assert (early["from"], early["seen"]) == (DAY0 - DAY, DAY0 + DAY)
    removed = eras_after(header(DAY0 + hour, DAY0 + 2 * hour, {}), {})
    assert removed[-1]["cron"] is None and removed[-1]["from"] == DAY0 + hour
    for broken in (None, "", "yesterday today abc", f"{rfc(DAY0)} {rfc(DAY0 - DAY)} abc", "2027-01-04T00:00:00 x y"):
        assert audit.Deployed.of(broken) is None, broken
    assert audit.Deployed.of(f"{rfc(DAY0)} {rfc(DAY0 + hour)} abc") == audit.Deployed(DAY0, DAY0 + hour, "abc")
