"""Every branch of the protocol, through the HTTP entry point, against Google's Firestore emulator."""

import dataclasses
import datetime as dt
import hashlib
import logging
import re
import threading
import time

import pytest
from conftest import PROJECT, configured, records, scheduler_headers
from google.api_core import exceptions as api_exceptions
from google.api_core import gapic_v1
from google.cloud import firestore
from google.cloud.firestore_v1.services.firestore.client import FirestoreClient

import config
import dedup
from ledger import RunLedger, RunRecord
from outcomes import Outcome
from run_context import TerminalJobError, UnknownJob

BAKED_LOCATION = config.load().location


def iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def run_id_of(job: str, moment: dt.datetime, project: str = PROJECT, location: str = BAKED_LOCATION) -> str:
    material = f"{project}\n{location}\n{job}\n{moment.astimezone(dt.UTC).isoformat()}"
    return hashlib.sha256(material.encode()).hexdigest()


def test_fresh_run_is_processed_and_recorded(http, collection, work, now):
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 200
    assert response.text.startswith("processed")
    assert len(work.calls) == 1
    context = work.calls[0]
    assert context.run_id == run_id_of("nightly", now)
    assert (context.job_name, context.schedule_time, context.attempt) == ("nightly", now, 1)
    record = records(collection)[context.run_id]
    assert record["status"] == "completed"
    assert record["attempt_id"] == context.attempt_id
    assert record["job_name"] == "nightly" and record["schedule_time"] == now
    assert record["lease_expires"] > record["claimed_at"]
    assert record["expire_at"] >= now + config.load().retention
    assert record["finished_at"] >= record["claimed_at"]
    assert set(record) <= set(RunRecord.__annotations__)  # the record's schema names every field it holds


def test_replay_of_a_completed_run_skips_the_work(http, work, now):
    first = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert first.status_code == replay.status_code == 200
    assert replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def counting(monkeypatch, names=("commit", "batch_get_documents")) -> list[str]:
    """The Firestore RPCs the handler's client sends from now on, by the client method's name, in order."""
    calls = []

    def counted(name):
        real = getattr(FirestoreClient, name)

        def call(client, *args, **kwargs):
            calls.append(name)
            return real(client, *args, **kwargs)

        return call

    for name in names:
        monkeypatch.setattr(FirestoreClient, name, counted(name))
    return calls


def test_a_replay_on_the_instance_that_saw_the_run_done_is_one_read(http, work, now, monkeypatch):
    """A run this instance saw done is read first (ledger.DONE_HERE_LIMIT): its replay is one read, no failed
    create. Another instance, which remembers nothing, tries the create first, as before; either way it is a
    duplicate, decided from the record."""
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    calls = counting(monkeypatch)

    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert replay.text.startswith("duplicate") and calls == ["batch_get_documents"]

    calls.clear()
    monkeypatch.setattr("ledger._done_here", {})  # another instance
    elsewhere = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert elsewhere.text.startswith("duplicate") and calls == ["commit", "batch_get_documents"]
    assert len(work.calls) == 1


def test_a_replay_does_not_walk_the_cron_again(http, work, now, monkeypatch):
    """The fire time a delivery's schedule time is a reading of is computed once per instance (schedules.fire_time_of
    keeps it): a replay walks no cron."""
    import schedules

    job = next(iter(config.current().jobs))  # a configured job: its deliveries are checked against its cron
    http.post("/", headers=scheduler_headers(job, iso(now)))
    walks = []
    real = schedules.fire_times
    monkeypatch.setattr(schedules, "fire_times", lambda *args: walks.append(args) or real(*args))

    replay = http.post("/", headers=scheduler_headers(job, iso(now)))
    http.post("/", headers=scheduler_headers(job, iso(now - dt.timedelta(minutes=7, seconds=13))))

    assert replay.text.startswith("duplicate")
    assert len(walks) == 1  # the other time's, not the replay's


def test_a_run_done_here_whose_record_is_gone_is_claimed_anew(http, collection, work, now):
    """Read first, a run whose record is gone since (its TTL, a person deleted it) is claimed by the create, as on
    any instance: the memory orders the calls, the record decides."""
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    collection.document(run_id_of("nightly", now)).delete()

    again = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert again.status_code == 200 and again.text.startswith("processed")
    assert len(work.calls) == 2
    assert records(collection)[run_id_of("nightly", now)]["status"] == "completed"


def test_the_runs_remembered_done_are_bounded(monkeypatch):
    import ledger

    monkeypatch.setattr(ledger, "_done_here", {})
    for index in range(ledger.DONE_HERE_LIMIT + 1):
        ledger.remember_done(f"db/runs/{index}")
    ledger.remember_done("db/runs/1")  # seen again: the newest

    assert len(ledger._done_here) == ledger.DONE_HERE_LIMIT
    assert "db/runs/0" not in ledger._done_here  # the oldest went
    assert list(ledger._done_here)[-1] == "db/runs/1"
    assert ledger.forget_done("db/runs/1") and not ledger.forget_done("db/runs/1")


def test_header_names_are_case_insensitive(http, work, now):
    lower = {"x-cloudscheduler-jobname": "nightly", "x-cloudscheduler-scheduletime": iso(now)}
    assert http.post("/", headers=lower).status_code == 200
    replay = http.post("/", headers={"X-Cloudscheduler-Jobname": "nightly", "X-Cloudscheduler-Scheduletime": iso(now)})
    assert replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def test_equal_instants_in_other_offsets_are_one_run(http, work, now):
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    shifted = now.astimezone(dt.timezone(dt.timedelta(hours=-7))).isoformat()
    assert http.post("/", headers=scheduler_headers("nightly", shifted)).text.startswith("duplicate")
    assert len(work.calls) == 1


def test_concurrent_duplicates_run_the_work_exactly_once(app, collection, work, now):
    gate = work.hold(0)
    barrier = threading.Barrier(4)
    statuses = []

    def deliver():
        client = app.test_client()
        barrier.wait()
        statuses.append(client.post("/", headers=scheduler_headers("nightly", iso(now))).status_code)

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(statuses) < 3 and time.monotonic() < deadline:  # the others are answered while one works
        time.sleep(0.05)
    gate.set()
    for thread in threads:
        thread.join(timeout=60)

    assert len(work.calls) == 1
    assert sorted(statuses) == [200, 409, 409, 409]
    assert list(records(collection).values())[0]["status"] == "completed"


def test_delivery_during_a_live_lease_gets_409(app, http, work, now):
    gate = work.hold(0)
    first = threading.Thread(target=lambda: app.test_client().post("/", headers=scheduler_headers("nightly", iso(now))))
    first.start()
    work.wait_for_calls(1)

    second = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    gate.set()
    first.join(timeout=30)
    assert second.status_code == 409
    assert second.text.startswith("in_progress")
    assert len(work.calls) == 1


def in_background(app, headers):
    """Delivers in a thread; returns the thread and a list that receives the response."""
    answers = []
    thread = threading.Thread(target=lambda: answers.append(app.test_client().post("/", headers=headers)))
    thread.start()
    return thread, answers


def test_expired_lease_is_taken_over_and_the_zombie_cannot_overwrite(app, http, collection, work, now, monkeypatch):
    configured(monkeypatch, lambda loaded: loaded.everywhere(lease=dt.timedelta(seconds=1)))
    zombie_gate = work.hold(0)
    zombie, zombie_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(1)
    time.sleep(1.2)  # the zombie's lease runs out while it still works

    successor = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    zombie_gate.set()  # the zombie finishes late, after its successor completed the run
    zombie.join(timeout=30)

    assert successor.status_code == 200 and successor.text.startswith("processed")
    assert zombie_answer[0].status_code == 409 and zombie_answer[0].text.startswith("superseded")
    assert len(work.calls) == 2
    assert work.calls[1].attempt == 2
    record = records(collection)[work.calls[0].run_id]
    assert record["status"] == "completed"
    assert record["attempt_id"] == work.calls[1].attempt_id
    assert record["attempts"] == 2


def test_zombie_failure_cannot_delete_the_successors_record(app, collection, work, now, monkeypatch):
    configured(monkeypatch, lambda loaded: loaded.everywhere(lease=dt.timedelta(seconds=1)))
    zombie_gate, successor_gate = work.hold(0), work.hold(1)
    work.errors[0] = RuntimeError("the zombie fails late")
    zombie, zombie_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(1)
    time.sleep(1.2)
    configured(monkeypatch, lambda loaded: loaded.everywhere(lease=dt.timedelta(seconds=60)))
    successor, successor_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(2)  # the successor owns the run and is inside the work

    zombie_gate.set()
    zombie.join(timeout=30)
    in_flight = records(collection)[work.calls[0].run_id]
    successor_gate.set()
    successor.join(timeout=30)

    assert zombie_answer[0].status_code == 409 and zombie_answer[0].text.startswith("superseded")
    assert in_flight["status"] == "in_progress" and in_flight["attempt_id"] == work.calls[1].attempt_id
    assert successor_answer[0].text.startswith("processed")
    assert records(collection)[work.calls[0].run_id]["status"] == "completed"


class HeldRead:
    """Holds the first delivery that reads a run record (RunLedger._get_all, the claim's read after a
    failed create) at two gates: before its read goes out and after the answer is in. Other threads'
    reads pass. The test opens `send` and `resume`; it waits on `reached` and `answered`."""

    def __init__(self, monkeypatch):
        self.thread = None
        self.lock = threading.Lock()
        self.reached, self.send, self.answered, self.resume = (threading.Event() for _ in range(4))
        real_get = RunLedger._get_all

        def get(ref, *args, **kwargs):
            with self.lock:
                self.thread = self.thread or threading.current_thread()
                held = self.thread is threading.current_thread()
            if not held:
                return real_get(ref, *args, **kwargs)
            self.reached.set()
            assert self.send.wait(timeout=30), "test never let the read go out"
            snapshot = real_get(ref, *args, **kwargs)
            self.answered.set()
            assert self.resume.wait(timeout=30), "test never let the delivery go on"
            return snapshot

        monkeypatch.setattr(RunLedger, "_get_all", get)


def crashed_claim(attempt_id="crashed"):
    """The record of an attempt that claimed the run and died: in progress, its lease just expired."""
    now = dedup.utcnow()
    return {
        "status": "in_progress",
        "attempt_id": attempt_id,
        "lease_expires": now - dt.timedelta(seconds=1),
        "expire_at": now + dt.timedelta(days=1),
        "attempts": 1,
    }


def test_two_deliveries_racing_for_one_expired_lease_take_it_over_once(app, http, collection, work, now, monkeypatch):
    """Both read the expired claim; the one that reads first is held until the other has taken the run
    over and completed it. Its takeover, guarded by the update time it read, must then fail: 409."""
    collection.document(run_id_of("nightly", now)).set(crashed_claim())
    held = HeldRead(monkeypatch)
    held.send.set()
    slow, slow_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    assert held.answered.wait(timeout=30)  # the slow delivery has read the expired claim

    fast = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    held.resume.set()
    slow.join(timeout=30)

    assert fast.status_code == 200 and fast.text.startswith("processed")
    assert slow_answer[0].status_code == 409 and slow_answer[0].text.startswith("in_progress")
    assert len(work.calls) == 1
    record = records(collection)[run_id_of("nightly", now)]
    assert (record["status"], record["attempt_id"], record["attempts"]) == ("completed", work.calls[0].attempt_id, 2)


def test_a_release_and_a_new_claim_between_a_failed_create_and_its_read_leave_the_new_claim_alone(
    app, collection, work, now, monkeypatch
):
    """Delivery B's create fails on A's claim; before B reads, A's work fails (the claim is released) and,
    before B can act on finding nothing, delivery C claims the run. B must answer 409 and leave C's claim."""
    headers = scheduler_headers("nightly", iso(now))
    first_gate, third_gate = work.hold(0), work.hold(1)
    work.errors[0] = RuntimeError("A fails after B's create")
    a, a_answer = in_background(app, headers)
    work.wait_for_calls(1)
    held = HeldRead(monkeypatch)
    b, b_answer = in_background(app, headers)
    assert held.reached.wait(timeout=30)  # B's create met A's claim; its read waits

    first_gate.set()
    a.join(timeout=30)
    held.send.set()
    assert held.answered.wait(timeout=30)  # B read the run after A's release: gone
    c, c_answer = in_background(app, headers)
    work.wait_for_calls(2)  # C claimed the run and works
    held.resume.set()
    b.join(timeout=30)
    in_flight = records(collection)[run_id_of("nightly", now)]
    third_gate.set()
    c.join(timeout=30)

    assert a_answer[0].status_code == 500 and a_answer[0].text.startswith("retryable_failure")
    assert b_answer[0].status_code == 409 and b_answer[0].text.startswith("in_progress")
    assert (in_flight["status"], in_flight["attempt_id"]) == ("in_progress", work.calls[1].attempt_id)
    assert c_answer[0].status_code == 200 and c_answer[0].text.startswith("processed")
    assert len(work.calls) == 2
    assert records(collection)[run_id_of("nightly", now)]["attempt_id"] == work.calls[1].attempt_id


def test_a_forced_run_more_than_the_retention_ahead_is_a_manual_run_whose_record_outlives_its_time(
    http, collection, work, monkeypatch
):
    """A "Force run" sends the next scheduled time (a month ahead for a monthly job): a manual run of its own,
    whose record must live until that time + the retention, or a Force run retried then would run again.
    The real delivery at that time is the scheduled run, and runs (tests/test_accept.py)."""
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, retention=dt.timedelta(hours=1)))
    scheduled = (dedup.utcnow() + dt.timedelta(hours=2)).replace(microsecond=0)

    forced = http.post("/", headers=scheduler_headers("monthly", iso(scheduled)))
    monkeypatch.setattr(dedup, "utcnow", lambda: scheduled + dt.timedelta(seconds=30))  # the run's own time
    real = http.post("/", headers=scheduler_headers("monthly", iso(scheduled)))

    assert forced.status_code == 200 and forced.text.startswith("processed")
    assert real.status_code == 200 and real.text.startswith("processed")
    assert [call.trigger for call in work.calls] == ["manual", "scheduled"]
    manual = next(record for record in records(collection).values() if record["trigger"] == "manual")
    assert manual["expire_at"] >= scheduled + dt.timedelta(seconds=3600)


def test_retryable_failure_releases_the_run_for_an_immediate_retry(http, collection, work, now):
    work.errors[0] = RuntimeError("downstream timed out")
    failed = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert failed.status_code == 500
    assert failed.text.startswith("retryable_failure")
    assert records(collection) == {}

    retried = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert retried.status_code == 200 and retried.text.startswith("processed")
    assert len(work.calls) == 2


def test_terminal_failure_is_recorded_and_never_retried(http, collection, work, now):
    work.errors[0] = TerminalJobError("input file is missing")
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 200
    assert response.text.startswith("terminal_failure")
    (record,) = records(collection).values()
    assert record["status"] == "failed"
    assert record["last_error"] == "input file is missing"
    assert set(record) <= set(RunRecord.__annotations__)
    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert replay.status_code == 200 and replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def test_record_past_expire_at_counts_as_absent(app, collection, work, now):
    run_id = run_id_of("nightly", now)
    past = now - dt.timedelta(seconds=1)
    old = {"status": "failed", "attempt_id": "old", "lease_expires": past, "expire_at": past, "attempts": 1}
    collection.document(run_id).set(old | {"finished_at": past, "last_error": "old error", "result": "old result"})
    gate = work.hold(0)

    delivery, answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(1)
    in_flight = records(collection)[run_id]
    gate.set()
    delivery.join(timeout=30)

    assert answer[0].status_code == 200 and answer[0].text.startswith("processed")
    assert len(work.calls) == 1
    # Nothing of the old run's outcome survives the takeover, not even while the new attempt works.
    assert in_flight["status"] == "in_progress" and in_flight["attempt_id"] == work.calls[0].attempt_id
    assert {"finished_at", "last_error", "result"}.isdisjoint(in_flight)
    record = records(collection)[run_id]
    assert record["attempt_id"] == work.calls[0].attempt_id and record["status"] == "completed"
    assert "last_error" not in record and "result" not in record


def test_project_and_location_disambiguate_runs(http, collection, work, now, monkeypatch):
    time_header = iso(now)
    served = [(PROJECT, BAKED_LOCATION), ("other-proj-1", BAKED_LOCATION), (PROJECT, "us-east1")]
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, serve=tuple(served)))

    def deliver(**extra):
        return http.post("/", headers=scheduler_headers("nightly", time_header, **extra))

    deliver()
    explicit_default = deliver(**{"X-Scheduler-Project": PROJECT, "X-Scheduler-Location": BAKED_LOCATION})
    other_project = deliver(**{"X-Scheduler-Project": "other-proj-1"})
    other_region = deliver(**{"X-Scheduler-Location": "us-east1"})

    assert explicit_default.text.startswith("duplicate")
    assert other_project.text.startswith("processed") and other_region.text.startswith("processed")
    assert len(work.calls) == 3
    assert {c.run_id for c in work.calls} == {
        run_id_of("nightly", now),
        run_id_of("nightly", now, project="other-proj-1"),
        run_id_of("nightly", now, location="us-east1"),
    }
    assert set(records(collection)) == {c.run_id for c in work.calls}


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X-CloudScheduler-ScheduleTime": "2026-01-01T00:00:00Z"}, "missing X-CloudScheduler-JobName"),
        ({"X-CloudScheduler-JobName": "nightly"}, "missing X-CloudScheduler-ScheduleTime"),
        (scheduler_headers("nightly", "2026-01-01 00:00"), "not an RFC 3339 timestamp"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00"), "not an RFC 3339 timestamp"),
        (scheduler_headers("nightly", "2026-02-30T00:00:00Z"), "not a valid date"),
        (scheduler_headers("nightly", "2016-12-31T23:59:60Z"), "leap second"),
        (scheduler_headers("../etc", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("a%2Fb", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00Z", **{"X-Scheduler-Project": "Bad_Project"}), "project id"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00Z", **{"X-Scheduler-Location": "moon"}), "GCP region"),
    ],
)
def test_bad_headers_get_400_and_nothing_is_written(http, collection, work, headers, reason):
    response = http.post("/", headers=headers)

    assert response.status_code == 400
    assert reason in response.text
    assert response.text.count("\n") == 1
    assert work.calls == []
    assert records(collection) == {}


def test_schedule_times_outside_the_accepted_window_are_refused(http, collection, work, now, monkeypatch):
    monkeypatch.setattr(dedup, "utcnow", lambda: now)  # the window's edges are judged on this test's clock
    too_old = now - config.load().retention - dt.timedelta(seconds=60)
    too_new = now + config.load().max_future + dt.timedelta(seconds=60)
    next_month = now + dt.timedelta(days=31)  # a forced run of a monthly job sends its next scheduled time

    assert "older than the retention window" in http.post("/", headers=scheduler_headers("n", iso(too_old))).text
    assert "in the future" in http.post("/", headers=scheduler_headers("n", iso(too_new))).text
    assert records(collection) == {} and work.calls == []
    assert http.post("/", headers=scheduler_headers("n", iso(next_month))).status_code == 200


def test_every_log_line_carries_the_run_and_its_outcome(http, work, now, log_lines):
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    work.errors[1] = TerminalJobError("bad input")  # the replay does not call the work
    later = now + dt.timedelta(minutes=1)
    http.post("/", headers=scheduler_headers("nightly", iso(later)))

    outcome_lines = [line for line in log_lines() if "outcome" in line]
    assert [(line["outcome"], line["severity"]) for line in outcome_lines] == [
        ("processed", "INFO"),
        ("duplicate", "INFO"),
        ("terminal_failure", "ERROR"),
    ]
    for line in outcome_lines:
        assert line["job"] == "nightly"
        assert len(line["run_id"]) == 64 and int(line["run_id"], 16) >= 0
        assert "attempt_id" in line or line["outcome"] == "duplicate"


def test_a_retryable_failure_logs_its_traceback_in_its_one_outcome_line(http, work, now, log_lines):
    work.errors[0] = RuntimeError("downstream timed out")

    http.post("/", headers=scheduler_headers("nightly", iso(now)))

    (line,) = [line for line in log_lines() if "outcome" in line]
    assert line["outcome"] == "retryable_failure"
    assert "Traceback (most recent call last)" in line["message"] and "downstream timed out" in line["message"]


def test_an_invalid_setting_answers_500_and_logs_it_without_touching_firestore(
    http, collection, work, now, monkeypatch, log_lines, tmp_path
):
    text = config.CONFIG_FILE.read_text(encoding="utf-8")
    text = re.sub(r"(?m)^  attempt_deadline_seconds: .*$", "  attempt_deadline_seconds: five minutes", text, count=1)
    (tmp_path / "config.yaml").write_text(text, encoding="utf-8")
    monkeypatch.setattr(config, "CONFIG_FILE", tmp_path / "config.yaml")
    monkeypatch.setattr(config, "USED", None)  # the file's, as deployed

    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 500
    rule = "must be a whole number"
    assert response.text == f"misconfigured: config.yaml: defaults.attempt_deadline_seconds='five minutes': {rule}\n"
    (line,) = [line for line in log_lines() if "outcome" in line]
    assert (line["outcome"], line["severity"]) == ("misconfigured", "ERROR")
    assert work.calls == [] and records(collection) == {}


def test_firestore_unreachable_answers_500_without_running_the_work(http, work, now, monkeypatch):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens on the discard port
    dead = firestore.Client(project=PROJECT)
    monkeypatch.setattr("ledger.firestore_client", lambda project, database: dead)
    started = time.monotonic()

    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 500 and response.text.startswith("store_unavailable")
    # A refused connection fails the claim's create at once, and a write is not retried. An absolute
    # bound, not one computed from RPC_TIMEOUT_SECONDS: a retried create takes the whole 5 s deadline.
    assert time.monotonic() - started < 2.0
    assert work.calls == []


def write_kind(write) -> str:
    """create | update | delete, from one Write of a Commit request."""
    pb = getattr(write, "_pb", write)
    if pb.WhichOneof("operation") == "delete":
        return "delete"
    precondition = pb.current_document
    if precondition.WhichOneof("condition_type") == "exists" and not precondition.exists:
        return "create"
    return "update"


def test_no_write_goes_out_with_a_retry_policy(http, collection, work, now, monkeypatch):
    """Every Firestore write is a Commit RPC; the client retries one unless `retry=None` (its default
    policy retries Commit on UNAVAILABLE for 60 s). A retried create would find its own claim and answer
    409 until the lease ends; a retried finish would report `superseded` for a run that completed."""
    collection.document(run_id_of("nightly", now - dt.timedelta(minutes=3))).set(crashed_claim())  # to take over
    commits = []  # (kinds of the writes, the retry the Commit went out with)
    real_commit = FirestoreClient.commit

    def commit(client, *args, **kwargs):
        request = kwargs.get("request") or args[0]
        writes = request["writes"] if isinstance(request, dict) else request.writes
        commits.append(({write_kind(write) for write in writes}, kwargs.get("retry", gapic_v1.method.DEFAULT)))
        return real_commit(client, *args, **kwargs)

    monkeypatch.setattr(FirestoreClient, "commit", commit)

    def deliver(moment):
        return http.post("/", headers=scheduler_headers("nightly", iso(moment)))

    deliver(now)  # create, complete
    deliver(now)  # a read: this instance completed it (no write)
    work.errors[1] = RuntimeError("retryable")
    deliver(now - dt.timedelta(minutes=1))  # create, release (delete)
    work.errors[2] = TerminalJobError("terminal")
    deliver(now - dt.timedelta(minutes=2))  # create, fail
    deliver(now - dt.timedelta(minutes=3))  # a failed create, the takeover's update, complete

    assert len(work.calls) == 4
    assert set().union(*(kinds for kinds, _ in commits)) == {"create", "update", "delete"}
    assert len(commits) == 9
    assert [retry for _, retry in commits] == [None] * len(commits)


def test_the_claims_read_is_retried_on_a_transient_error(http, work, now, monkeypatch):
    """The read after a failed create repeats nothing: it goes out with a retry for UNAVAILABLE
    (READ_RETRY), so a replay is not turned into a 500 by one dropped connection."""
    reads = []
    real_batch_get = FirestoreClient.batch_get_documents

    def batch_get_documents(client, *args, **kwargs):
        reads.append(kwargs.get("retry", gapic_v1.method.DEFAULT))
        return real_batch_get(client, *args, **kwargs)

    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    monkeypatch.setattr(FirestoreClient, "batch_get_documents", batch_get_documents)
    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert replay.text.startswith("duplicate")
    (retry,) = reads
    assert retry not in (None, gapic_v1.method.DEFAULT)
    assert retry._predicate(api_exceptions.ServiceUnavailable("connection reset"))
    assert retry.timeout <= 5.0  # within one delivery's bound: the read gives up, the delivery answers 500


def test_every_outcome_has_one_answer_and_only_finished_runs_stop_scheduler(handler_module):
    """Outcome knows no HTTP; main.ANSWERS gives each its status and severity. Scheduler stops on 2xx,
    so a 2xx must mean the run needs no further delivery: done, recorded finished, or recorded skipped."""
    assert set(handler_module.ANSWERS) == set(Outcome)
    stops = {outcome.value for outcome, (status, _) in handler_module.ANSWERS.items() if 200 <= status < 300}
    assert stops == {
        "processed", "duplicate", "terminal_failure",
        "skipped_late", "skipped_overlap", "skipped_dst_gap", "skipped_paused",
    }  # fmt: skip
    assert handler_module.ANSWERS[Outcome.IN_PROGRESS][0] == 409  # never 503: retries stay counted


def test_the_work_gets_the_job_id_as_the_answers_spell_it(http, work, now):
    """Scheduler sends "<slug>-<job id>"; the work sees the job id itself, chosen through config.yaml's jobs."""
    loaded = config.current()
    slug = loaded.audit_job.removesuffix("_audit")
    assert loaded.jobs, "the baked settings list the answers' jobs"
    for name, job in loaded.jobs.items():
        assert name == f"{slug}-{job.job_id}"
        assert http.post("/", headers=scheduler_headers(name, iso(now))).status_code == 200
        if job.paused:  # its deliveries skip the work (skipped_paused)
            continue
        context = work.calls[-1]
        assert (context.job_id, context.job_name) == (job.job_id, name)
    http.post("/", headers=scheduler_headers("not-a-configured-job", iso(now)))
    assert work.calls[-1].job_id is None


def test_a_job_without_work_is_misconfigured_released_and_retried(
    http, collection, now, handler_module, log_lines, monkeypatch
):
    """One line, 5xx so Scheduler retries, and no record: the run happens once a deploy gives the job its work."""

    def no_work(context):
        raise UnknownJob(f"job id {context.job_id!r}: not in job.WORK")

    monkeypatch.setattr(handler_module, "run", no_work)
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert response.status_code == 500
    assert response.text.startswith("misconfigured: no work for this job, run released for a retry: job id None")
    (line,) = [line for line in log_lines() if "outcome" in line]
    assert (line["outcome"], line["severity"], line["http_status"]) == ("misconfigured", "ERROR", 500)
    assert records(collection) == {}


def test_a_line_logged_after_a_delivery_no_longer_carries_its_runs_fields(http, work, now, log_lines):
    """main.RUN_FIELDS is reset when the delivery ends: a later line on the same thread names no finished run."""
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    logging.getLogger("after").warning("after the delivery")

    outcome, after = [line for line in log_lines() if "outcome" in line or line.get("message") == "after the delivery"]
    assert outcome["run_id"] == work.calls[0].run_id
    assert not {"run_id", "attempt_id", "job", "duration_ms"} & set(after), after
{%- if cookiecutter.target == "function" %}


def test_every_answered_job_has_its_work_and_an_unknown_one_is_refused(http, collection, now, log_lines):
    """job.WORK covers the baked jobs; a Scheduler job config.yaml lacks reaches the real job.run and is refused."""
    import job

    assert set(job.WORK) == {spec.job_id for spec in config.current().jobs.values()}
    response = http.post("/", headers=scheduler_headers("stale-job", iso(now)))
    assert response.status_code == 500
    assert "job id None (Scheduler job 'stale-job'): not in job.WORK" in response.text
    assert [line["outcome"] for line in log_lines() if "outcome" in line] == ["misconfigured"]
    assert records(collection) == {}
{%- endif %}
