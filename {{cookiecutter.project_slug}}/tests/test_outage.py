"""Firestore outages, on a real server against a private emulator that these tests freeze, stop and restart.

The client's bounds (dedup.py): every Firestore call has a deadline of RPC_TIMEOUT_SECONDS (5 s).
Writes (the claim's create, a takeover's update, the finish) are never retried by the client: a write
whose answer was lost must not be repeated blind. Reads (the claim's get, after a failed create) are
retried by READ_RETRY: 0.1 s doubling up to 1 s between tries, within the same 5 s. So a delivery that
meets an outage before the work answers 500 `store_unavailable` within two deadlines (the claim's create,
then at worst its read): typically 5 s when the store hangs, at once when nothing listens; Cloud
Scheduler then retries it.
(Firestore unreachable through the Flask test client: test_handler.py::test_firestore_unreachable_...)
"""

import datetime as dt
import os
import signal
import time

import pytest
from conftest import PROJECT, records, scheduler_headers
from firestore_emulator import Emulator
from google.cloud import firestore
from live_server import RetryPolicy, wait_for_file

import dedup

pytestmark = pytest.mark.faults

LEASE_SECONDS = 2
SLACK_SECONDS = 3.0  # process scheduling on a busy 2-core machine
BOUND_SECONDS = 2 * dedup.RPC_TIMEOUT_SECONDS + SLACK_SECONDS
SCHEDULER_RETRIES = RetryPolicy(retry_count=5, min_backoff=0.2, max_backoff=6.0, max_doublings=3)  # as test_faults


@pytest.fixture(scope="module")
def private_emulator(tmp_path_factory):
    """A second emulator, for these tests alone: stopping the shared one would break every other test."""
    emulator = Emulator(log_path=tmp_path_factory.mktemp("emulator") / "emulator.log").start()
    # A fresh emulator takes seconds over its first request (the JVM warms up): not the outage under test.
    firestore_on(emulator.host).collection("warm-up").document("first").set({}, timeout=60)
    yield emulator
    emulator.stop()


@pytest.fixture
def server(fleet, private_emulator):
    return fleet.start(FIRESTORE_EMULATOR_HOST=private_emulator.host, DEDUP_LEASE_SECONDS=str(LEASE_SECONDS))


def frozen(emulator):
    """The store hangs while frozen: its connections stay open and nothing answers."""

    class Frozen:
        def __enter__(self):
            os.killpg(emulator.process.pid, signal.SIGSTOP)

        def __exit__(self, *exc):
            os.killpg(emulator.process.pid, signal.SIGCONT)

    return Frozen()


def firestore_on(host):
    """A client of the private emulator (a client reads FIRESTORE_EMULATOR_HOST when it is made)."""
    previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
    os.environ["FIRESTORE_EMULATOR_HOST"] = host
    try:
        return firestore.Client(project=PROJECT, database=dedup.baked_settings()["DEDUP_DATABASE"])
    finally:
        os.environ["FIRESTORE_EMULATOR_HOST"] = previous


def run_records(host, collection_name):
    return records(firestore_on(host).collection(collection_name))


def outcome_lines(server, job):
    return [line for line in server.log_lines() if line.get("job") == job and "outcome" in line]


def test_hung_store_answers_500_within_the_deadline_and_the_run_proceeds_once_after(
    server, fleet, private_emulator, collection, now
):
    before, during = (scheduler_headers(job, now.isoformat()) for job in ("before-outage", "during-outage"))
    server.wait_ready()
    assert server.deliver(before).status == 200
    with frozen(private_emulator):
        hung = server.deliver(during)

    print(f"\nhung store: {hung.status} after {hung.seconds:.1f} s")
    assert hung.status == 500 and hung.text.startswith("store_unavailable")
    assert hung.seconds <= BOUND_SECONDS
    (line,) = outcome_lines(server, "during-outage")
    assert (line["outcome"], line["severity"], line["http_status"]) == ("store_unavailable", "ERROR", 500)
    assert "DeadlineExceeded" in line["message"] or "ServiceUnavailable" in line["message"]
    assert len(fleet.executions()) == 1  # the work never ran for the failed delivery
    # Nothing half-written: the claim either never landed, or landed whole (a late create the store
    # processed after the client gave up), in which case it only delays the run by one lease.
    claims = [r for r in run_records(private_emulator.host, collection.id).values() if r["job_name"] == "during-outage"]
    assert len(claims) <= 1 and all(claim["status"] == "in_progress" and claim["lease_expires"] for claim in claims)

    retries = SCHEDULER_RETRIES.retry(server, during)

    assert retries[-1][1].status == 200 and retries[-1][1].text.startswith("processed")
    assert len(fleet.executions()) == 2
    assert {r["status"] for r in run_records(private_emulator.host, collection.id).values()} == {"completed"}


def test_stopped_store_answers_500_at_once_and_after_a_restart_the_run_proceeds_once(
    server, fleet, private_emulator, collection, now
):
    headers = scheduler_headers("store-down", now.isoformat())
    server.wait_ready()
    private_emulator.stop()  # nothing listens on the port any more
    refused = server.deliver(headers)
    restarted = Emulator(port=private_emulator.port, log_path=private_emulator.log_path).start()
    private_emulator.process = restarted.process  # the module fixture stops whichever process runs

    print(f"\nstopped store: {refused.status} after {refused.seconds:.2f} s")
    assert refused.status == 500 and refused.text.startswith("store_unavailable")
    assert refused.seconds <= BOUND_SECONDS
    (line,) = outcome_lines(server, "store-down")
    assert line["outcome"] == "store_unavailable" and line["severity"] == "ERROR"
    assert fleet.executions() == []

    # Scheduler's retries: the server's gRPC channel reconnects by itself, after its reconnect backoff
    # (1 s, growing) and the restarted emulator's warm-up; until then a retry is another fast 500.
    retries = SCHEDULER_RETRIES.retry(server, headers)
    replay = server.deliver(headers)

    assert retries[-1][1].status == 200 and retries[-1][1].text.startswith("processed")
    assert {answer.text.split(":")[0] for _, answer in retries[:-1]} <= {"store_unavailable", "in_progress"}
    assert replay.status == 200 and replay.text.startswith("duplicate")
    assert len(fleet.executions()) == 1
    print(f"\nafter the restart: {[(round(t, 1), a.status) for t, a in retries]} (seconds, status)")
    (record,) = run_records(private_emulator.host, collection.id).values()
    assert record["status"] == "completed"


def test_kill_while_the_finish_is_in_flight_leaves_nothing_stuck_past_the_lease(
    server, fleet, private_emulator, collection, now
):
    """Fault (c) of docs/faults.md with the finish truly in flight: the store is frozen, the finish
    write is sent and hangs, the server is SIGKILLed, then the store resumes. Whether the store then
    applies that write or not, the run ends completed, its output exists once, and no retry after
    the lease is told to wait."""
    headers = scheduler_headers("crash-in-flight", now.isoformat())
    doomed = fleet.start(
        SERVED_FAULT="hold_after_work",
        FIRESTORE_EMULATOR_HOST=private_emulator.host,
        DEDUP_LEASE_SECONDS=str(LEASE_SECONDS),
    )
    doomed.wait_ready()
    server.wait_ready()
    delivery, answers = doomed.deliver_in_background(headers)
    wait_for_file(doomed.signal_path)  # the work is done; the finish comes next
    with frozen(private_emulator):
        doomed.signal_path.with_name(doomed.signal_path.name + ".go").write_text("go")
        time.sleep(0.5)  # the finish's update is sent and waits on the frozen store
        doomed.kill()
    delivery.join(timeout=10)
    (claim,) = run_records(private_emulator.host, collection.id).values()

    retries_began = dt.datetime.now(dt.UTC)
    retries = SCHEDULER_RETRIES.retry(server, headers)

    applied = claim["status"] == "completed"
    print(
        f"\nkilled in flight: finish {'applied' if applied else 'lost'}; retries: "
        + ", ".join(f"{t:.1f}s {a.status} {a.text.split(':')[0]}" for t, a in retries)
    )
    assert answers[0].status == 0 and claim["status"] in ("completed", "in_progress")
    assert retries[-1][1].status == 200
    assert retries[-1][1].text.startswith("duplicate" if applied else "processed")
    for seconds, answer in retries:  # nothing stays stuck: past the lease, no retry is told to wait
        if retries_began + dt.timedelta(seconds=seconds - answer.seconds) > claim["lease_expires"]:
            assert answer.status == 200
    (record,) = run_records(private_emulator.host, collection.id).values()
    assert record["status"] == "completed"
    assert len(fleet.executions()) == (1 if applied else 2)
    (output,) = records(firestore_on(private_emulator.host).collection(fleet.outputs)).values()
    assert output["attempt"] == 1
