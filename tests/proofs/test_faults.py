"""SIGKILL a real server at each point of a delivery, then retry the way Cloud Scheduler does (docs/faults.md).

Each test starts two functions-framework servers (tests/harness/live_server.py) on the emulator: the one that
dies, stopped at a fault point by tests/harness/served_job.py and killed with SIGKILL (no cleanup code runs),
and a fresh one that takes Scheduler's retries, as a new Cloud Run instance would. Both boot at once
to keep the suite fast. The lease is LEASE_SECONDS; the retries follow Scheduler's backoff shape with
the template's default policy (10 s doubling 3 times, up to 300 s) scaled by 1/50, and 5 retries
(Scheduler's most) so that they reach past the lease: 0.2, 0.4, 0.8, 1.6, 3.2 s.
"""

import datetime as dt
import time

import pytest
from conftest import PROJECT, records, scheduler_headers
from google.cloud import firestore
from live_server import RetryPolicy, everywhere, wait_for_file

import config

pytestmark = pytest.mark.faults

LEASE_SECONDS = 2
SCHEDULER_RETRIES = RetryPolicy(retry_count=5, min_backoff=0.2, max_backoff=6.0, max_doublings=3)


def wait_for_signal(server, point, timeout=30.0):
    """Until the server signals `point`: the signal file exists a moment before its text is written."""
    deadline = time.monotonic() + timeout
    while wait_for_file(server.signal_path, timeout) != point:
        assert time.monotonic() < deadline, f"the server never reached {point}"
        time.sleep(0.01)


def crash_at(fleet, point, headers):
    """One delivery, killed at `point`; returns the fresh server and what the dead one's client saw."""
    doomed = fleet.start(everywhere(lease=LEASE_SECONDS), SERVED_FAULT=point)
    fresh = fleet.start(everywhere(lease=LEASE_SECONDS))
    doomed.wait_ready()
    fresh.wait_ready()
    delivery, answers = doomed.deliver_in_background(headers)
    wait_for_signal(doomed, point)
    doomed.kill()
    delivery.join(timeout=10)
    return fresh, answers[0]


def retry_like_scheduler(server, headers):
    """SCHEDULER_RETRIES' retries as (seconds since the first wait began, began, answer), `began` in
    wall-clock time to compare with a lease: on a loaded machine the first retry may come late, so the
    tests decide by time, not by position."""
    first_wait = dt.datetime.now(dt.UTC)
    return [
        (seconds, first_wait + dt.timedelta(seconds=seconds - answer.seconds), answer)
        for seconds, answer in SCHEDULER_RETRIES.retry(server, headers)
    ]


def assert_blocked_by_the_lease_then_run(retries, lease_expires):
    """Retries during the dead attempt's lease are told 409 (Scheduler keeps retrying); the first one
    after it runs the work; none that began after the lease is told to wait."""
    *before, (_, last_began, last) = retries
    assert [(a.status, a.text.split(":")[0]) for _, _, a in before] == [(409, "in_progress")] * len(before)
    assert (last.status, last.text.split(":")[0]) == (200, "processed")
    assert last_began + dt.timedelta(seconds=last.seconds) > lease_expires  # it ran only once the lease was over
    assert all(answer.status == 200 for _, began, answer in retries if began > lease_expires)


def headers_now(job):
    now = dt.datetime.now(dt.UTC).replace(microsecond=0)
    return scheduler_headers(job, now.isoformat().replace("+00:00", "Z"))


def show(case, retries):
    """Prints the retries as (seconds after the first wait began, status, outcome): the figures docs/faults.md cites."""
    print(f"\n{case}: " + ", ".join(f"{t:.1f}s {a.status} {a.text.split(':')[0]}" for t, _, a in retries))


def outputs_of(fleet):
    """The job's effects: outputs/{run_id}, created put-if-absent by tests/harness/served_job.py."""
    client = firestore.Client(project=PROJECT, database=config.load().database)
    return records(client.collection(fleet.outputs))


def test_kill_after_claim_before_work_a_retry_after_the_lease_runs_it_once(fleet, collection):
    delivery = headers_now("crash-before-work")
    fresh, crashed = crash_at(fleet, "before_work", delivery)
    (run_id,) = records(collection)
    claimed = records(collection)[run_id]
    assert crashed.status == 0  # Scheduler sees a failed attempt and starts retrying
    assert claimed["status"] == "in_progress" and fleet.executions() == []

    retries = retry_like_scheduler(fresh, delivery)
    show("killed before the work", retries)

    assert_blocked_by_the_lease_then_run(retries, claimed["lease_expires"])
    record = records(collection)[run_id]
    assert record["status"] == "completed" and record["attempts"] == 2
    assert record["attempt_id"] != claimed["attempt_id"]
    assert dt.datetime.now(dt.UTC) > claimed["lease_expires"]
    assert fleet.executions() == [run_id]
    assert list(outputs_of(fleet)) == [run_id]
    assert [line["outcome"] for line in fresh.log_lines() if "outcome" in line][-2:] == ["takeover", "processed"]


def test_kill_after_work_before_finish_runs_the_work_twice_but_a_run_id_keyed_effect_once(fleet, collection):
    delivery = headers_now("crash-after-work")
    fresh, crashed = crash_at(fleet, "after_work", delivery)
    (run_id,) = records(collection)
    assert crashed.status == 0
    claimed = records(collection)[run_id]
    assert claimed["status"] == "in_progress"  # the finish never left the dead process
    first_output = outputs_of(fleet)[run_id]

    retries = retry_like_scheduler(fresh, delivery)
    show("killed after the work", retries)

    assert_blocked_by_the_lease_then_run(retries, claimed["lease_expires"])
    # The claim cannot know the dead attempt's work had finished: the work ran twice ...
    assert fleet.executions() == [run_id, run_id]
    # ... but its effect, created put-if-absent under run_id, exists once: the first attempt's.
    assert outputs_of(fleet) == {run_id: first_output}
    assert first_output["attempt"] == 1
    assert records(collection)[run_id]["status"] == "completed"


def test_kill_after_the_finish_commit_leaves_nothing_stuck_and_the_retry_is_a_duplicate(fleet, collection):
    delivery = headers_now("crash-in-finish")
    fresh, crashed = crash_at(fleet, "after_finish", delivery)
    (run_id,) = records(collection)
    assert crashed.status == 0  # the finish committed but its answer never reached Scheduler
    assert records(collection)[run_id]["status"] == "completed"

    retries = retry_like_scheduler(fresh, delivery)
    show("killed after the finish commit", retries)

    # Answered at the first retry, however soon it came: the run's record says completed.
    assert [(answer.status, answer.text.split(":")[0]) for _, _, answer in retries] == [(200, "duplicate")]
    assert fleet.executions() == [run_id]
    assert list(outputs_of(fleet)) == [run_id]
