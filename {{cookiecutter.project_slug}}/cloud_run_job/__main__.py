"""Command line: `run` (what the container does), `watchdog [--reset]` and `verify RUN_ID` (operators).

Exit codes: 0 ok; 1 retry (run: Cloud Run retries the task), stuck items (watchdog) or a failed
verification (verify); 2 bad settings or input (a one-line reason on stderr).
"""

from __future__ import annotations

import argparse
import collections
import dataclasses
import datetime as dt
import json
import logging
import os
import sys

from google.cloud.logging.handlers import StructuredLogHandler

import config
import dedup

from .store import JobStore, SnapshotMismatch
from .task import RUN_ID, SettingError, TaskIncomplete, TaskSettings, input_path, load_snapshot, run_task, whole_number

logger = logging.getLogger("cloud_run_job")


class TaskFields(logging.Filter):
    """Stamps the run and the task attempt on every line, so one run's lines can be found together."""

    def __init__(self, settings: TaskSettings) -> None:
        super().__init__()
        worker = settings.worker
        self.fields = {
            "run_id": settings.run_id,
            "execution": worker.execution,
            "task_index": worker.task_index,
            "attempt": worker.attempt,
        }

    def filter(self, record: logging.LogRecord) -> bool:
        record.json_fields = {**self.fields, **getattr(record, "json_fields", {})}
        return True


# Where the job's records live and how long they are kept, as the module sets them on the job (its container's
# environment, terraform/modules/scheduled-dedup-cloud-run-job): each deploy's, over the copy of config.yaml the image
# holds, which is only as new as the image's build.
PLACE = {"project": "DEDUP_PROJECT", "database": "DEDUP_DATABASE", "collection": "DEDUP_COLLECTION"}
RETENTION = "DEDUP_RETENTION_SECONDS"


def job_config(environ=os.environ) -> config.Config:
    """config.yaml (the image's, Dockerfile) with the place and the retention the deploy gives the job."""
    place = {field: environ[name] for field, name in PLACE.items() if environ.get(name)}
    if environ.get(RETENTION):
        place["retention"] = dt.timedelta(seconds=whole_number(environ, RETENTION, "1", 1))
    return dataclasses.replace(config.current(), **place)


def open_store(environ=os.environ) -> JobStore:
    lease = dt.timedelta(seconds=whole_number(environ, "JOB_LEASE_SECONDS", "600", 1))
    return JobStore(job_config(environ), lease)


def run_command() -> int:
    settings = TaskSettings.from_env()
    handler = StructuredLogHandler(stream=sys.stdout)  # JSON lines: Cloud Run turns them into entries
    handler.addFilter(TaskFields(settings))
    logging.getLogger().addHandler(handler)
    logging.getLogger().setLevel(logging.INFO)
    try:
        outcomes = run_task(settings, open_store())
    except TaskIncomplete as error:
        logger.error("task incomplete, Cloud Run retries it: %s", error)
        return 1
    logger.info("task finished: %d items", len(outcomes), extra={"json_fields": {"outcomes": outcomes}})
    return 0


def watchdog_command(reset: bool) -> int:
    store, now = open_store(), dedup.utcnow()
    stuck = store.stuck_items(now)
    for item in stuck:
        line = {key: item.get(key) for key in ("run_id", "item_id", "status", "lease_owner", "last_stage")}
        line["lease_expired"] = item.get("lease_expires").isoformat()
        if reset:
            line["reset"] = store.reset(item, now)
        print(json.dumps(line, sort_keys=True))
    print(f"{len(stuck)} item(s) held by an expired lease" + (", reset to queued" if reset and stuck else ""))
    return 1 if stuck and not reset else 0


def verify_command(run_id: str) -> int:
    """Exactly one output per input item, each written once, from the snapshot the run started with."""
    if not RUN_ID.fullmatch(run_id):
        raise SettingError(f"RUN_ID={run_id!r}: must be a 64-hex run id")
    snapshot = load_snapshot(input_path())
    store = open_store()
    run = store.run(run_id)
    if run is None:
        print(f"run {run_id}: no record; the job never started this run")
        return 1
    problems = []
    if run["input_version"] != snapshot.version:
        problems.append(f"run used input {run['input_version']}, JOB_INPUT is {snapshot.version}")
    outputs = store.outputs_of(run_id)
    counts = collections.Counter(output.get("item_id") for output in outputs)
    items = store.items_of(run_id)
    for item in snapshot.items:
        count = counts.pop(item["id"], 0)
        if count != 1:
            state = items.get(item["id"], {})
            detail = state.get("failure") or state.get("status", "never started")
            problems.append(f"item {item['id']}: {count} outputs, expected 1 (item: {detail})")
    problems += [f"item {item_id}: output for an item not in the input" for item_id in sorted(counts)]
    problems += [
        f"item {output.get('item_id')}: output overwritten after it was committed"
        for output in outputs
        if output.update_time != output.create_time
    ]
    for problem in problems:
        print(problem)
    print(f"run {run_id}: {len(snapshot.items)} items, {len(outputs)} outputs, {len(problems)} problem(s)")
    return 1 if problems else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m cloud_run_job", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("run", help="run one task (CLOUD_RUN_TASK_INDEX) of run DEDUP_RUN_ID")
    watchdog = commands.add_parser("watchdog", help="list items held by an expired lease")
    watchdog.add_argument("--reset", action="store_true", help="put them back to queued (progress is kept)")
    verify = commands.add_parser("verify", help="check exactly one output per input item")
    verify.add_argument("run_id")
    args = parser.parse_args(argv)
    try:
        if args.command == "run":
            return run_command()
        if args.command == "watchdog":
            return watchdog_command(args.reset)
        return verify_command(args.run_id)
    except (ValueError, SnapshotMismatch) as error:  # SettingError, or config.yaml's (ConfigError)
        print(f"error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
