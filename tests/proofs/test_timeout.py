"""The deadline on a real functions-framework server, started with the environment the Terraform gives the
function (terraform/modules/scheduled-dedup/function.tf, environment_variables).

The handler stops the work itself: the work runs in a warm worker process, killed at the job's attempt deadline
less the release margin (stop.py, config.Config.stop_after); then the handler releases the claim and
answers 500, and the next delivery runs the work at once. A kill stops Python code and C code alike.
functions-framework's threaded timeout stays off (THREADED_TIMEOUT_ENABLED=false); CLOUD_RUN_TIMEOUT_SECONDS
is then gunicorn's worker timeout (functions_framework/_http/gunicorn.py, 3.10.2), which the gthread worker's
heartbeat keeps from ending a long request, unless THREADS is 1 (gunicorn's sync worker).
"""

import pytest
from conftest import PROJECT, records, scheduler_headers
from google.cloud import firestore
from live_server import everywhere

import config
from config import RELEASE_MARGIN

pytestmark = pytest.mark.faults

STOP_AFTER_SECONDS = 6  # long enough for the first run on a server, which also starts its fork server (stop.py)
# What function.tf sets, with a short deadline.
DEPLOYED_ENV = {
    "CLOUD_RUN_TIMEOUT_SECONDS": "300",
    "THREADED_TIMEOUT_ENABLED": "false",
    "THREADS": "2",
    "LOG_EXECUTION_ID": "true",
    "config_change": everywhere(attempt_deadline=int(RELEASE_MARGIN.total_seconds()) + STOP_AFTER_SECONDS),
}
STOPPED = "retryable_failure: retryable failure, run released for a retry: stopped at the job's deadline"
# A stopped delivery is answered at the deadline plus a kill and a write: far sooner than this (a loaded machine).
ANSWERED_WITHIN_SECONDS = STOP_AFTER_SECONDS + 15


def outcome_lines(server, job):
    """The job's delivery outcome lines (a `takeover` line has no http_status)."""
    return [line for line in server.log_lines() if line.get("job") == job and "http_status" in line]


def outputs_of(fleet):
    """The served job's effects, outputs/{run_id} (tests/harness/served_job.py)."""
    return records(firestore.Client(project=PROJECT, database=config.load().database).collection(fleet.outputs))


@pytest.mark.parametrize("blocking", ["0", "1"], ids=["python-code", "blocked-in-c"])
def test_work_past_the_deadline_is_killed_released_and_the_next_delivery_runs_it(fleet, collection, now, blocking):
    """60 s of work, in 10 ms steps of Python code or in one time.sleep (C code, like a socket read without a
    timeout, which no exception raised into a thread can stop): killed at the deadline either way."""
    server = fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_SECONDS="60", SERVED_FIRST_RUN_BLOCKING=blocking)
    server.wait_ready()
    headers = scheduler_headers("outlives-deadline", now.isoformat())

    stopped = server.deliver(headers, timeout=60)

    assert stopped.status == 500 and stopped.text.startswith(STOPPED), stopped
    assert stopped.seconds < ANSWERED_WITHIN_SECONDS  # the work would have taken 60 s
    assert records(collection) == {}  # released: nothing waits for a lease
    (line,) = outcome_lines(server, "outlives-deadline")
    assert (line["outcome"], line["severity"], line["http_status"]) == ("retryable_failure", "ERROR", 500)
    assert outputs_of(fleet) == {}  # stopped before its effect

    retried = server.deliver(headers)

    assert retried.status == 200 and retried.text.startswith("processed"), retried
    assert len(fleet.executions()) == 2  # the stopped execution and the one that finished
    (record,) = records(collection).values()
    assert record["status"] == "completed"
    (output,) = outputs_of(fleet).values()
    assert output["attempt_id"] == record["attempt_id"]
    assert len(outcome_lines(server, "outlives-deadline")) == 2  # one per delivery


def test_gunicorns_timeout_is_only_a_backstop_that_needs_more_than_one_thread(fleet, collection, now):
    """CLOUD_RUN_TIMEOUT_SECONDS with the threaded timeout off is gunicorn's worker timeout: with THREADS above 1
    (function.tf) the gthread worker's heartbeat goes on while a request runs, so 4 s of work under a 2 s
    timeout finishes; with one thread, gunicorn's sync worker is killed instead: no outcome line, no release."""
    long_deadline = DEPLOYED_ENV | {
        "CLOUD_RUN_TIMEOUT_SECONDS": "2",
        "config_change": everywhere(attempt_deadline=int(RELEASE_MARGIN.total_seconds()) + 30),
    }
    servers = {
        "threads": fleet.start(**long_deadline, SERVED_FIRST_RUN_SECONDS="4"),
        "one-thread": fleet.start(**long_deadline | {"THREADS": "1"}, SERVED_FIRST_RUN_SECONDS="60"),
    }
    for server in servers.values():
        server.wait_ready()
    deliveries = {
        job: server.deliver_in_background(scheduler_headers(job, now.isoformat())) for job, server in servers.items()
    }
    for thread, _ in deliveries.values():
        thread.join(timeout=90)
    answers = {job: answer for job, (_, (answer,)) in deliveries.items()}
    runs = {record["job_name"]: record for record in records(collection).values()}

    assert answers["threads"].status == 200 and answers["threads"].text.startswith("processed"), answers["threads"]
    assert answers["threads"].seconds >= 4 and runs["threads"]["status"] == "completed"
    assert answers["one-thread"].status != 200 and not answers["one-thread"].text.startswith("retryable_failure")
    assert outcome_lines(servers["one-thread"], "one-thread") == []
    assert runs["one-thread"]["status"] == "in_progress"
