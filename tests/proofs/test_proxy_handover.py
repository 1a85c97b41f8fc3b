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
{%- if cookiecutter.target == "cloud_run_job" %}
- Two executions of one run id meet at an item (a re-run after a cancelled execution whose task died holding it):
  one leased by an execution that has ended is taken over at once; one a live execution holds is waited for, with
  a line that says whom for; one whose holder cannot be read waits out the lease, saying so. Never a task failed
  for the lease's length without a word.
{%- else %}
- The workflow's guard (workflow/workflow.yaml, run by harness/workflow_runner.py against the emulator and the fake
  API) records its execution's state: a re-run after its owner was cancelled, failed or deleted runs the side
  effect exactly once; an execution that meets the guard of one still running waits for it and never runs the side
  effect beside it; of two that find the owner ended, one takes the guard over.
{%- endif %}
"""

import datetime as dt
import threading
import time

import grpc
import pytest
import test_proxy
from conftest import configured, records, scheduler_headers
from fake_firestore import COMMIT
from test_proxy import CLOCK, SCHEDULED, TARGET, deliver, ended_lines, jobs, run_key, run_record
{% if cookiecutter.target == "workflow" -%}
from workflow_runner import Cancelled, Raised, Run
{% endif %}
import config as configuration
import job
{% if cookiecutter.target == "cloud_run_job" -%}
from cloud_run_job import holders, task
from cloud_run_job.store import JobStore, Worker
{% endif -%}
from keys import RunKey

# The bake's fake of the API and its clock, fixtures of this module too.
api, recent_schedule = test_proxy.api, test_proxy.recent_schedule
FIRST, SECOND = f"{TARGET}/executions/run-1", f"{TARGET}/executions/run-2"


def past_the_lease():
    """The clock after the run's lease: its attempt died or hangs, the next delivery takes the run over."""
    CLOCK[0] += configuration.current().lease_for("nightly") + dt.timedelta(seconds=1)


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
    deliver(http, hours_later=1, job=configuration.current().audit_job)
    assert run_record(collection)["status"] == ("failed" if end == "failed" else "completed")
    assert [line["execution"] for line in ended_lines(log_lines)] == [FIRST]


# Every step between the claim, the start call, the `started` record and the follow, failed once: the store (a
# Firestore error at the claim's, the intent's or the record's commit; a killed instance leaves what a failed
# `started` write leaves), the API (the start call failing, its answer lost), the execution deleted before it is
# followed. Whatever failed: one execution for the run, and its end recorded once.
HANDOVER_FAULTS = ["claim_write", "intent_write", "started_write", "start_call", "answer_lost", "deleted"]


@pytest.mark.parametrize("end", ["succeeded", "failed"])
@pytest.mark.parametrize("fault", HANDOVER_FAULTS)
def test_whatever_fails_between_claim_and_follow_one_execution_and_its_end_recorded(
    http, collection, api, firestore_through, log_lines, fault, end
):
    commits_before = {"claim_write": 0, "intent_write": 1, "started_write": 2}
    if fault in commits_before:
        firestore_through.fail(COMMIT, grpc.StatusCode.UNAVAILABLE, after=commits_before[fault])
    api.failure = grpc.StatusCode.UNAVAILABLE if fault == "start_call" else None
    api.lose_answer = grpc.StatusCode.UNAVAILABLE if fault == "answer_lost" else None
    first = deliver(http)
    firestore_through.clear()
    api.failure = api.lose_answer = None
    for _ in range(3):  # Scheduler's retries: within the lease, then past it (a takeover)
        if (run_record(collection) or {}).get("status") == "started":
            break
        deliver(http)
        past_the_lease()
    if fault == "deleted":
        del api.states[FIRST]
    else:
        api.states[FIRST] = end
    deliver(http, hours_later=1, job=configuration.current().audit_job)

    assert first.status_code == (200 if fault == "deleted" else 500), first.text
    assert [name for name, _, _ in api.started] == [FIRST]  # one execution for the run
    assert [line["execution"] for line in ended_lines(log_lines)] == [FIRST]  # its end recorded, once
    assert run_record(collection)["status"] == ("completed" if end == "succeeded" and fault != "deleted" else "failed")


def test_a_deleted_execution_is_recorded_failed_and_the_job_goes_on(http, collection, api, log_lines):
    deliver(http)
    del api.states[FIRST]  # deleted or pruned: GetExecution answers NOT_FOUND

    following = deliver(http, hours_later=1)
    audit = deliver(http, hours_later=1, job=configuration.current().audit_job)

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
    audit_job = configuration.current().audit_job

    audit = deliver(http, hours_later=2, job=audit_job)

    assert audit.status_code == 500  # the transient error stays retried...
    assert run_record(collection, hours_later=hours)["status"] == "failed"  # ...and the other was followed
    assert [line["execution"] for line in ended_lines(log_lines)] == [readable]
    del api.get_failures[unreadable]
    api.states[unreadable] = "succeeded"
    assert deliver(http, hours_later=2, job=audit_job).status_code == 200
    assert {run_record(collection, hours)["status"] for hours in (0, 1)} == {"failed", "completed"}


def rerun_headers():
    """What `runs.py rerun` sends for the run of SCHEDULED."""
    return scheduler_headers(
        "nightly",
        SCHEDULED.isoformat().replace("+00:00", "Z"),
        **{"X-Rerun-Id": "again-1", "X-Rerun-By": "ops@example.com", "X-Rerun-Reason": "a test"},
    )


def test_a_rerun_of_a_run_still_started_waits_for_its_execution(http, collection, api):
    deliver(http)
    rerun = rerun_headers()

    waiting = http.post("/", headers=rerun)

    assert waiting.status_code == 409 and waiting.text.startswith("in_progress") and FIRST in waiting.text
    assert len(api.requests) == 1
    assert run_record(collection)["execution"] == FIRST
    api.states[FIRST] = "failed"
    deliver(http, hours_later=1, job=configuration.current().audit_job)  # the audit follows it
    rerun_now = http.post("/", headers=rerun)  # the re-run's retry
    assert rerun_now.status_code == 200 and SECOND in rerun_now.text
    assert len(api.requests) == 2


def every_minute(monkeypatch):
    """The job `nightly` every minute, overlap: skip (the default): its next run comes within the lease of one whose
    start is in flight (a start call takes at most job.CALL_TIMEOUT_SECONDS)."""
    job = {"schedule": "* * * * *", "time_zone": "Etc/UTC"}
    configured(monkeypatch, lambda loaded: loaded.with_jobs({"nightly": job}))


def deliver_minute(http, minutes):
    moment = SCHEDULED + dt.timedelta(minutes=minutes)
    CLOCK[0] = max(CLOCK[0], moment + dt.timedelta(seconds=30))
    return http.post("/", headers=scheduler_headers("nightly", moment.isoformat().replace("+00:00", "Z")))


def minute_record(collection, minutes):
    config = configuration.current()
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
{%- if cookiecutter.target == "cloud_run_job" %}


# The job's tasks (cloud_run_job/task.py) where two executions of one run id meet at an item -----------------------

ITEM = "item-001"  # of the job's sample input


@pytest.fixture
def job_store(collection, api, monkeypatch):
    """The job's store on this test's collection; its tasks read their peers' executions from the fake API."""
    monkeypatch.setattr(holders, "executions_client", job.executions_client)  # the api fixture's reader
    return lambda lease_seconds: JobStore(configuration.current(), dt.timedelta(seconds=lease_seconds))


def task_of_execution(execution):
    """The one task of execution `execution` (its CLOUD_RUN_EXECUTION) of the run of SCHEDULED, on its last attempt."""
    env = {"DEDUP_RUN_ID": run_key().run_id, "CLOUD_RUN_EXECUTION": execution, "JOB_MAX_RETRIES": "0"}
    return task.TaskSettings.from_env(env)


def output_of(store, item_id):
    (output,) = [output for output in store.outputs_of(run_key().run_id) if output.get("item_id") == item_id]
    return output


def waiting_lines(log_lines, event="waiting"):
    return [line for line in log_lines() if line.get("event") == event]


@pytest.mark.parametrize("end", ["cancelled", "deleted"])
def test_an_item_an_ended_execution_held_is_taken_over_by_the_rerun_at_once(
    http, collection, api, job_store, monkeypatch, log_lines, end
):
    """The first execution is cancelled (or deleted) while its task holds an item (the task is killed: its lease
    stays); the re-run meets the item: waiting out a lease of hours would fail every attempt, and the run, though the
    work is fine."""
    store = job_store(6 * 3600)
    deliver(http)
    store.claim(run_key().run_id, ITEM, Worker("run-1", 0, 0), CLOCK[0])
    if end == "cancelled":
        api.states[FIRST] = "cancelled"
    else:
        del api.states[FIRST]  # GetExecution answers NOT_FOUND
    deliver(http, hours_later=1, job=configuration.current().audit_job)
    assert run_record(collection)["status"] == "failed"
    assert http.post("/", headers=rerun_headers()).status_code == 200 and api.states[SECOND] == "running"

    def never(seconds):
        raise AssertionError(f"waited {seconds} s for an item an ended execution held")

    monkeypatch.setattr(task, "wait", never)

    outcomes = task.run_task(task_of_execution("run-2"), store)

    assert set(outcomes.values()) == {"done"}  # taken over at once
    (line,) = waiting_lines(log_lines, "taken_over")
    assert line["holder"] == "run-1" and FIRST in line["message"]
    assert output_of(store, ITEM).get("execution") == "run-2"
    api.states[SECOND] = "succeeded"
    deliver(http, hours_later=2, job=configuration.current().audit_job)
    assert run_record(collection)["status"] == "completed"


@pytest.mark.parametrize("holder_then", ["finishes_the_item", "is_cancelled"])
def test_an_item_a_live_execution_holds_is_waited_for_with_a_line(
    http, collection, api, job_store, monkeypatch, log_lines, holder_then
):
    """An execution beside the recorded one (an operator's `gcloud run jobs execute`) holds an item and runs on: the
    recorded one's task waits, says so, and leaves the item to it, or takes it over once it has ended."""
    store = job_store(600)
    deliver(http)  # the recorded execution, FIRST, whose task this is
    held = store.claim(run_key().run_id, ITEM, Worker("run-2", 0, 0), CLOCK[0])
    api.states[SECOND] = "running"  # the one beside it
    waits = []

    def meanwhile(seconds):
        waits.append(seconds)
        CLOCK[0] += dt.timedelta(seconds=seconds)
        if len(waits) < 3:
            return
        if holder_then == "finishes_the_item":
            store.put_output_if_absent(run_key().run_id, ITEM, {"execution": "run-2"}, CLOCK[0])
            store.finish(held, CLOCK[0])
        else:
            api.states[SECOND] = "cancelled"

    monkeypatch.setattr(task, "wait", meanwhile)

    outcomes = task.run_task(task_of_execution("run-1"), store)

    assert waits == [task.HOLDER_POLL_SECONDS] * 3  # polled, never past the lease (600 s)
    (line,) = waiting_lines(log_lines)  # one line, not one per poll
    assert line["holder"] == "run-2" and line["holder_state"] == "running" and "still runs" in line["message"]
    if holder_then == "finishes_the_item":
        assert outcomes[ITEM] == "already finished" and output_of(store, ITEM).get("execution") == "run-2"
    else:
        assert outcomes[ITEM] == "done" and output_of(store, ITEM).get("execution") == "run-1"
        assert [line["holder"] for line in waiting_lines(log_lines, "taken_over")] == ["run-2"]


def test_an_item_whose_holder_cannot_be_read_waits_out_the_lease_saying_so(
    http, collection, api, job_store, monkeypatch, log_lines
):
    """The job's account cannot read the executions (its roles/run.viewer grant missing): the lease is trusted to its
    end, with a line that says why, then the item is taken over."""
    store = job_store(25)
    deliver(http)
    store.claim(run_key().run_id, ITEM, Worker("run-2", 0, 0), CLOCK[0])
    api.get_failures[SECOND] = grpc.StatusCode.PERMISSION_DENIED
    waits = []

    def meanwhile(seconds):
        waits.append(seconds)
        CLOCK[0] += dt.timedelta(seconds=seconds)

    monkeypatch.setattr(task, "wait", meanwhile)

    outcomes = task.run_task(task_of_execution("run-1"), store)

    assert outcomes[ITEM] == "done"
    assert waits[:2] == [task.HOLDER_POLL_SECONDS] * 2 and 0 < waits[2] <= 5.01 and len(waits) == 3
    (line,) = waiting_lines(log_lines)
    assert line["holder_state"] == "unknown" and "PermissionDenied" in line["message"]
{%- else %}


# The workflow's guard (workflow/workflow.yaml) where two executions of one run id meet ----------------------------

SIDE_EFFECT = "side effect for the run"


class Executions:
    """The workflow's executions, run through the runner: each by its name, with the argument the handler sent."""

    def __init__(self, api, emulator_host):
        self.api, self.emulator_host, self.runs = api, emulator_host, {}

    def run(self, name, argument_of=FIRST, **options):
        """Runs execution `name` (of the run FIRST was started for) to its end (the runner's `options`: cancel_before,
        fail_at, before, sleep); returns its result, or "cancelled"; the fake then shows its end."""
        import json  # the workflow's argument, as the handler sent it

        (request,) = [request for started, request, _ in self.api.started if started == argument_of]
        config = configuration.current()
        env = {"DEDUP_PROJECT": config.project, "DEDUP_COLLECTION": config.collection}
        run = self.runs[name] = Run(
            name, json.loads(request.execution.argument), env, self.emulator_host, job.executions_client(), **options
        )
        self.api.states[name] = "running"
        try:
            result = run()
        except Cancelled:
            self.api.states[name] = "cancelled"
            return "cancelled"
        except Exception:
            self.api.states[name] = "failed"
            raise
        self.api.states[name] = "succeeded"
        return result

    def side_effects(self):
        lines = [line for run in self.runs.values() for line in run.logged]
        return sum(line.get("json", {}).get("message") == SIDE_EFFECT for line in lines)


@pytest.fixture
def executions(api, emulator_host):
    return Executions(api, emulator_host)


def guard_of(collection):
    """The run's guard: <collection>_workflow/<run_id>, beside the run records."""
    return collection._client.collection(f"{collection.id}_workflow").document(run_key().run_id)


def guard(collection):
    return guard_of(collection).get().to_dict()


@pytest.mark.parametrize("owner_end", ["cancelled", "failed", "deleted"])
def test_a_rerun_after_the_guards_owner_ended_runs_the_side_effect_exactly_once(
    http, collection, api, executions, owner_end
):
    """The first execution takes the guard and ends before its side effect: cancelled (no handler runs), failed (a
    timeout, say, where its handler could not run) or deleted; the re-run (`runs.py rerun`) must run it."""
    deliver(http)
    assert executions.run(FIRST, cancel_before="side_effect") == "cancelled"
    if owner_end == "failed":
        api.states[FIRST] = "failed"
    elif owner_end == "deleted":
        del api.states[FIRST]
    deliver(http, hours_later=1, job=configuration.current().audit_job)
    assert run_record(collection)["status"] == "failed"
    assert http.post("/", headers=rerun_headers()).status_code == 200

    result = executions.run(SECOND)

    assert result == {"run_id": run_key().run_id, "outcome": "processed"}
    assert executions.side_effects() == 1
    assert guard(collection)["status"] == "completed" and guard(collection)["execution"] == "run-2"
    deliver(http, hours_later=2, job=configuration.current().audit_job)
    assert run_record(collection)["status"] == "completed"


def test_a_rerun_after_a_failed_side_effect_runs_it_again(http, collection, api, executions):
    """The side effect failed: its handler marked the guard failed, and the execution failed; the re-run runs it."""
    deliver(http)
    with pytest.raises(Raised, match="injected"):
        executions.run(FIRST, fail_at="side_effect")
    assert guard(collection)["status"] == "failed"
    deliver(http, hours_later=1, job=configuration.current().audit_job)
    assert http.post("/", headers=rerun_headers()).status_code == 200

    assert executions.run(SECOND)["outcome"] == "processed"
    assert guard(collection)["status"] == "completed" and executions.side_effects() == 1


@pytest.mark.parametrize("owner_then", ["completes", "is_cancelled"])
def test_an_execution_meeting_the_guard_of_one_still_running_waits_for_it(
    http, collection, api, executions, owner_then
):
    """An execution beside the recorded one (started by hand: `gcloud workflows run`) meets the guard of the running
    one: it waits, never runs the side effect beside it; then answers duplicate, or takes over once it was cancelled."""
    deliver(http)
    assert executions.run(FIRST, cancel_before="side_effect") == "cancelled"
    api.states[FIRST] = "running"  # stopped at its side effect: still running, as far as the API says
    waits = []

    def meanwhile(seconds):
        waits.append(seconds)
        if len(waits) < 2:
            return
        if owner_then == "completes":
            guard_of(collection).update({"status": "completed"})
            api.states[FIRST] = "succeeded"
        else:
            api.states[FIRST] = "cancelled"

    result = executions.run(SECOND, sleep=meanwhile)

    assert waits == [30, 30]
    said = [line for line in executions.runs[SECOND].logged if line["severity"] == "WARNING"]
    assert FIRST in said[0]["json"]["owner"] and "still runs" in said[0]["json"]["message"]
    if owner_then == "completes":
        assert result["outcome"] == "duplicate" and executions.side_effects() == 0
    else:
        assert result["outcome"] == "processed" and executions.side_effects() == 1
        assert guard(collection)["taken_over_from"] == "run-1"


def test_of_two_executions_finding_the_owner_ended_one_takes_the_guard_over(http, collection, api, executions):
    """Both read the guard of a cancelled owner, then both write their takeover: the write is conditional on the
    guard's update time, so the later one is refused, reads the guard again and leaves the side effect to the other."""
    deliver(http)
    assert executions.run(FIRST, cancel_before="side_effect") == "cancelled"
    both_read = threading.Barrier(2, timeout=30)
    names = [SECOND, f"{TARGET}/executions/run-3"]
    done = {name: threading.Event() for name in names}
    results = {}

    def run(name):
        other = next(other for other in names if other != name)
        try:
            results[name] = executions.run(
                name,
                before=lambda step: both_read.wait() if step == "take_over" else None,
                sleep=lambda seconds: done[other].wait(30),  # waiting for the winner: let it finish
            )
        finally:
            done[name].set()

    threads = [threading.Thread(target=run, args=(name,)) for name in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    assert sorted(result["outcome"] for result in results.values()) == ["duplicate", "processed"]
    assert executions.side_effects() == 1
    assert guard(collection)["status"] == "completed"
{%- endif %}
{%- endif %}
