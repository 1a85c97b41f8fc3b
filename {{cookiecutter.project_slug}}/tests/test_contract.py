"""The protocol's contract, through the HTTP entry point on Google's Firestore emulator: one delivery per
answer a Scheduler job can get (README: "What each answer means"); the protocol's proofs cover the rest."""

import datetime as dt
import threading

from conftest import records, scheduler_headers

from run_context import TerminalJobError


def deliver(http, when, job="nightly"):
    response = http.post("/", headers=scheduler_headers(job, when.isoformat().replace("+00:00", "Z")))
    return response.status_code, response.text.split(":")[0]


def test_a_run_is_processed_once_and_its_replay_is_a_duplicate(http, collection, work, now):
    assert deliver(http, now) == (200, "processed")
    assert deliver(http, now) == (200, "duplicate")
    assert len(work.calls) == 1
    (record,) = records(collection).values()
    assert (record["status"], record["attempt_id"]) == ("completed", work.calls[0].attempt_id)


def test_a_delivery_while_an_attempt_works_gets_409(app, http, work, now):
    gate = work.hold(0)
    first = threading.Thread(target=lambda: deliver(app.test_client(), now))
    first.start()
    work.wait_for_calls(1)
    assert deliver(http, now) == (409, "in_progress")
    gate.set()
    first.join(timeout=30)
    assert deliver(http, now) == (200, "duplicate") and len(work.calls) == 1


def test_a_failure_is_retried_and_a_terminal_one_is_recorded(http, collection, work, now):
    work.errors[0] = RuntimeError("downstream timed out")
    assert deliver(http, now) == (500, "retryable_failure") and records(collection) == {}
    assert deliver(http, now) == (200, "processed")
    later = now + dt.timedelta(minutes=1)
    work.errors[2] = TerminalJobError("input file is missing")
    assert deliver(http, later) == (200, "terminal_failure")
    assert deliver(http, later) == (200, "duplicate") and len(work.calls) == 3


def test_a_bad_delivery_gets_400_and_writes_nothing(http, collection, work):
    response = http.post("/", headers={"X-CloudScheduler-JobName": "nightly", "X-CloudScheduler-ScheduleTime": "soon"})
    assert response.status_code == 400 and response.text.startswith("invalid_delivery")
    assert records(collection) == {} and work.calls == []
