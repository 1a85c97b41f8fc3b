"""The job's durable state, and the only job code that touches Firestore.

Same layer as the run ledger (ledger.py: its client, bounded-time call and GuardedRecords): every write is conditional,
so no transaction is needed. Five collections, named after the run records' collection C:

    C_job_runs/{run_id}                  the input snapshot's version the run started with; task reports
    C_job_items/{run_id}:{item_id}       the checkpoint: status, lease, last finished stage, its artifact
    C_job_artifacts/{run_id}:{item_id}:{stage}:{holder}   a stage's result, one per holder of the item
    C_job_outputs/{run_id}:{item_id}     THE effect: created once (put-if-absent), never overwritten
    C_job_dead_letters/{run_id}:{item_id}   an item that failed terminally, with its context

An item moves through queued -> running -> checkpointed (per stage) -> done | failed. A holder owns it
while the item's update time is the one its last write returned; a lease that expires (or a later
attempt of the same Cloud Run task) lets another worker take it over, after which the old holder's
writes fail with LeaseLost.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
from collections.abc import Mapping

from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

from config import Config
from dedup import Decision
from ledger import READ_RETRY, GuardedRecords, RecordChanged, firestore_call, firestore_client


class ItemStatus(enum.StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    CHECKPOINTED = "checkpointed"
    DONE = "done"
    FAILED = "failed"


HELD = (ItemStatus.RUNNING, ItemStatus.CHECKPOINTED)


class ItemBusy(Exception):
    """Another worker holds the item's live lease: `holder` its execution, `until` when the lease expires (both None
    when another worker claimed it between this one's read and write)."""

    def __init__(self, message: str, holder: str | None = None, until: dt.datetime | None = None) -> None:
        super().__init__(message)
        self.holder, self.until = holder, until


class LeaseLost(Exception):
    """This worker's lease expired and another worker took the item over; its writes are refused."""


class SnapshotMismatch(Exception):
    """The run was started with another input snapshot; mixing two would make outputs incomparable."""


@dataclasses.dataclass(frozen=True)
class Worker:
    """One attempt of one Cloud Run task: CLOUD_RUN_EXECUTION, CLOUD_RUN_TASK_INDEX, CLOUD_RUN_TASK_ATTEMPT."""

    execution: str
    task_index: int
    attempt: int

    @property
    def task(self) -> str:
        return f"{self.execution}/{self.task_index}"


def holder_of(record: Mapping[str, object]) -> str:
    """The execution whose task holds the item (lease_owner is Worker.task: execution/task index)."""
    return str(record["lease_owner"]).rpartition("/")[0]


def decide(
    record: Mapping[str, object] | None, worker: Worker, now: dt.datetime, ended: frozenset[str] = frozenset()
) -> Decision:
    """May this worker take the item? The item state machine's one decision, in dedup.Decision's names
    (DUPLICATE: done or failed, nothing left to do; IN_PROGRESS: another worker's live lease). `ended`: executions
    known to have ended (holders.holder), whose leases are dead before they expire."""
    if record is None or record["status"] == ItemStatus.QUEUED:
        return Decision.TAKE_OVER
    if record["status"] in (ItemStatus.DONE, ItemStatus.FAILED):
        return Decision.DUPLICATE
    if record["lease_expires"] <= now or holder_of(record) in ended:
        return Decision.TAKE_OVER
    # Cloud Run starts a task's next attempt only after the previous one ended, so a later attempt
    # of the same task may take over at once instead of waiting for a dead attempt's lease.
    if record["lease_owner"] == worker.task and record["lease_attempt"] < worker.attempt:
        return Decision.TAKE_OVER
    return Decision.IN_PROGRESS


@dataclasses.dataclass(frozen=True)
class ItemLease:
    """This worker holds the item while its update time is still `write_time`."""

    run_id: str
    item_id: str
    worker: Worker
    write_time: dt.datetime
    last_stage: str | None  # the last stage whose artifact is saved: a retry resumes after it
    artifact: str | None  # where that artifact lives


def item_key(run_id: str, item_id: str) -> str:
    return f"{run_id}:{item_id}"


class JobStore:
    def __init__(self, config: Config, lease: dt.timedelta, client: firestore.Client | None = None):
        self.client = client or firestore_client(config.project, config.database)
        self._call = functools.partial(firestore_call, database=config.database_name)
        self.records = GuardedRecords(self.client, self._call)
        self.lease = lease
        self.retention = config.retention
        prefix = f"{config.collection}_job"
        self.runs = self.client.collection(f"{prefix}_runs")
        self.items = self.client.collection(f"{prefix}_items")
        self.artifacts = self.client.collection(f"{prefix}_artifacts")
        self.outputs = self.client.collection(f"{prefix}_outputs")
        self.dead_letters = self.client.collection(config.dead_letters_collection)

    # The run -------------------------------------------------------------------------------------

    def start_run(self, run_id: str, input_version: str, item_count: int, fields: Mapping[str, object], now) -> None:
        """Records the snapshot the run uses (first task wins); SnapshotMismatch if it was another."""
        record = {"input_version": input_version, "item_count": item_count, "started_at": now, **fields}
        if self._create(self.runs.document(run_id), record | {"expire_at": now + self.retention}):
            return
        recorded = self.run(run_id) or {}
        if recorded.get("input_version") != input_version:
            raise SnapshotMismatch(
                f"run {run_id} started with input {recorded.get('input_version')}, this task has {input_version}"
            )

    def run(self, run_id: str) -> dict | None:
        snapshot = self._call(self.runs.document(run_id).get, retry=READ_RETRY)
        return snapshot.to_dict() if snapshot.exists else None

    def write_report(self, run_id: str, worker: Worker, report: Mapping[str, object]) -> None:
        """A task's last word when its retries are exhausted (merged: tasks report side by side)."""
        entry = {"execution": worker.execution, "attempt": worker.attempt, **report}
        reports = {"reports": {str(worker.task_index): entry}}
        self._call(self.runs.document(run_id).set, reports, merge=True, retry=None)

    # Items ---------------------------------------------------------------------------------------

    def enqueue(self, run_id: str, item_ids: list[str], worker: Worker, now: dt.datetime) -> None:
        """Makes the task's items visible as queued (to verify and watchdog) before any is started."""
        for item_id in item_ids:
            record = {
                "run_id": run_id,
                "item_id": item_id,
                "status": ItemStatus.QUEUED.value,
                "task_index": worker.task_index,
                "attempts": 0,
                "expire_at": now + self.retention,
            }
            self._create(self.items.document(item_key(run_id, item_id)), record)

    def claim(
        self, run_id: str, item_id: str, worker: Worker, now: dt.datetime, ended: frozenset[str] = frozenset()
    ) -> ItemLease | None:
        """Hold the item (None if it is finished already), or raise ItemBusy. `ended`: as decide's."""
        ref = self.items.document(item_key(run_id, item_id))
        snapshot = self._call(ref.get, retry=READ_RETRY)
        record = snapshot.to_dict() if snapshot.exists else None
        decision = decide(record, worker, now, ended)
        if decision is Decision.DUPLICATE:
            return None
        if decision is Decision.IN_PROGRESS:
            until = record["lease_expires"]
            raise ItemBusy(
                f"{item_id}: {record['lease_owner']} holds the lease until {until}", holder_of(record), until
            )
        fields = {
            "run_id": run_id,
            "item_id": item_id,
            "status": ItemStatus.RUNNING.value,
            "lease_owner": worker.task,
            "lease_attempt": worker.attempt,
            "lease_expires": now + self.lease,
            "claimed_at": now,
            "attempts": (record or {}).get("attempts", 0) + 1,
            "expire_at": now + self.retention,
        }
        try:
            if record is None:
                write_time = self.records.create(ref, fields)
            else:
                write_time = self.records.update_if_unchanged(ref, fields, since=snapshot.update_time)
        except RecordChanged:
            write_time = None
        if write_time is None:
            raise ItemBusy(f"{item_id}: another worker claimed it first")
        record = record or {}
        return ItemLease(run_id, item_id, worker, write_time, record.get("last_stage"), record.get("artifact"))

    def checkpoint(self, lease: ItemLease, stage: str, artifact: str, now: dt.datetime) -> ItemLease:
        """The stage's artifact is saved: record it as the point to resume from, and renew the lease."""
        fields = {
            "status": ItemStatus.CHECKPOINTED.value,
            "last_stage": stage,
            "artifact": artifact,
            "checkpointed_at": now,
            "lease_expires": now + self.lease,
        }
        write_time = self._write_if_held(lease, fields)
        return dataclasses.replace(lease, write_time=write_time, last_stage=stage, artifact=artifact)

    def finish(self, lease: ItemLease, now: dt.datetime) -> None:
        self._write_if_held(lease, {"status": ItemStatus.DONE.value, "finished_at": now, **self._no_lease()})

    def fail(self, lease: ItemLease, stage: str, reason: str, now: dt.datetime) -> None:
        """Terminal: a dead letter first (so a crash in between repeats this, not loses it), then `failed`."""
        context = {"stage": stage, "error": reason[:1500], "task": lease.worker.task, "attempt": lease.worker.attempt}
        letter = {"run_id": lease.run_id, "item_id": lease.item_id, "failed_at": now, **context}
        self._create(self.dead_letters.document(item_key(lease.run_id, lease.item_id)), letter)
        fields = {"status": ItemStatus.FAILED.value, "finished_at": now, "failure": context, **self._no_lease()}
        self._write_if_held(lease, fields)

    def stuck_items(self, now: dt.datetime) -> list[firestore.DocumentSnapshot]:
        """Items held (running or checkpointed) by a lease that has expired: their holder died."""
        query = self.items.where(filter=FieldFilter("status", "in", [status.value for status in HELD]))
        return [item for item in self._call(query.get, retry=READ_RETRY) if item.get("lease_expires") <= now]

    def reset(self, item: firestore.DocumentSnapshot, now: dt.datetime) -> bool:
        """Back to queued, progress kept; False if a worker changed the item since it was read."""
        fields = {"status": ItemStatus.QUEUED.value, "reset_at": now, **self._no_lease()}
        try:
            self.records.update_if_unchanged(item.reference, fields, since=item.update_time)
        except RecordChanged:
            return False
        return True

    def items_of(self, run_id: str) -> dict[str, dict]:
        query = self.items.where(filter=FieldFilter("run_id", "==", run_id))
        return {item.get("item_id"): item.to_dict() for item in self._call(query.get, retry=READ_RETRY)}

    # Artifacts and outputs -----------------------------------------------------------------------

    def save_artifact(self, lease: ItemLease, stage: str, value: object, now: dt.datetime) -> str:
        """Saved under the holder's own name (its last write time on the item, which no other holder
        shares): a zombie past its lease cannot overwrite the artifact the new holder checkpointed."""
        holder = lease.write_time.strftime("%Y%m%dT%H%M%S.%fZ")
        ref = self.artifacts.document(f"{item_key(lease.run_id, lease.item_id)}:{stage}:{holder}")
        self._call(ref.set, {"value": value, "expire_at": now + self.retention}, retry=None)
        return ref.path

    def load_artifact(self, location: str) -> object:
        snapshot = self._call(self.client.document(location).get, retry=READ_RETRY)
        return snapshot.get("value")

    def put_output_if_absent(self, run_id: str, item_id: str, fields: Mapping[str, object], now) -> bool:
        """The item's one output: True if this call wrote it, False if an earlier attempt did."""
        record = {"run_id": run_id, "item_id": item_id, **fields, "expire_at": now + self.retention}
        return self._create(self.outputs.document(item_key(run_id, item_id)), record)

    def outputs_of(self, run_id: str) -> list[firestore.DocumentSnapshot]:
        query = self.outputs.where(filter=FieldFilter("run_id", "==", run_id))
        return self._call(query.get, retry=READ_RETRY)

    # Conditional writes --------------------------------------------------------------------------

    def _create(self, ref: firestore.DocumentReference, record: Mapping[str, object]) -> bool:
        return self.records.create(ref, record) is not None

    def _write_if_held(self, lease: ItemLease, fields: Mapping[str, object]) -> dt.datetime:
        ref = self.items.document(item_key(lease.run_id, lease.item_id))
        try:
            return self.records.update_if_unchanged(ref, fields, since=lease.write_time)
        except RecordChanged:
            raise LeaseLost(f"{lease.item_id}: {lease.worker.task} lost its lease to another worker") from None

    @staticmethod
    def _no_lease() -> dict[str, object]:
        return {
            "lease_owner": firestore.DELETE_FIELD,
            "lease_attempt": firestore.DELETE_FIELD,
            "lease_expires": firestore.DELETE_FIELD,
        }
