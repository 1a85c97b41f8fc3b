"""Paused jobs, re-runs, backfill and catch-up through the deliveries queue (issue 18), on the Firestore emulator.

The clock is moved in process with time-machine; where the behaviour crosses processes, a real functions-framework
server (tests/harness/live_server.py) is fed by a local stand-in of the Cloud Tasks queue
(tests/harness/tasks_standin.py) that tools/runs.py and the audit reach over the client library's REST transport.
"""

import dataclasses
import datetime as dt
import json
import logging
import shlex

import pytest
import time_machine
from conftest import configured, records, scheduler_headers
from scheduled_dedup_tools import runs
from scheduled_dedup_tools.firestore_emulator import free_port
from tasks_standin import TasksStandin

import audit
import config as configuration
import dedup
import schedules
import task_queue
from keys import RunKey, parse_schedule_time
from ledger import AuditCursor, RunLedger, firestore_client
from outcomes import Misconfigured
from run_context import TerminalJobError

UTC = dt.UTC
QUEUE = "projects/dedup-test-project/locations/europe-west1/queues/test-deliveries"


def at(text):
    return parse_schedule_time(text)


def hourly(monkeypatch, **flags):
    """One job, every hour on the hour, with the flags given (paused, catch_up, max_lateness_seconds)."""
    job = {"schedule": "0 * * * *", "time_zone": "Etc/UTC", **flags}
    return configured(
        monkeypatch, lambda loaded: dataclasses.replace(loaded.with_jobs({"hourly": job}), tasks_queue=QUEUE)
    )


def audit_at(http, config, moment, caplog):
    """Deliver the audit job's run for `moment` with the clock at `moment`; the audited states, by schedule time."""
    caplog.clear()
    with time_machine.travel(moment + dt.timedelta(seconds=5)):
        answer = http.post("/", headers=scheduler_headers(config.audit_job, audit.rfc3339(moment)))
    assert answer.status_code == 200 and answer.text.startswith("processed:"), answer.text
    return [r.json_fields for r in caplog.records if getattr(r, "json_fields", {}).get("audit_state")]


# ---------------------------------------------------------------- pause


def test_a_paused_jobs_fire_times_are_paused_never_missing_and_resuming_reports_no_gap(
    monkeypatch, http, collection, caplog
):
    caplog.set_level(logging.INFO)
    # Forward only: gRPC deadlines are wall-clock instants, so a clock moved back would expire every call at once.
    day = (dt.datetime.now(UTC) + dt.timedelta(days=1)).replace(minute=0, second=0, microsecond=0)
    config = hourly(monkeypatch, paused=True)
    ledger = RunLedger(config)
    audit_at(http, config, day, caplog)  # the first audit that sees the pause starts judging from here
    later = day + dt.timedelta(hours=12)
    # What the incremental audit at `later` judges: the fire times after the pause was seen, settled by then.
    judged = [h for h in range(1, 12) if day + dt.timedelta(hours=h) < later - config.settle]
    assert audit_at(http, config, later, caplog) == []  # nothing logged as needing a person
    with time_machine.travel(later):
        eras = ledger.read_audit_cursor().jobs["hourly"]["eras"]
        found = audit.audit_runs(ledger, config.jobs, day, later, dedup.utcnow(), eras={"hourly": eras})
    assert [f.state for f in found] == [audit.State.PAUSED] * 12
    summary = next(r.json_fields for r in caplog.records if "audit_summary" in r.json_fields)
    assert summary["audit_summary"] == {"paused": len(judged)} and judged
    assert [era["paused"] for era in eras] == [True]

    # Resumed by a deploy: the first audit that sees it starts an era; the paused hours are never missing.
    config = hourly(monkeypatch)
    resumed = later + dt.timedelta(hours=1)
    assert audit_at(http, config, resumed, caplog) == []
    entry = ledger.read_audit_cursor().jobs["hourly"]
    assert [era["paused"] for era in entry["eras"]] == [True, False]
    assert dt.timedelta(0) <= entry["eras"][-1]["seen"] - resumed < dt.timedelta(minutes=1)
    # Hours after the resume that Scheduler did not deliver are missing again.
    next_day = resumed + dt.timedelta(hours=20)
    missing = audit_at(http, config, next_day, caplog)
    assert missing and all(at(f["schedule_time"]) >= resumed for f in missing)
    assert {f["audit_state"] for f in missing} == {"missing"}


def test_paused_and_catch_up_must_be_booleans_and_catch_up_has_the_deployed_queue():
    loaded = configuration.load()
    for flag in ("paused", "catch_up"):
        hourly_job = {"schedule": "0 * * * *", "time_zone": "Etc/UTC", flag: "yes"}
        with pytest.raises(Misconfigured, match=rf"^config\.yaml: jobs\.hourly\.{flag}='yes': must be true or false$"):
            loaded.with_jobs({"hourly": hourly_job})
    # The deliveries queue the audit's catch-ups go through: every deploy has it (tasks.tf), named by config.yaml.
    caught_up = loaded.with_jobs({"hourly": {"schedule": "0 * * * *", "catch_up": True}})
    assert (
        caught_up.tasks_queue
        == f"projects/{loaded.project}/locations/{loaded.location}/queues/{loaded.slug}-deliveries"
    )
    assert runs.TASKS_QUEUE.fullmatch(caught_up.tasks_queue)


# ---------------------------------------------------------------- re-run (in process)


def rerun_headers(time, rerun_id, by="ana@example.com", reason="the export was wrong"):
    return scheduler_headers("nightly", time, **{"X-Rerun-Id": rerun_id, "X-Rerun-By": by, "X-Rerun-Reason": reason})


def test_a_rerun_runs_a_finished_run_once_more_once_and_keeps_who_when_why(http, collection, now, work):
    time = audit.rfc3339(now - dt.timedelta(hours=2))
    assert http.post("/", headers=scheduler_headers("nightly", time)).text.startswith("processed:")
    asked = now + dt.timedelta(hours=1)
    with time_machine.travel(asked):
        first = http.post("/", headers=rerun_headers(time, "r1"))
    assert first.status_code == 200 and first.text.startswith("processed:"), first.text
    assert len(work.calls) == 2 and work.calls[1].rerun_id == "r1" and work.calls[0].rerun_id is None
    (record,) = records(collection).values()
    assert record["status"] == "completed" and record["rerun_id"] == "r1"
    (entry,) = record["reruns"]
    assert entry.pop("at") - asked < dt.timedelta(seconds=30)  # when it was asked, by the moved clock
    assert entry.pop("previous")["status"] == "completed"  # the fields it replaced: a release writes them back
    assert entry == {"rerun_id": "r1", "by": "ana@example.com", "reason": "the export was wrong",
                     "previous_status": "completed"}  # fmt: skip
    # Retries of the same request (Cloud Tasks redelivers on a lost answer) and Scheduler's own: duplicates.
    assert http.post("/", headers=rerun_headers(time, "r1")).text.startswith("duplicate:")
    assert http.post("/", headers=scheduler_headers("nightly", time)).text.startswith("duplicate:")
    assert len(work.calls) == 2
    # A second request on purpose runs it once more.
    assert http.post("/", headers=rerun_headers(time, "r2", reason="again")).text.startswith("processed:")
    assert len(work.calls) == 3 and [e["rerun_id"] for e in records(collection)[record_id(time)]["reruns"]] == [
        "r1",
        "r2",
    ]


def record_id(time, job="nightly"):
    config = configuration.current()
    return RunKey(config.project, config.location, job, at(time)).run_id


def test_a_rerun_waits_for_a_live_attempt_and_ignores_max_lateness(monkeypatch, http, collection, now, work):
    jobs = {
        "nightly": {"job_id": "nightly", "schedule": "0 3 * * *", "time_zone": "Etc/UTC", "max_lateness_seconds": 60}
    }
    configured(monkeypatch, lambda loaded: loaded.with_jobs(jobs))
    monkeypatch.setattr(dedup, "utcnow", lambda: now)  # the claim's lease is live on this test's clock
    time = audit.rfc3339(now - dt.timedelta(hours=5))
    ledger = RunLedger(configuration.current())
    claim = ledger.claim(RunKey(ledger.config.project, ledger.config.location, "nightly", at(time)), now)
    busy = http.post("/", headers=rerun_headers(time, "r1"))
    assert busy.status_code == 409 and busy.text.startswith("in_progress:") and work.calls == []
    ledger.complete(claim, now)
    late = http.post("/", headers=rerun_headers(time, "r1"))  # 5 h late, limit 60 s: a person asked for it
    assert late.text.startswith("processed:") and len(work.calls) == 1
    # A backfill of a run that has no record (a first claim, not a takeover) is late on purpose too.
    backfill = http.post("/", headers=rerun_headers(audit.rfc3339(now - dt.timedelta(hours=6)), "r2"))
    assert backfill.text.startswith("processed:") and len(work.calls) == 2


def test_every_rerun_id_runs_at_most_once_for_ever(http, collection, now, work):
    """Re-run A, then B, then a late retry or Cloud Tasks duplicate of A: the record keeps every id, not the last."""
    time = audit.rfc3339(now - dt.timedelta(hours=2))
    assert http.post("/", headers=scheduler_headers("nightly", time)).text.startswith("processed:")
    assert http.post("/", headers=rerun_headers(time, "a")).text.startswith("processed:")
    assert http.post("/", headers=rerun_headers(time, "b")).text.startswith("processed:")
    late = http.post("/", headers=rerun_headers(time, "a"))
    assert late.status_code == 200 and late.text.startswith("duplicate:"), late.text
    assert [call.rerun_id for call in work.calls] == [None, "a", "b"]
    record = records(collection)[record_id(time)]
    assert record["rerun_id"] == "b" and [e["rerun_id"] for e in record["reruns"]] == ["a", "b"]
    # A re-run that fails terminally keeps its id too: only a retryable failure releases one (the next test).
    work.errors[3] = TerminalJobError("bad input")
    assert http.post("/", headers=rerun_headers(time, "c")).text.startswith("terminal_failure:")
    assert http.post("/", headers=rerun_headers(time, "c")).text.startswith("duplicate:") and len(work.calls) == 4


def test_a_record_keeps_at_most_max_reruns_and_refuses_one_more_in_one_line(http, collection, now, work):
    time = audit.rfc3339(now - dt.timedelta(hours=2))
    assert http.post("/", headers=scheduler_headers("nightly", time)).text.startswith("processed:")
    kept = [{"rerun_id": f"r{i}", "by": "ana", "reason": "again", "at": now} for i in range(dedup.MAX_RERUNS - 1)]
    collection.document(record_id(time)).update({"reruns": kept})
    assert dedup.MAX_RERUNS == 100
    assert http.post("/", headers=rerun_headers(time, "last")).text.startswith("processed:")  # the 100th
    refused = http.post("/", headers=rerun_headers(time, "one-more"))
    assert refused.status_code == 400 and refused.text.count("\n") == 1, refused.text
    assert refused.text.startswith("invalid_delivery: X-Rerun-Id='one-more': ") and "MAX_RERUNS=100" in refused.text
    assert http.post("/", headers=rerun_headers(time, "r7")).text.startswith("duplicate:")  # a kept id: a replay
    assert len(work.calls) == 2 and len(records(collection)[record_id(time)]["reruns"]) == 100


def test_a_rerun_failing_retryably_leaves_the_record_as_before_and_only_its_retry_runs_it(
    monkeypatch, http, collection, now, work, capsys
):
    """Its release restores the record (guarded): still completed, who/why kept, not missing, not backfilled."""
    hourly(monkeypatch)
    moment = now.replace(minute=0) - dt.timedelta(hours=3)
    time = audit.rfc3339(moment)

    def deliver(**rerun):
        extra = {f"X-Rerun-{name}": value for name, value in rerun.items()}
        return http.post("/", headers=scheduler_headers("hourly", time, **extra))

    assert deliver().text.startswith("processed:")
    before = records(collection)[record_id(time, "hourly")]
    work.errors[1] = RuntimeError("downstream timed out")
    failed = deliver(Id="a", By="ana@example.com", Reason="the export was wrong")
    assert failed.status_code == 500 and failed.text.startswith("retryable_failure:"), failed.text
    after = records(collection)[record_id(time, "hourly")]
    (entry,) = after.pop("reruns")
    assert after == before  # status, attempt, finished_at: as before the re-run
    assert (entry["rerun_id"], entry["by"], entry["reason"]) == ("a", "ana@example.com", "the export was wrong")
    assert entry["previous_status"] == "completed" and "released_at" in entry
    window = ["--since", time, "--until", audit.rfc3339(moment + dt.timedelta(hours=1)), "--job", "hourly"]
    assert runs.main(["missed", *window, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []  # not missing: backfill has nothing to deliver
    assert deliver().text.startswith("duplicate:")  # Scheduler's late retry
    # The re-run's own retry (Cloud Tasks retries a 500) runs it, once.
    assert deliver(Id="a", By="ana@example.com", Reason="the export was wrong").text.startswith("processed:")
    assert deliver(Id="a", By="ana@example.com", Reason="the export was wrong").text.startswith("duplicate:")
    assert [call.rerun_id for call in work.calls] == [None, "a", "a"]
    final = records(collection)[record_id(time, "hourly")]
    assert final["status"] == "completed" and [e["rerun_id"] for e in final["reruns"]] == ["a"]
    assert "released_at" not in final["reruns"][0]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"X-Rerun-Id": "r 1", "X-Rerun-By": "a", "X-Rerun-Reason": "b"}, "X-Rerun-Id='r 1': must be 1-100 letters"),
        ({"X-Rerun-Id": "r1", "X-Rerun-Reason": "b"}, "missing X-Rerun-By header"),
        ({"X-Rerun-Id": "r1", "X-Rerun-By": "a"}, "missing X-Rerun-Reason header"),
        ({"X-Rerun-Id": "r1", "X-Rerun-By": "a", "X-Rerun-Reason": "x\ty"}, "X-Rerun-Reason='x\\ty': must say why"),
    ],
)
def test_a_bad_rerun_request_is_refused_in_one_line_and_changes_nothing(http, collection, now, work, extra, message):
    answer = http.post("/", headers=scheduler_headers("nightly", audit.rfc3339(now), **extra))
    assert answer.status_code == 400 and answer.text.startswith("invalid_delivery:") and message in answer.text
    assert records(collection) == {} and work.calls == []


# ---------------------------------------------------------------- a Force run's retry, the clock margin

DAY = (dt.datetime.now(UTC) + dt.timedelta(days=2)).date().isoformat()  # ahead of the real clock: gRPC deadlines


def deliver_at(http, clock, time=f"{DAY}T03:00:00Z", **extra):
    """One delivery of `nightly` (03:00 UTC) dated `time`, received when the function's clock reads `clock`."""
    with time_machine.travel(at(clock), tick=False):
        return http.post("/", headers=scheduler_headers("nightly", time, **extra))


def nightly(monkeypatch):
    job = {"job_id": "nightly", "schedule": "0 3 * * *", "time_zone": "Etc/UTC"}
    configured(monkeypatch, lambda loaded: loaded.with_jobs({"nightly": job}))


@pytest.mark.parametrize("retry_first", [False, True], ids=["scheduled-then-retry", "retry-then-scheduled"])
def test_a_force_run_retried_after_its_time_still_runs_beside_the_scheduled_run(
    monkeypatch, http, collection, work, retry_first
):
    """Its first attempt fails; Scheduler's retry of it is dated its schedule time, now past, like the scheduled
    run: whichever of the two comes second takes the Force run over (its record in_progress, its lease ended)."""
    nightly(monkeypatch)
    work.errors[0] = RuntimeError("downstream timed out")
    forced = deliver_at(http, f"{DAY}T02:50:00Z")
    assert forced.status_code == 500 and forced.text.startswith("retryable_failure:"), forced.text
    (held,) = records(collection).values()
    assert (held["trigger"], held["status"]) == ("manual", "in_progress")
    assert held["lease_expires"] <= at(f"{DAY}T02:50:00Z")  # ended: its retry takes it over
    clocks = [f"{DAY}T03:00:01Z", f"{DAY}T03:00:40Z"]  # the scheduled delivery, the Force run's retry (backoff)
    answers = [deliver_at(http, clock) for clock in (reversed(clocks) if retry_first else clocks)]
    assert [answer.text.split(":")[0] for answer in answers] == ["processed", "processed"]
    assert sorted(call.trigger for call in work.calls[1:]) == ["manual", "scheduled"]  # two executions
    assert sorted((r["trigger"], r["status"]) for r in records(collection).values()) == [
        ("manual", "completed"), ("scheduled", "completed")]  # fmt: skip
    assert deliver_at(http, f"{DAY}T03:02:00Z").text.startswith("duplicate:")  # a later retry: once each


def test_the_clock_margin_keys_a_delivery_at_most_60_s_ahead_as_the_scheduled_run(monkeypatch, http, collection, work):
    """A delivery dated up to CLOCK_MARGIN ahead of the function's clock (the two clocks differ) is the scheduled
    run: its retry is a duplicate. One second more is a Force run, keyed apart."""
    nightly(monkeypatch)
    assert schedules.CLOCK_MARGIN.total_seconds() == 60
    at_margin = deliver_at(http, f"{DAY}T02:59:00Z")  # exactly the margin ahead
    assert at_margin.text.startswith("processed:") and work.calls[-1].trigger == "scheduled"
    assert deliver_at(http, f"{DAY}T03:00:05Z").text.startswith("duplicate:")  # its retry
    assert len(work.calls) == 1
    beyond = deliver_at(http, f"{DAY}T02:58:59Z")  # 61 s ahead
    assert beyond.text.startswith("processed:") and work.calls[-1].trigger == "manual"


# ---------------------------------------------------------------- through the queue, end to end


@pytest.fixture
def queue_to(fleet, monkeypatch):
    """A stand-in of the deliveries queue routing to a real server of this test's collection."""
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, tasks_queue=QUEUE))
    server = fleet.start()
    server.wait_ready()
    standin = TasksStandin(QUEUE, f"http://127.0.0.1:{server.port}/")
    monkeypatch.setenv(task_queue.EMULATOR_ENV, standin.host)
    yield standin
    standin.close()


def first_job_id() -> str:
    """A job of this bake not paused, by its id (the tools resolve it to its Scheduler job name)."""
    return sorted(spec.job_id for spec in configuration.current().jobs.values() if not spec.paused)[0]


def test_rerun_from_a_laptop_goes_through_the_queue_and_runs_once(monkeypatch, fleet, queue_to, now, capsys):
    time = audit.rfc3339(now - dt.timedelta(minutes=10))  # within any job's max_lateness_seconds
    server = fleet.servers[0]
    job_id = first_job_id()
    job = runs.resolve_job(configuration.current(), job_id)  # as Scheduler sends it
    assert server.deliver(scheduler_headers(job, time)).text.startswith("processed:")
    args = ["rerun", job_id, time, "--reason", "bad input fixed", "--by", "ana@example.com", "--rerun-id", "fix-1"]
    args.append("--queue")  # from a laptop: through the deliveries queue (without it: the local dev server)
    assert runs.main(args) == 0
    assert runs.main(args) == 0  # the same request twice (a retried command): Cloud Tasks refuses the name
    queue_to.wait_idle()
    captured = capsys.readouterr()
    assert "queued before (same task id)" in captured.out
    run_id = record_id(time, job)
    assert fleet.executions() == [run_id, run_id]  # the scheduled run and one re-run
    (attempt,) = queue_to.attempts
    assert attempt.status == 200 and attempt.headers["X-Rerun-By"] == "ana@example.com"
    # X-Rerun-By is what the caller wrote; who really queued the task is in Cloud Tasks' audit log, found by its name.
    query = who_queued_query(captured.err)
    assert f'"{attempt.task}"' in query.split()
    assert attempt.headers["Authorization"].startswith("Bearer ")  # the queue's OIDC token, not the laptop's
    reruns = records_of(fleet)[run_id]["reruns"]
    assert [(e["rerun_id"], e["by"], e["reason"]) for e in reruns] == [("fix-1", "ana@example.com", "bad input fixed")]


def who_queued_query(err: str) -> str:
    """The Logging query of the command runs.py prints for who queued its tasks (checked: the log and the method
    that record the enqueuer, and the field that names them)."""
    lines = [line for line in err.splitlines() if line.startswith("who queued it, on record")]
    assert lines, err
    command = shlex.split(lines[-1].partition("audit log): ")[2])
    assert command[:3] == ["gcloud", "logging", "read"] and "--freshness=30d" in command
    assert "--format=value(timestamp,protoPayload.authenticationInfo.principalEmail)" in command
    project = QUEUE.split("/")[1]
    query = command[3]
    assert query.startswith(
        f'logName="projects/{project}/logs/cloudaudit.googleapis.com%2Fdata_access" '
        'protoPayload.methodName="google.cloud.tasks.v2.CloudTasks.CreateTask" '
    ), query
    return query


def records_of(fleet):
    config = configuration.current()
    return records(firestore_client(config.project, config.database).collection(fleet.collection))


def test_backfill_through_the_queue_delivers_each_missing_run_once(monkeypatch, fleet, queue_to, now, capsys):
    configured(
        monkeypatch, lambda loaded: loaded.with_jobs({"ten": {"schedule": "*/10 * * * *", "time_zone": "Etc/UTC"}})
    )
    since = audit.rfc3339(now.replace(minute=0) - dt.timedelta(hours=3))
    until = audit.rfc3339(at(since) + dt.timedelta(minutes=30))
    assert runs.main(["backfill", "--since", since, "--until", until, "--queue"]) == 0
    assert runs.main(["backfill", "--since", since, "--until", until, "--queue"]) == 0  # asked twice
    queue_to.wait_idle()
    config = configuration.current()
    run_ids = [RunKey(config.project, config.location, "ten", at(since) + dt.timedelta(minutes=m)).run_id
               for m in (0, 10, 20)]  # fmt: skip
    assert sorted(fleet.executions()) == sorted(run_ids)
    # One task per run: the second backfill found each run done, or its task queued already (same name).
    assert sorted(a.task for a in queue_to.attempts) == sorted(f"{run_id}-backfill" for run_id in run_ids)
    assert all(a.status == 200 for a in queue_to.attempts)
    # Who queued them: the queue's CreateTask entries since the backfill began.
    query = who_queued_query(capsys.readouterr().err)
    assert f'"{QUEUE.rsplit("/", 1)[1]}"' in query.split()
    (since_clause,) = [clause for clause in query.split() if clause.startswith("timestamp>=")]
    assert at(since_clause.removeprefix("timestamp>=").strip('"')) <= dt.datetime.now(UTC)
    assert runs.main(["missed", "--since", since, "--until", until, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_a_bad_queue_or_rerun_argument_is_one_line(monkeypatch, collection, capsys):
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, tasks_queue=QUEUE))
    job_id = first_job_id()
    assert runs.main(["rerun", job_id, "2026-01-01T03:00:00Z", "--reason", "x", "--by", "a", "--queue", "q"]) == 2
    assert capsys.readouterr().err.startswith("--queue='q': must be projects/PROJECT/locations/REGION/queues/QUEUE")
    assert runs.main(["rerun", job_id, "yesterday", "--reason", "x", "--by", "a"]) == 2
    assert capsys.readouterr().err.startswith("TIME='yesterday':")
    assert runs.main(["rerun", job_id, "2026-01-01T03:00:00Z", "--reason", "", "--by", "a"]) == 2
    assert capsys.readouterr().err.startswith("--reason='':")


# ---------------------------------------------------------------- catch-up


def test_the_audit_catches_up_a_missing_run_within_max_lateness_only(monkeypatch, http, fleet, queue_to, caplog):
    caplog.set_level(logging.INFO)
    limit = 4 * 3600
    config = hourly(monkeypatch, catch_up=True, max_lateness_seconds=limit)

    # The audit's clock just ahead of the real one (gRPC deadlines are judged by the emulator's real clock) and
    # within settle of it, so no settled fire time is in the server's future (that would be a Force run, keyed
    # apart); and at least 2 min from every boundary (the limit and the lookback fall on the hour, the settle
    # time anywhere), so the audit's ticking clock and this test judge each fire time alike.
    def clear(moment: dt.datetime) -> bool:
        return all(min(m.minute * 60 + m.second, 3600 - m.minute * 60 - m.second) >= 120
                   for m in (moment, moment - config.settle))  # fmt: skip

    now = (dt.datetime.now(UTC) + dt.timedelta(minutes=1)).replace(second=0, microsecond=0)
    while not clear(now):
        now += dt.timedelta(minutes=1)
    hour = now.replace(minute=0)
    ledger = RunLedger(config)
    long_ago = now - dt.timedelta(days=2)
    ledger.write_audit_cursor(AuditCursor({"hourly": {"since": long_ago, "judged_until": long_ago}}))
    audit_at(http, config, now, caplog)
    queue_to.wait_idle()
    fire_times = [hour - dt.timedelta(hours=h) for h in range(25)]
    settled = [t for t in fire_times if now - audit.lookback(config) <= t <= now - config.settle]
    within = [t for t in settled if (now - t).total_seconds() <= limit]
    assert within and len(within) < len(settled)
    expected = sorted(RunKey(config.project, config.location, "hourly", t).run_id for t in within)
    assert sorted(fleet.executions()) == expected  # caught up: each once; older ones left to a person
    queued = [r.json_fields for r in caplog.records if r.json_fields.get("catch_up") == "queued"]
    assert sorted(f["run_id"] for f in queued) == expected
    # The next audit sees them completed and queues none of them again (a run that settled since may be queued).
    caplog.clear()
    audit_at(http, config, now + dt.timedelta(minutes=5), caplog)
    assert not [r for r in caplog.records if "catch_up" in r.json_fields and r.json_fields.get("run_id") in expected]


def test_a_catch_up_the_queue_refuses_is_one_line_and_the_audit_still_completes(monkeypatch, http, collection, caplog):
    caplog.set_level(logging.INFO)
    now = dt.datetime.now(UTC).replace(microsecond=0)
    config = hourly(monkeypatch, catch_up=True)
    long_ago = now - dt.timedelta(days=2)
    RunLedger(config).write_audit_cursor(AuditCursor({"hourly": {"since": long_ago, "judged_until": long_ago}}))
    monkeypatch.setenv(task_queue.EMULATOR_ENV, f"127.0.0.1:{free_port()}")  # nothing listens there
    missing = audit_at(http, config, now, caplog)  # the audit's own run is processed all the same
    assert len(missing) > 1
    (failed,) = [r for r in caplog.records if r.json_fields.get("catch_up")]  # one line, then it stops
    assert failed.levelname == "ERROR" and failed.json_fields["catch_up"] == "failed" and "not queued" in failed.message
