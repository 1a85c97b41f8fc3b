"""The request timeout on a real functions-framework server, started with the environment the Terraform
gives the function (terraform/modules/scheduled-dedup/function.tf, environment_variables).

functions-framework 3.10.2 stops a request that outlives CLOUD_RUN_TIMEOUT_SECONDS only when that is
above 0, THREADED_TIMEOUT_ENABLED is "true" and THREADS is above 1 (functions_framework/_http/gunicorn.py:
then its gthread worker runs each request under request_timeout.ThreadingTimeout, which raises
RequestTimeoutException in the request's thread). The handler catches it: in the work it releases the
claim, so the next delivery runs the work at once; in a Firestore call the claim, if one was made, waits
for its lease. Either way one outcome line. Without any one of the three settings the work is not
stopped (or, with one thread, the whole worker is killed and nothing is logged or released).
"""

import pytest
from conftest import PROJECT, records, scheduler_headers
from fake_firestore import COMMIT
from google.cloud import firestore
from live_server import RetryPolicy

import dedup

pytestmark = pytest.mark.faults

TIMEOUT_SECONDS = 2
# What function.tf sets (there CLOUD_RUN_TIMEOUT_SECONDS is the function timeout less the stop margin).
STOPPING_ENV = {
    "CLOUD_RUN_TIMEOUT_SECONDS": str(TIMEOUT_SECONDS),
    "THREADED_TIMEOUT_ENABLED": "true",
    "THREADS": "2",
    "LOG_EXECUTION_ID": "true",
}
LEASE_SECONDS = 2
SCHEDULER_RETRIES = RetryPolicy(retry_count=5, min_backoff=0.2, max_backoff=6.0, max_doublings=3)  # as test_faults
STOPPED_IN_THE_WORK = (
    f"retryable_failure: stopped at the request timeout (CLOUD_RUN_TIMEOUT_SECONDS={TIMEOUT_SECONDS}) in the work; "
    "run released for a retry"
)


def outcome_lines(server, job):
    """The job's delivery outcome lines (a `takeover` line has no http_status)."""
    return [line for line in server.log_lines() if line.get("job") == job and "http_status" in line]


def outputs_of(fleet):
    """The served job's effects, outputs/{run_id} (tests/harness/served_job.py)."""
    return records(
        firestore.Client(project=PROJECT, database=dedup.baked_settings()["DEDUP_DATABASE"]).collection(fleet.outputs)
    )


def test_work_that_outlives_the_timeout_is_stopped_released_and_the_next_delivery_runs_it(fleet, collection, now):
    server = fleet.start(**STOPPING_ENV, SERVED_FIRST_RUN_SECONDS="60").wait_ready()
    headers = scheduler_headers("outlives-timeout", now.isoformat())

    stopped = server.deliver(headers)

    assert stopped.text.strip() == STOPPED_IN_THE_WORK, "the claim itself took longer than the timeout?"
    assert stopped.status == 500 and stopped.seconds < 30  # the work would have taken 60 s
    assert records(collection) == {}  # released: nothing waits for a lease
    (line,) = outcome_lines(server, "outlives-timeout")
    assert (line["outcome"], line["severity"], line["http_status"]) == ("retryable_failure", "ERROR", 500)
    assert "RequestTimeoutException" in line["message"]  # the traceback shows where the work was stopped
    assert outputs_of(fleet) == {}  # stopped before its effect

    retried = server.deliver(headers)

    assert retried.status == 200 and retried.text.startswith("processed")
    assert len(fleet.executions()) == 2  # the stopped execution and the one that finished
    (record,) = records(collection).values()
    assert record["status"] == "completed"
    (output,) = outputs_of(fleet).values()
    assert output["attempt_id"] == record["attempt_id"]
    assert len(outcome_lines(server, "outlives-timeout")) == 2  # one per delivery


def test_a_call_blocked_in_c_code_is_stopped_only_once_it_returns(fleet, collection, now):
    """The stop is an exception raised at the next Python instruction: a 4 s time.sleep (C code, like
    a socket read without a timeout) runs to its end, then the work stops; docs/faults.md says what the
    work must do about it."""
    server = fleet.start(**STOPPING_ENV, SERVED_FIRST_RUN_SECONDS="4", SERVED_FIRST_RUN_BLOCKING="1").wait_ready()

    stopped = server.deliver(scheduler_headers("blocked-in-c", now.isoformat()))

    assert stopped.text.strip() == STOPPED_IN_THE_WORK
    assert stopped.seconds >= 4  # not at TIMEOUT_SECONDS: the sleep was not interrupted
    assert records(collection) == {}
    assert len(outcome_lines(server, "blocked-in-c")) == 1


def test_a_stop_during_a_firestore_call_logs_one_line_and_the_claim_waits_for_its_lease(
    fleet, collection, faulty_firestore, now
):
    """The claim's create is held past the timeout and then lands: the stop arrives when the call returns,
    outside the work. The claim cannot be released (the stop may land before its result is known), so it
    waits for its lease as after a crash, and Scheduler's retries take it over once the lease is past."""
    server = fleet.start(
        **STOPPING_ENV, FIRESTORE_EMULATOR_HOST=faulty_firestore.host, DEDUP_LEASE_SECONDS=str(LEASE_SECONDS)
    ).wait_ready()
    headers = scheduler_headers("stopped-in-a-call", now.isoformat())
    faulty_firestore.hold(COMMIT, TIMEOUT_SECONDS + 1.5)
    try:
        stopped = server.deliver(headers)
    finally:
        faulty_firestore.clear()

    assert stopped.status == 500
    assert stopped.text.startswith("retryable_failure: stopped at the request timeout"), stopped.text
    assert "during a Firestore call" in stopped.text
    assert fleet.executions() == []
    (claim,) = records(collection).values()
    assert claim["status"] == "in_progress"  # the held create landed after the stop
    assert len(outcome_lines(server, "stopped-in-a-call")) == 1

    retries = SCHEDULER_RETRIES.retry(server, headers)

    assert retries[-1][1].status == 200 and retries[-1][1].text.startswith("processed")
    assert len(fleet.executions()) == 1
    assert len(outcome_lines(server, "stopped-in-a-call")) == 1 + len(retries)


def test_without_any_one_of_the_three_settings_the_work_is_not_stopped(fleet, collection, now):
    """Each setting function.tf makes explicit, left out in turn (three servers at once)."""
    cases = {
        "no-threaded-timeout": ({"THREADED_TIMEOUT_ENABLED": "false"}, "4"),
        "no-timeout-seconds": ({"CLOUD_RUN_TIMEOUT_SECONDS": "0"}, "4"),
        "one-thread": ({"THREADS": "1"}, "60"),  # gunicorn's sync worker: its arbiter kills the worker
    }
    servers = {
        job: fleet.start(**STOPPING_ENV | change, SERVED_FIRST_RUN_SECONDS=work)
        for job, (change, work) in cases.items()
    }
    for server in servers.values():
        server.wait_ready()
    deliveries = {
        job: server.deliver_in_background(scheduler_headers(job, now.isoformat())) for job, server in servers.items()
    }
    for thread, _ in deliveries.values():
        thread.join(timeout=60)
    answers = {job: answer for job, (_, (answer,)) in deliveries.items()}
    runs = {record["job_name"]: record for record in records(collection).values()}

    for job in ("no-threaded-timeout", "no-timeout-seconds"):  # the work ran its 4 s to the end
        assert answers[job].status == 200 and answers[job].text.startswith("processed"), answers[job]
        assert answers[job].seconds >= 4 and runs[job]["status"] == "completed"
    # One thread: the request is stopped by killing the worker process, so no outcome line is written
    # and the claim is not released: it waits for its lease, as after a crash.
    assert answers["one-thread"].status != 200 and not answers["one-thread"].text.startswith("retryable_failure")
    assert outcome_lines(servers["one-thread"], "one-thread") == []
    assert runs["one-thread"]["status"] == "in_progress"
