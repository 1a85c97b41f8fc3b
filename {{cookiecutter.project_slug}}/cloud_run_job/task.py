"""One Cloud Run task: its share of the input snapshot, each item through the stages, one output each.

Per item: claim (lease) -> for each stage after the last checkpoint: build artifact, save it,
checkpoint -> commit the output put-if-absent, keyed by (run id, item id) -> mark done. A crash
anywhere is safe to retry: a lost checkpoint repeats one stage, a lost `done` finds the output there.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import logging
import os
import re
import signal
import time
from collections.abc import Mapping
from pathlib import Path

import dedup
from keys import parse_schedule_time

from . import holders
from .stages import STAGES, TerminalItemError
from .store import ItemBusy, ItemLease, JobStore, Worker

logger = logging.getLogger(__name__)

SAMPLE_INPUT = Path(__file__).resolve().parent / "input" / "items.json"
RUN_ID = re.compile(r"[0-9a-f]{64}")
ITEM_ID = re.compile(r"[A-Za-z0-9._-]{1,200}")  # part of a Firestore document id: no '/'
# How often a task waiting for an item another execution holds asks again (never past the lease's end).
HOLDER_POLL_SECONDS = 10.0


class SettingError(ValueError):
    """A bad environment variable or input file; the message names it, its value and the rule."""


class TaskIncomplete(Exception):
    """Some items hit retryable failures: the task exits non-zero so that Cloud Run retries it."""


@dataclasses.dataclass(frozen=True)
class Snapshot:
    items: tuple[Mapping[str, object], ...]
    version: str  # sha256 of the canonical JSON: names the exact input a run used


def load_snapshot(path: Path) -> Snapshot:
    try:
        items = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise SettingError(f"JOB_INPUT={str(path)!r}: cannot be read as JSON ({error})") from None
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise SettingError(f"JOB_INPUT={str(path)!r}: must be a JSON list of objects")
    seen = set()
    for item in items:
        item_id = item.get("id")
        if not isinstance(item_id, str) or not ITEM_ID.fullmatch(item_id):
            raise SettingError(f"JOB_INPUT item id={item_id!r}: must be 1-200 letters, digits, '.', '_' or '-'")
        if item_id in seen:
            raise SettingError(f"JOB_INPUT item id={item_id!r}: appears twice; ids must be unique")
        seen.add(item_id)
    canonical = json.dumps(items, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return Snapshot(tuple(items), "sha256:" + hashlib.sha256(canonical.encode()).hexdigest())


def task_of(item_id: str, task_count: int) -> int:
    """The task that owns an item: a stable hash, so the same item lands in the same task on every attempt."""
    return int.from_bytes(hashlib.sha256(item_id.encode()).digest()[:8], "big") % task_count


def input_path(environ: Mapping[str, str] = os.environ) -> Path:
    """JOB_INPUT, or the sample snapshot shipped with the job."""
    return Path(environ.get("JOB_INPUT") or SAMPLE_INPUT)


def whole_number(environ: Mapping[str, str], name: str, default: str, minimum: int) -> int:
    text = environ.get(name) or default
    if not re.fullmatch(r"[0-9]+", text) or int(text) < minimum:  # not isdigit(): it takes "²", int() does not
        raise SettingError(f"{name}={text!r}: must be a whole number of at least {minimum}")
    return int(text)


@dataclasses.dataclass(frozen=True)
class TaskSettings:
    run_id: str
    schedule_time: dt.datetime | None
    worker: Worker
    task_count: int
    max_retries: int
    input_path: Path

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> TaskSettings:
        run_id = environ.get("DEDUP_RUN_ID", "")
        if not RUN_ID.fullmatch(run_id):
            raise SettingError(f"DEDUP_RUN_ID={run_id!r}: must be the 64-hex run id the handler passes")
        schedule_time = None
        if environ.get("DEDUP_SCHEDULE_TIME"):
            try:
                schedule_time = parse_schedule_time(environ["DEDUP_SCHEDULE_TIME"])
            except ValueError as error:
                raise SettingError(f"DEDUP_SCHEDULE_TIME={environ['DEDUP_SCHEDULE_TIME']!r}: {error}") from None
        task_count = whole_number(environ, "CLOUD_RUN_TASK_COUNT", "1", 1)
        task_index = whole_number(environ, "CLOUD_RUN_TASK_INDEX", "0", 0)
        if task_index >= task_count:
            raise SettingError(f"CLOUD_RUN_TASK_INDEX={task_index}: must be below CLOUD_RUN_TASK_COUNT={task_count}")
        worker = Worker(
            execution=environ.get("CLOUD_RUN_EXECUTION") or "local",
            task_index=task_index,
            attempt=whole_number(environ, "CLOUD_RUN_TASK_ATTEMPT", "0", 0),
        )
        return cls(
            run_id=run_id,
            schedule_time=schedule_time,
            worker=worker,
            task_count=task_count,
            max_retries=whole_number(environ, "JOB_MAX_RETRIES", "3", 0),
            input_path=input_path(environ),
        )

    @property
    def last_attempt(self) -> bool:
        return self.worker.attempt >= self.max_retries


def crash_point(point: str, item_id: str) -> None:
    """TEST ONLY. JOB_CRASH_AT=<point>:<item id>[:error] kills this process with SIGKILL (or, with
    `:error`, raises a retryable error) when it reaches <point> for that item. Points:
    checkpoint.<stage> (artifact saved, checkpoint not written), output (before the output is
    committed), done (output committed, final status not written). Never set it in production."""
    spec = os.environ.get("JOB_CRASH_AT")
    if not spec:
        return
    where, target, *mode = spec.split(":")
    if (where, target) != (point, item_id):
        return
    if mode == ["error"]:
        raise RuntimeError(f"injected retryable failure at {point} for {item_id}")
    os.kill(os.getpid(), signal.SIGKILL)


def run_task(settings: TaskSettings, store: JobStore) -> dict[str, str]:
    """Processes this task's items; returns item id -> outcome, or raises TaskIncomplete."""
    snapshot = load_snapshot(settings.input_path)
    worker = settings.worker
    started = {"schedule_time": settings.schedule_time, "task_count": settings.task_count}
    store.start_run(settings.run_id, snapshot.version, len(snapshot.items), started, dedup.utcnow())
    mine = [item for item in snapshot.items if task_of(item["id"], settings.task_count) == worker.task_index]
    store.enqueue(settings.run_id, [item["id"] for item in mine], worker, dedup.utcnow())
    outcomes, retry = {}, {}
    for item in mine:
        try:
            outcomes[item["id"]] = process_item(settings, store, item, snapshot.version)
        except Exception as error:  # every other item still gets its chance
            retry[item["id"]] = f"{type(error).__name__}: {error}"
            logger.warning("item %s will be retried: %s", item["id"], retry[item["id"]], extra=fields(item["id"]))
    if retry:
        if settings.last_attempt:
            report = {"unfinished": retry, "finished": outcomes, "at": dedup.utcnow()}
            store.write_report(settings.run_id, worker, report)
            logger.error("retries exhausted; report written for %d unfinished items", len(retry))
        raise TaskIncomplete(f"{len(retry)} of {len(mine)} items need a retry: {', '.join(sorted(retry))}")
    return outcomes


def wait(seconds: float) -> None:
    time.sleep(seconds)


def claim_item(settings: TaskSettings, store: JobStore, item_id: str) -> ItemLease | None:
    """The item's lease (None: finished already). An item another execution holds is taken over once that execution
    has ended (holders.holder: a cancelled or failed one's task died holding it), else waited for, with a line
    that says whom for and until when: never a task failed for the lease's length without a word."""
    ended: set[str] = set()
    said = None
    while True:
        try:
            return store.claim(settings.run_id, item_id, settings.worker, dedup.utcnow(), frozenset(ended))
        except ItemBusy as busy:
            holder, until = busy.holder, busy.until
        if holder is None:  # another worker claimed it between the read and the write: read it again
            continue
        if holder == settings.worker.execution:  # this execution's own task: its lease is trusted
            found = holders.Holder(holders.HolderState.RUNNING, "this execution's own task")
        else:
            found = holders.holder(holder)
        if found.state is holders.HolderState.ENDED and holder not in ended:  # once: never a loop without a wait
            logger.warning(
                "item %s: taken over from execution %s, which has ended (%s)", item_id, holder, found.detail,
                extra=fields(item_id, event="taken_over", holder=holder),
            )  # fmt: skip
            ended.add(holder)
            continue
        if said != (holder, found.state):
            logger.warning(
                "item %s is leased by execution %s until %s (%s): waiting for it to finish the item or end",
                item_id, holder, until.isoformat(), found.detail,
                extra=fields(item_id, event="waiting", holder=holder, holder_state=found.state.value),
            )  # fmt: skip
            said = (holder, found.state)
        wait(min(HOLDER_POLL_SECONDS, max((until - dedup.utcnow()).total_seconds(), 0.0) + 0.01))


def process_item(settings: TaskSettings, store: JobStore, item: Mapping[str, object], version: str) -> str:
    item_id = item["id"]
    lease = claim_item(settings, store, item_id)
    if lease is None:
        return "already finished"
    value = store.load_artifact(lease.artifact) if lease.last_stage else dict(item)
    names = [name for name, _ in STAGES]
    start = names.index(lease.last_stage) + 1 if lease.last_stage else 0
    for name, stage in STAGES[start:]:
        try:
            value = stage(value)
        except TerminalItemError as error:
            store.fail(lease, name, str(error), dedup.utcnow())
            logger.error("item failed terminally: %s", error, extra=fields(item_id, stage=name, event="failed"))
            return "failed"
        logger.info("stage %s built", name, extra=fields(item_id, stage=name, event="stage_built"))
        lease = checkpoint(store, lease, name, value)
    crash_point("output", item_id)
    output = {
        "result": value,
        "input_version": version,
        "execution": settings.worker.execution,
        "task_index": settings.worker.task_index,
        "attempt": settings.worker.attempt,
        "committed_at": dedup.utcnow(),
    }
    created = store.put_output_if_absent(settings.run_id, item_id, output, dedup.utcnow())
    crash_point("done", item_id)
    store.finish(lease, dedup.utcnow())
    outcome = "done" if created else "done (output already committed by an earlier attempt)"
    logger.info("item %s", outcome, extra=fields(item_id, event="done", output_created=created))
    return outcome


def checkpoint(store: JobStore, lease: ItemLease, stage: str, value: object) -> ItemLease:
    location = store.save_artifact(lease, stage, value, dedup.utcnow())
    crash_point(f"checkpoint.{stage}", lease.item_id)
    return store.checkpoint(lease, stage, location, dedup.utcnow())


def fields(item_id: str, **extra: object) -> dict[str, dict[str, object]]:
    return {"json_fields": {"item_id": item_id, **extra}}
