{%- if cookiecutter.target != "function" -%}
"""A proxy's handover (issue 25): one execution per scheduled run whatever fails between the start call and the
`started` record, and every execution followed to its end, through the bake's own fake of the
{{ "Run v2" if cookiecutter.target == "cloud_run_job" else "Workflows" }} API (tests/test_proxy.py) and the
Firestore emulator.

- The start call's answer is lost; the `started` write fails after the start (or the instance dies between): the
  next attempt finds the execution of the run id and records it, never starts a second (executions.Handover).
- An execution the API no longer has (deleted, pruned) records its run `failed`, with the alert's line; the job's
  next runs and the audit go on; one execution whose state cannot be read never stops the others being followed.
- A re-run of a run still `started` waits (409), never starts a second execution beside it; `overlap: skip` sees a
  run whose start is in flight.
"""

import datetime as dt
import json
import threading
import time

import grpc
import pytest
import test_proxy
from conftest import records, scheduler_headers
from fake_firestore import COMMIT
from test_proxy import CLOCK, SCHEDULED, TARGET, deliver, ended_lines, jobs, run_key, run_record

from keys import RunKey
from settings import DedupConfig

# The bake's fake of the API and its clock, fixtures of this module too.
api, recent_schedule = test_proxy.api, test_proxy.recent_schedule
FIRST, SECOND = f"{TARGET}/executions/run-1", f"{TARGET}/executions/run-2"


def past_the_lease():
    """The clock after the run's lease: its attempt died or hangs, the next delivery takes the run over."""
    CLOCK[0] += DedupConfig.from_env().lease_for("nightly") + dt.timedelta(seconds=1)


def test_a_start_whose_answer_was_lost_is_found_by_the_retry_not_started_again(http, collection, api):
    api.lose_answer = grpc.StatusCode.UNAVAILABLE  # the execution starts; the handler never hears it
    lost = deliver(http)
    api.lose_answer = None

    retried = deliver(http)  # Cloud Scheduler's retry

    assert lost.status_code == 500 and lost.text.startswith("retryable_failure")
    assert retried.status_code == 200 and retried.text.startswith("processed") and FIRST in retried.text
    assert len(api.requests) == 1  # one scheduled run, one execution
    assert run_record(collection)["status"] == "started" and run_record(collection)["execution"] == FIRST


def test_a_start_call_that_started_nothing_is_started_by_the_retry(http, collection, api):
    api.failure = grpc.StatusCode.UNAVAILABLE
    deliver(http)
    api.failure = None

    retried = deliver(http)

    assert retried.text.startswith("processed") and len(api.requests) == 2
    assert run_record(collection)["execution"] == FIRST  # the failed call started nothing, so the retry must


@pytest.mark.parametrize("end", ["failed", "succeeded"])
def test_a_started_record_that_failed_to_be_written_is_followed_by_the_takeover(
    http, collection, api, firestore_through, log_lines, end
):
    """The `started` write fails after the execution started (a Firestore error; an instance killed between the
    two leaves the same record): the run stays claimed until its lease ends, then the takeover records that
    execution and it is followed to its end."""
    firestore_through.fail(COMMIT, grpc.StatusCode.UNAVAILABLE, after=2)  # the claim, the intent, then `started`
    failed = deliver(http)
    firestore_through.clear()

    assert failed.status_code == 500 and failed.text.startswith("store_unavailable")
    assert len(api.requests) == 1 and run_record(collection)["status"] == "in_progress"
    assert deliver(http).text.startswith("in_progress")  # Scheduler's retry within the lease
    past_the_lease()
    taken_over = deliver(http)

    assert taken_over.status_code == 200 and FIRST in taken_over.text
    assert len(api.requests) == 1
    assert run_record(collection)["execution"] == FIRST
    api.states[FIRST] = end
    deliver(http, hours_later=1, job=DedupConfig.from_env().audit_job)
    assert run_record(collection)["status"] == ("failed" if end == "failed" else "completed")
    assert [line["execution"] for line in ended_lines(log_lines)] == [FIRST]


def test_a_deleted_execution_is_recorded_failed_and_the_job_goes_on(http, collection, api, log_lines):
    deliver(http)
    del api.states[FIRST]  # deleted or pruned: GetExecution answers NOT_FOUND

    following = deliver(http, hours_later=1)
    audit = deliver(http, hours_later=1, job=DedupConfig.from_env().audit_job)

    assert following.status_code == 200 and following.text.startswith("processed")
    assert audit.status_code == 200
    first = run_record(collection)
    assert first["status"] == "failed" and "NOT_FOUND" in first["last_error"] and FIRST in first["last_error"]
    (line,) = ended_lines(log_lines)  # what the execution-failed metric counts and its alert fires on
    assert (line["severity"], line["execution_outcome"], line["execution"]) == ("ERROR", "failed", FIRST)
    assert run_record(collection, hours_later=1)["execution"] == SECOND  # the job's next run started


def test_one_execution_that_cannot_be_read_does_not_stop_the_others_being_followed(
    http, collection, api, monkeypatch, log_lines
):
    jobs(monkeypatch, overlap="start")
    deliver(http)
    deliver(http, hours_later=1)
    # Followed in the query's order (by run id): the unreadable one comes first.
    by_run_id = sorted([(run_key(0).run_id, FIRST, 0), (run_key(1).run_id, SECOND, 1)])
    (_, unreadable, _), (_, readable, hours) = by_run_id
    api.get_failures[unreadable] = grpc.StatusCode.UNAVAILABLE
    api.states[readable] = "failed"
    audit_job = DedupConfig.from_env().audit_job

    audit = deliver(http, hours_later=2, job=audit_job)

    assert audit.status_code == 500  # the transient error stays retried...
    assert run_record(collection, hours_later=hours)["status"] == "failed"  # ...and the other was followed
    assert [line["execution"] for line in ended_lines(log_lines)] == [readable]
    del api.get_failures[unreadable]
    api.states[unreadable] = "succeeded"
    assert deliver(http, hours_later=2, job=audit_job).status_code == 200
    assert {run_record(collection, hours)["status"] for hours in (0, 1)} == {"failed", "completed"}


def test_a_rerun_of_a_run_still_started_waits_for_its_execution(http, collection, api):
    deliver(http)
    rerun = scheduler_headers(
        "nightly",
        SCHEDULED.isoformat().replace("+00:00", "Z"),
        **{"X-Rerun-Id": "again-1", "X-Rerun-By": "ops@example.com", "X-Rerun-Reason": "a test"},
    )

    waiting = http.post("/", headers=rerun)

    assert waiting.status_code == 409 and waiting.text.startswith("in_progress") and FIRST in waiting.text
    assert len(api.requests) == 1
    assert run_record(collection)["execution"] == FIRST
    api.states[FIRST] = "failed"
    deliver(http, hours_later=1, job=DedupConfig.from_env().audit_job)  # the audit follows it
    rerun_now = http.post("/", headers=rerun)  # the re-run's retry
    assert rerun_now.status_code == 200 and SECOND in rerun_now.text
    assert len(api.requests) == 2


def every_minute(monkeypatch):
    """The job `nightly` every minute, overlap: skip (the default): its next run comes within the lease of one whose
    start is in flight (a start call takes at most job.CALL_TIMEOUT_SECONDS)."""
    job = {"job_id": "nightly", "schedule": "* * * * *", "time_zone": "Etc/UTC"}
    monkeypatch.setenv("DEDUP_JOBS", json.dumps({"nightly": job}))


def deliver_minute(http, minutes):
    moment = SCHEDULED + dt.timedelta(minutes=minutes)
    CLOCK[0] = max(CLOCK[0], moment + dt.timedelta(seconds=30))
    return http.post("/", headers=scheduler_headers("nightly", moment.isoformat().replace("+00:00", "Z")))


def minute_record(collection, minutes):
    config = DedupConfig.from_env()
    key = RunKey(config.project, config.location, "nightly", SCHEDULED + dt.timedelta(minutes=minutes))
    return collection.document(key.run_id).get().to_dict()


def test_overlap_skip_sees_a_run_whose_start_is_in_flight(http, collection, api, monkeypatch):
    every_minute(monkeypatch)
    api.gate, api.arrived = threading.Event(), threading.Event()
    first = {}
    starting = threading.Thread(target=lambda: first.update(response=deliver_minute(http, 0)))
    starting.start()
    try:
        assert api.arrived.wait(30), "the first run never called the API"

        second = deliver_minute(http, 1)  # the first run's start call is in flight

        assert second.status_code == 200 and second.text.startswith("skipped_overlap"), second.text
        assert "starting" in second.text
    finally:
        api.gate.set()
        starting.join(30)
    assert first["response"].text.startswith("processed")
    assert len(api.requests) == 1
    assert minute_record(collection, 1)["status"] == "skipped"


def test_of_two_runs_starting_together_one_starts(http, collection, api, monkeypatch):
    """Each writes its intent, then reads the other's: the later intent is skipped, never both."""
    every_minute(monkeypatch)
    api.gate, api.arrived = threading.Event(), threading.Event()
    answers = {}
    threads = [
        threading.Thread(target=lambda minutes=minutes: answers.update({minutes: deliver_minute(http, minutes)}))
        for minutes in (0, 1)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    # The gate opens once one was skipped, or both called the API (the fault this test catches).
    while not answers and len(api.requests) < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    api.gate.set()
    for thread in threads:
        thread.join(30)
    outcomes = sorted(answer.text.split(":")[0] for answer in answers.values())
    assert outcomes == ["processed", "skipped_overlap"] and len(api.requests) == 1
    assert len(records(collection)) == 2
{%- endif %}
