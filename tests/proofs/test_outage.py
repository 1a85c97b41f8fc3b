"""Firestore outages, on a real server against a private emulator that these tests freeze, stop and restart.

The client's bounds (ledger.py): every Firestore call has a deadline of RPC_TIMEOUT_SECONDS (5 s).
Writes (the claim's create, a takeover's update, the finish) are never retried by the client: a write
whose answer was lost must not be repeated blind. Reads (the claim's get, after a failed create) are
retried by READ_RETRY: 0.1 s doubling up to 1 s between tries, within the same 5 s. So a delivery that
meets an outage before the work answers 500 `store_unavailable`: after one deadline (5 s) when the
store hangs, at once when nothing listens; Cloud Scheduler then retries it. The bounds below are
absolute numbers, not computed from RPC_TIMEOUT_SECONDS: a longer deadline, or a write retried by the
client (4.6 s against a stopped store instead of 0.02 s), must fail them.
(Firestore unreachable through the Flask test client: test_handler.py::test_firestore_unreachable_...)
"""

import contextlib
import datetime as dt
import os
import signal
import time
from pathlib import Path

import pytest
from conftest import records, scheduler_headers
from live_server import RetryPolicy, everywhere, wait_for_file
from proof_fixtures import firestore_client_of
from scheduled_dedup_tools.firestore_emulator import Emulator

pytestmark = pytest.mark.faults

LEASE_SECONDS = 2
# A hung store: one 5 s deadline (the claim's create), plus process scheduling on a loaded 2-core
# machine. (A 10 s answer was a freeze that had not taken hold: see `frozen`.) A 30 s deadline fails it.
HUNG_STORE_BOUND_SECONDS = 8.0
# A stopped store refuses the connection: the create fails at once and is not retried ("about a second").
STOPPED_STORE_BOUND_SECONDS = 2.0
# After the emulator restarts, the server's gRPC channel reconnects on its own backoff (1 s, growing by
# 1.6x): retries until then are fast 500s. How long that takes depends on the machine's load, so the
# test delivers until a 2xx within this bound rather than a fixed number of retries.
RECONNECT_BOUND_SECONDS = 90.0
SCHEDULER_RETRIES = RetryPolicy(retry_count=5, min_backoff=0.2, max_backoff=6.0, max_doublings=3)  # as test_faults


@pytest.fixture(scope="module")
def private_emulator(tmp_path_factory):
    """A second emulator, for these tests alone: stopping the shared one would break every other test."""
    emulator = Emulator(log_path=tmp_path_factory.mktemp("emulator") / "emulator.log").start()
    # A fresh emulator takes seconds over its first request (the JVM warms up): not the outage under test.
    firestore_client_of(emulator.host).collection("warm-up").document("first").set({}, timeout=60)
    yield emulator
    emulator.stop()


@pytest.fixture
def server(fleet, private_emulator):
    return fleet.start(everywhere(lease=LEASE_SECONDS), FIRESTORE_EMULATOR_HOST=private_emulator.host)


def all_threads_stopped(pid):
    """Every thread of the process is in state T (stopped), from /proc/PID/task/*/stat."""
    states = []
    for stat in Path(f"/proc/{pid}/task").glob("*/stat"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            states.append(stat.read_text().rsplit(")", 1)[1].split()[0])
    return bool(states) and all(state in "tT" for state in states)


def frozen(emulator):
    """The store hangs while frozen: its connections stay open and nothing answers. Entered only once
    every thread of the emulator has stopped: on a loaded machine a thread can still be running just
    after SIGSTOP is sent, and answer the claim the test meant to hang (a 10 s answer, the work run)."""

    class Frozen:
        def __enter__(self):
            os.killpg(emulator.process.pid, signal.SIGSTOP)
            deadline = time.monotonic() + 10
            while not all_threads_stopped(emulator.process.pid):
                assert time.monotonic() < deadline, "the emulator did not stop within 10 s of SIGSTOP"
                time.sleep(0.01)

        def __exit__(self, *exc):
            os.killpg(emulator.process.pid, signal.SIGCONT)

    return Frozen()


def run_records(host, collection_name):
    return records(firestore_client_of(host).collection(collection_name))


def outcome_lines(server, job):
    return [line for line in server.log_lines() if line.get("job") == job and "outcome" in line]


def deliver_until_2xx(server, headers, every=0.5):
    """Retries every `every` s until a 2xx (Scheduler keeps retrying a run its policy has not given up on)."""
    started = time.monotonic()
    attempts = []
    while not attempts or not 200 <= attempts[-1][1].status < 300:
        assert time.monotonic() - started < RECONNECT_BOUND_SECONDS, f"no 2xx after the restart: {attempts}"
        time.sleep(every)
        attempts.append((time.monotonic() - started, server.deliver(headers)))
    return attempts


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
    assert hung.seconds < HUNG_STORE_BOUND_SECONDS
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
    assert refused.seconds < STOPPED_STORE_BOUND_SECONDS
    (line,) = outcome_lines(server, "store-down")
    assert line["outcome"] == "store_unavailable" and line["severity"] == "ERROR"
    assert fleet.executions() == []

    retries = deliver_until_2xx(server, headers)
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
        everywhere(lease=LEASE_SECONDS), SERVED_FAULT="hold_after_work", FIRESTORE_EMULATOR_HOST=private_emulator.host
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
    # The claim's lease, from any read: the finish leaves lease_expires as the claim wrote it.
    (claim,) = run_records(private_emulator.host, collection.id).values()

    retries_began = dt.datetime.now(dt.UTC)
    retries = SCHEDULER_RETRIES.retry(server, headers)

    # Whether the store applied the dead attempt's finish, from what it finally holds: the resumed store
    # may apply that write at any moment after SIGCONT, so a read right after the kill cannot tell.
    # Applied: the record stays the first attempt's; lost: a retry took the run over (attempt 2).
    (record,) = run_records(private_emulator.host, collection.id).values()
    applied = record["attempt_id"] == claim["attempt_id"]
    print(
        f"\nkilled in flight: finish {'applied' if applied else 'lost'}; retries: "
        + ", ".join(f"{t:.1f}s {a.status} {a.text.split(':')[0]}" for t, a in retries)
    )
    assert answers[0].status == 0 and claim["status"] in ("completed", "in_progress")
    assert record["status"] == "completed" and record["attempts"] == (1 if applied else 2)
    assert retries[-1][1].status == 200
    assert retries[-1][1].text.startswith("duplicate" if applied else "processed")
    for seconds, answer in retries:  # nothing stays stuck: past the lease, no retry is told to wait
        if retries_began + dt.timedelta(seconds=seconds - answer.seconds) > claim["lease_expires"]:
            assert answer.status == 200
    assert len(fleet.executions()) == (1 if applied else 2)
    (output,) = records(firestore_client_of(private_emulator.host).collection(fleet.outputs)).values()
    assert output["attempt"] == 1
