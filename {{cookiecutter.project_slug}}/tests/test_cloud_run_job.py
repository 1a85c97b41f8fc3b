"""The Cloud Run job: tasks as real subprocesses (environment set like Cloud Run) against the emulator,
SIGKILLed at each point of an item's life and retried; then `verify` counts the outputs."""

import collections
import datetime as dt
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from conftest import PROJECT, config_file

import config
import dedup
from cloud_run_job.__main__ import job_config, open_store
from cloud_run_job.stages import STAGES
from cloud_run_job.store import ItemBusy, ItemStatus, JobStore, LeaseLost, Worker, decide
from cloud_run_job.task import SAMPLE_INPUT, SettingError, TaskSettings, load_snapshot, task_of
from dedup import Decision

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = load_snapshot(SAMPLE_INPUT)
STAGE_NAMES = [name for name, _ in STAGES]
TASKS = 2
NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


class Job:
    """One run of the job: starts its tasks as `python -m cloud_run_job`, like Cloud Run would."""

    def __init__(self, collection_name: str, workdir: Path, input_path: Path = SAMPLE_INPUT, **env: str) -> None:
        self.run_id = hashlib.sha256(uuid.uuid4().bytes).hexdigest()
        self.env = {
            **{name: value for name, value in os.environ.items() if name != "JOB_CRASH_AT"},
            # The test's project and collection, as the image's config.yaml would name them.
            **config_file(workdir / "config.yaml", project=PROJECT, collection=collection_name),
            "DEDUP_RUN_ID": self.run_id,
            "DEDUP_SCHEDULE_TIME": "2026-06-01T12:00:00Z",
            "CLOUD_RUN_TASK_COUNT": str(TASKS),
            "CLOUD_RUN_EXECUTION": f"sample-job-{uuid.uuid4().hex[:5]}",
            "JOB_INPUT": str(input_path),
            "JOB_LEASE_SECONDS": "60",
            "JOB_MAX_RETRIES": "3",
            **env,
        }
        self.log = []

    def task(self, index: int, attempt: int = 0, **env: str) -> subprocess.CompletedProcess:
        env = {**self.env, "CLOUD_RUN_TASK_INDEX": str(index), "CLOUD_RUN_TASK_ATTEMPT": str(attempt), **env}
        result = self.command("run", env=env)
        self.log += [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
        return result

    def command(self, *args: str, env=None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "cloud_run_job", *args],
            cwd=ROOT,
            env=env or self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    def verify(self) -> subprocess.CompletedProcess:
        return self.command("verify", self.run_id)

    def stage_runs(self, item_id: str) -> dict[str, int]:
        """How often each stage of an item was built, over every attempt (one log line per build)."""
        built = [line for line in self.log if line.get("event") == "stage_built" and line["item_id"] == item_id]
        return {name: sum(line["stage"] == name for line in built) for name in STAGE_NAMES}


@pytest.fixture
def store(collection):
    return JobStore(config.current(), lease=dt.timedelta(seconds=60))


@pytest.fixture
def job(collection, tmp_path):
    return Job(collection.id, tmp_path)


def outputs_per_item(store, run_id):
    return collections.Counter(output.get("item_id") for output in store.outputs_of(run_id))


def first_item_of_task(index):
    return next(item["id"] for item in SAMPLE.items if task_of(item["id"], TASKS) == index)


# Partition and settings ---------------------------------------------------------------------------


@pytest.mark.parametrize("task_count", [1, 2, 3, 7])
def test_partition_gives_every_item_to_exactly_one_task_whatever_the_order(task_count):
    ids = [f"item-{n}" for n in range(200)]
    shuffled = random.Random(task_count).sample(ids, len(ids))
    owners = {item_id: task_of(item_id, task_count) for item_id in ids}
    assert {item_id: task_of(item_id, task_count) for item_id in shuffled} == owners
    assert set(owners.values()) == set(range(task_count))


def test_snapshot_version_names_the_content(tmp_path):
    same, changed = tmp_path / "same.json", tmp_path / "changed.json"
    items = json.loads(SAMPLE_INPUT.read_text())
    same.write_text(json.dumps(items, indent=4))  # formatting alone is not a new snapshot
    changed.write_text(json.dumps(items[:-1]))
    assert load_snapshot(same).version == SAMPLE.version
    assert load_snapshot(changed).version != SAMPLE.version
    assert len(SAMPLE.version) == len("sha256:") + 64


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        ('{"id": "a"}', "must be a JSON list of objects"),
        ("[1, 2]", "must be a JSON list of objects"),
        ('[{"id": "a/b"}]', "id='a/b': must be 1-200 letters"),
        ('[{"text": "no id"}]', "id=None: must be 1-200 letters"),
        ('[{"id": "a"}, {"id": "a"}]', "id='a': appears twice"),
        ("[{", "cannot be read as JSON"),
    ],
)
def test_bad_input_snapshot_is_refused_with_a_reason(tmp_path, content, reason):
    path = tmp_path / "items.json"
    path.write_text(content)
    with pytest.raises(SettingError, match=reason):
        load_snapshot(path)


@pytest.mark.parametrize(
    ("env", "reason"),
    [
        ({"DEDUP_RUN_ID": ""}, "DEDUP_RUN_ID='': must be the 64-hex run id"),
        ({"DEDUP_RUN_ID": "A" * 64}, "DEDUP_RUN_ID='A"),
        ({"CLOUD_RUN_TASK_INDEX": "2", "CLOUD_RUN_TASK_COUNT": "2"}, "CLOUD_RUN_TASK_INDEX=2: must be below"),
        ({"CLOUD_RUN_TASK_COUNT": "0"}, "CLOUD_RUN_TASK_COUNT='0': must be a whole number of at least 1"),
        ({"CLOUD_RUN_TASK_ATTEMPT": "-1"}, "CLOUD_RUN_TASK_ATTEMPT='-1'"),
        ({"CLOUD_RUN_TASK_COUNT": "²"}, "CLOUD_RUN_TASK_COUNT='²': must be a whole number of at least 1"),
        ({"JOB_MAX_RETRIES": "1.5"}, "JOB_MAX_RETRIES='1.5'"),
        ({"DEDUP_SCHEDULE_TIME": "yesterday"}, "DEDUP_SCHEDULE_TIME='yesterday': is not an RFC 3339"),
    ],
)
def test_bad_task_settings_are_refused_naming_variable_value_and_rule(env, reason):
    with pytest.raises(SettingError, match=reason):
        TaskSettings.from_env({"DEDUP_RUN_ID": "a" * 64, **env})


def test_the_jobs_place_and_retention_are_the_deploys_over_the_images_config_yaml():
    """The module sets them on the job at each deploy; the image's config.yaml is only as new as its build."""
    image = config.current()
    assert job_config({}) == image
    deployed = {"DEDUP_PROJECT": "deployed-proj", "DEDUP_DATABASE": "deployed-db", "DEDUP_COLLECTION": "deployed"}
    changed = job_config({**deployed, "DEDUP_RETENTION_SECONDS": "3600"})
    assert (changed.project, changed.database, changed.collection) == ("deployed-proj", "deployed-db", "deployed")
    assert changed.retention == dt.timedelta(hours=1) and changed.jobs == image.jobs
    with pytest.raises(SettingError, match="DEDUP_RETENTION_SECONDS='1h': must be a whole number of at least 1"):
        job_config({"DEDUP_RETENTION_SECONDS": "1h"})


@pytest.mark.parametrize(("text", "seconds"), [(None, 600), ("7", 7), ("1.5", None), ("0", None), ("²", None)])
def test_the_item_lease_is_read_from_job_lease_seconds(collection, monkeypatch, text, seconds):
    if text is not None:
        monkeypatch.setenv("JOB_LEASE_SECONDS", text)
    if seconds is None:
        with pytest.raises(SettingError, match=f"JOB_LEASE_SECONDS={text!r}: must be a whole number of at least 1"):
            open_store()
    else:
        assert open_store().lease == dt.timedelta(seconds=seconds)


def test_bad_settings_exit_2_before_touching_anything(job, store):
    result = job.task(0, DEDUP_RUN_ID="not-a-run-id")
    assert result.returncode == 2
    assert result.stderr.strip() == "error: DEDUP_RUN_ID='not-a-run-id': must be the 64-hex run id the handler passes"
    assert store.run("not-a-run-id") is None


# The item state machine ----------------------------------------------------------------------------

WORKER = Worker("ex-1", 0, 1)
LATER = NOW + dt.timedelta(minutes=1)


def held(status, owner, attempt, expires=LATER):
    return {"status": status, "lease_owner": owner, "lease_attempt": attempt, "lease_expires": expires}


@pytest.mark.parametrize(
    ("record", "take"),
    [
        (None, Decision.TAKE_OVER),
        ({"status": "queued"}, Decision.TAKE_OVER),
        ({"status": "done"}, Decision.DUPLICATE),
        ({"status": "failed"}, Decision.DUPLICATE),
        (held("running", "ex-2/0", 0, expires=NOW), Decision.TAKE_OVER),  # the holder's lease ran out
        (held("running", "ex-2/0", 0), Decision.IN_PROGRESS),
        (held("checkpointed", "ex-1/0", 0), Decision.TAKE_OVER),  # an earlier attempt of this very task: it is dead
        (held("checkpointed", "ex-1/0", 1), Decision.IN_PROGRESS),
        (held("running", "ex-1/1", 0), Decision.IN_PROGRESS),  # another task of the same execution
    ],
)
def test_decide(record, take):
    assert decide(record, WORKER, NOW) is take


# Whole runs, crashes and retries -------------------------------------------------------------------


def test_tasks_produce_exactly_one_output_per_item_and_verify_passes(job, store):
    assert [job.task(index).returncode for index in range(TASKS)] == [0, 0]

    assert outputs_per_item(store, job.run_id) == {item["id"]: 1 for item in SAMPLE.items}
    for item in SAMPLE.items:
        assert job.stage_runs(item["id"]) == dict.fromkeys(STAGE_NAMES, 1)
    assert {state["status"] for state in store.items_of(job.run_id).values()} == {"done"}
    assert store.run(job.run_id)["input_version"] == SAMPLE.version
    result = job.verify()
    assert result.returncode == 0, result.stdout
    assert result.stdout.strip().endswith("6 items, 6 outputs, 0 problem(s)")


# (JOB_CRASH_AT point, stages the retry must rebuild, attempt whose output must survive)
CRASHES = {
    "before-a-checkpoint": ("checkpoint.transform", ["transform"], 1),
    "after-artifact-before-output": ("output", [], 1),
    "before-final-status": ("done", [], 0),
}


@pytest.mark.parametrize("crash", list(CRASHES), ids=list(CRASHES))
def test_sigkill_then_retry_leaves_exactly_one_output_per_item(job, store, crash):
    point, rebuilt, committed_by = CRASHES[crash]
    victim = first_item_of_task(0)

    killed = job.task(0, attempt=0, JOB_CRASH_AT=f"{point}:{victim}")
    assert killed.returncode == -signal.SIGKILL
    assert store.items_of(job.run_id)[victim]["status"] in ("running", "checkpointed")
    retried = job.task(0, attempt=1)  # Cloud Run's retry of the same task
    other = job.task(1)

    assert (retried.returncode, other.returncode) == (0, 0), retried.stdout[-2000:] + retried.stderr[-2000:]
    assert outputs_per_item(store, job.run_id) == {item["id"]: 1 for item in SAMPLE.items}
    (output,) = [o for o in store.outputs_of(job.run_id) if o.get("item_id") == victim]
    assert output.get("attempt") == committed_by
    # The retry resumed from the last checkpoint: only the stages after it were built again.
    assert job.stage_runs(victim) == {name: 1 + (name in rebuilt) for name in STAGE_NAMES}
    verified = job.verify()
    assert verified.returncode == 0, verified.stdout


def test_a_second_execution_of_the_same_run_changes_nothing(job, store):
    for index in range(TASKS):
        job.task(index)
    first_outputs = {o.id: o.update_time for o in store.outputs_of(job.run_id)}

    job.env["CLOUD_RUN_EXECUTION"] += "-again"  # e.g. RunJob called twice for one run id
    again = [job.task(index) for index in range(TASKS)]

    assert [result.returncode for result in again] == [0, 0]
    assert {o.id: o.update_time for o in store.outputs_of(job.run_id)} == first_outputs
    for item in SAMPLE.items:
        assert job.stage_runs(item["id"]) == dict.fromkeys(STAGE_NAMES, 1)


def test_verify_fails_when_an_item_has_no_output(job):
    job.task(0)  # task 1 never ran
    result = job.verify()

    assert result.returncode == 1
    missing = sorted(item["id"] for item in SAMPLE.items if task_of(item["id"], TASKS) == 1)
    assert [line.split(":")[0] for line in result.stdout.splitlines()[:-1]] == [f"item {m}" for m in missing]
    assert "0 outputs, expected 1 (item: never started)" in result.stdout


def test_verify_fails_when_an_output_was_overwritten(job, store):
    for index in range(TASKS):
        job.task(index)
    victim = first_item_of_task(0)
    store.outputs.document(f"{job.run_id}:{victim}").set({"run_id": job.run_id, "item_id": victim})

    result = job.verify()
    assert result.returncode == 1
    assert f"item {victim}: output overwritten after it was committed" in result.stdout


def test_verify_refuses_a_malformed_run_id(job):
    result = job.command("verify", "../other")
    assert result.returncode == 2
    assert "RUN_ID='../other': must be a 64-hex run id" in result.stderr


def test_a_run_keeps_the_input_snapshot_it_started_with(job, store, tmp_path):
    assert job.task(0).returncode == 0
    changed = tmp_path / "items.json"
    changed.write_text(json.dumps([*SAMPLE.items, {"id": "item-new", "text": "added mid-run"}]))

    result = job.task(1, JOB_INPUT=str(changed))

    assert result.returncode == 2
    assert f"started with input {SAMPLE.version}" in result.stderr
    assert "item-new" not in outputs_per_item(store, job.run_id)


# Failures ------------------------------------------------------------------------------------------


def test_terminal_item_failure_is_dead_lettered_and_never_retried(collection, store, tmp_path):
    path = tmp_path / "items.json"
    path.write_text(json.dumps([{"id": "good", "text": "fine words"}, {"id": "bad", "text": "   "}]))
    job = Job(collection.id, tmp_path, path, CLOUD_RUN_TASK_COUNT="1")

    first = job.task(0)
    retry = job.task(0, attempt=1)

    assert (first.returncode, retry.returncode) == (0, 0)  # retrying cannot help, so the task succeeds
    assert outputs_per_item(store, job.run_id) == {"good": 1}
    bad = store.items_of(job.run_id)["bad"]
    assert bad["status"] == "failed"
    assert bad["failure"]["stage"] == "parse" and "text='   ': must be a non-empty string" in bad["failure"]["error"]
    letter = store.dead_letters.document(f"{job.run_id}:bad").get().to_dict()
    assert letter["item_id"] == "bad" and letter["stage"] == "parse" and letter["attempt"] == 0
    verified = job.verify()
    assert verified.returncode == 1
    assert "item bad: 0 outputs" in verified.stdout and "must be a non-empty string" in verified.stdout


def test_exhausted_retries_leave_a_report(collection, store, tmp_path):
    job = Job(collection.id, tmp_path, CLOUD_RUN_TASK_COUNT="1", JOB_MAX_RETRIES="1")
    victim = SAMPLE.items[0]["id"]
    failing = {"JOB_CRASH_AT": f"output:{victim}:error"}

    first = job.task(0, attempt=0, **failing)
    assert first.returncode == 1
    assert "reports" not in store.run(job.run_id)  # Cloud Run still has a retry left
    last = job.task(0, attempt=1, **failing)

    assert last.returncode == 1
    report = store.run(job.run_id)["reports"]["0"]
    assert report["attempt"] == 1
    assert list(report["unfinished"]) == [victim]
    assert "injected retryable failure at output" in report["unfinished"][victim]
    assert len(report["finished"]) == len(SAMPLE.items) - 1
    assert outputs_per_item(store, job.run_id)[victim] == 0


# Leases ----------------------------------------------------------------------------------------------


def claim_at_once(store, run_id, workers):
    """Every worker claims the same item at the same moment; returns the winners and the losers."""
    barrier = threading.Barrier(len(workers))
    won, lost = [], []

    def race(worker):
        barrier.wait()
        try:
            won.append(store.claim(run_id, "item", worker, dedup.utcnow()).worker)
        except ItemBusy:
            lost.append(worker)

    racers = [threading.Thread(target=race, args=(worker,)) for worker in workers]
    for racer in racers:
        racer.start()
    for racer in racers:
        racer.join(timeout=30)
    return won, lost


def test_two_workers_racing_for_one_item_exactly_one_wins(store):
    for round_ in range(3):
        run_id = hashlib.sha256(f"race-{round_}".encode()).hexdigest()
        won, lost = claim_at_once(store, run_id, [Worker(f"ex-{n}", 0, 0) for n in range(2)])

        assert (len(won), len(lost)) == (1, 1)
        assert store.items_of(run_id)["item"]["lease_owner"] == won[0].task


def test_a_live_lease_is_respected_and_an_expired_one_taken_over(store):
    run_id = "b" * 64
    holder = store.claim(run_id, "item", Worker("ex-1", 0, 0), NOW)

    with pytest.raises(ItemBusy):
        store.claim(run_id, "item", Worker("ex-2", 0, 0), NOW + dt.timedelta(seconds=59))
    successor = store.claim(run_id, "item", Worker("ex-2", 0, 0), NOW + dt.timedelta(seconds=61))

    with pytest.raises(LeaseLost):  # the old holder wakes up: none of its writes land
        store.checkpoint(holder, "parse", "nowhere", NOW + dt.timedelta(seconds=62))
    with pytest.raises(LeaseLost):
        store.finish(holder, NOW + dt.timedelta(seconds=62))
    store.finish(successor, NOW + dt.timedelta(seconds=63))
    assert store.items_of(run_id)["item"]["status"] == ItemStatus.DONE


def test_a_zombie_holder_cannot_overwrite_the_artifact_the_new_holder_checkpointed(store):
    run_id = "d" * 64
    zombie = store.claim(run_id, "item", Worker("ex-1", 0, 0), NOW)
    successor = store.claim(run_id, "item", Worker("ex-2", 0, 0), NOW + dt.timedelta(seconds=61))
    successor = store.checkpoint(
        successor, "parse", store.save_artifact(successor, "parse", {"by": "successor"}, NOW), NOW
    )

    # The zombie wakes up after its lease and saves its artifact; only its checkpoint is refused.
    store.save_artifact(zombie, "parse", {"by": "zombie"}, NOW + dt.timedelta(seconds=62))
    with pytest.raises(LeaseLost):
        store.checkpoint(zombie, "parse", "nowhere", NOW + dt.timedelta(seconds=62))
    resumed = store.claim(run_id, "item", Worker("ex-2", 0, 1), NOW + dt.timedelta(seconds=63))
    assert store.load_artifact(resumed.artifact) == {"by": "successor"}


def test_watchdog_reports_expired_leases_and_reset_lets_another_execution_resume(collection, store, tmp_path):
    job = Job(collection.id, tmp_path, JOB_LEASE_SECONDS="1")
    victim = first_item_of_task(0)
    job.task(0, JOB_CRASH_AT=f"checkpoint.transform:{victim}")
    job.task(1)
    time.sleep(1.1)  # the killed attempt's 1 s lease runs out
    live = store.claim("c" * 64, "busy-item", Worker("ex-live", 0, 0), dedup.utcnow())  # a live holder

    report = job.command("watchdog")
    reset = job.command("watchdog", "--reset")
    after = job.command("watchdog")

    assert report.returncode == 1
    (stuck,) = [json.loads(line) for line in report.stdout.splitlines() if line.startswith("{")]
    assert (stuck["item_id"], stuck["status"], stuck["last_stage"]) == (victim, "checkpointed", "parse")
    assert live.item_id not in report.stdout
    assert reset.returncode == 0 and '"reset": true' in reset.stdout
    assert after.returncode == 0 and after.stdout.startswith("0 item(s)")
    assert store.items_of(job.run_id)[victim]["status"] == "queued"
    job.env["CLOUD_RUN_EXECUTION"] += "-manual"  # an operator re-executes the run after the reset
    assert job.task(0).returncode == 0
    assert job.stage_runs(victim) == {"parse": 1, "transform": 2, "render": 1}
    assert job.verify().returncode == 0
