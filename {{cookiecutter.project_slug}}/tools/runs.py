"""Inspect run records (docs/operations.md). Uses FIRESTORE_EMULATOR_HOST if set, else your gcloud credentials.

`python tools/runs.py stuck` lists the in_progress runs whose lease has expired;
`python tools/runs.py show JOB TIME` prints one run's record, found by the run_id dedup.RunKey computes.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from google.cloud.firestore_v1.base_query import FieldFilter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: dedup.py
from run_id import run_key  # noqa: E402

import dedup  # noqa: E402


def runs_collection(config: dedup.DedupConfig):
    return dedup.firestore_client(config.project, config.database).collection(config.collection)


def stuck_runs(collection, now) -> Iterator[tuple[str, dict]]:
    """Runs still `in_progress` after their lease expired: the attempt died or hangs past its lease.

    One equality filter, served by Firestore's automatic single-field index (no composite index to
    create); few records are ever in_progress, so the lease is compared here.
    """
    query = collection.where(filter=FieldFilter("status", "==", dedup.Status.IN_PROGRESS.value))
    for snapshot in query.stream(timeout=dedup.RPC_TIMEOUT_SECONDS):
        record = snapshot.to_dict()
        if record["lease_expires"] <= now:
            yield snapshot.id, record


def show(record: dict) -> str:
    return json.dumps(record, default=str, indent=2, sort_keys=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("stuck", help="list in_progress runs whose lease has expired")
    one = commands.add_parser("show", help="print one run's record")
    one.add_argument("job", help="Cloud Scheduler job id")
    one.add_argument("time", help="schedule time, RFC 3339")
    one.add_argument("--project", help="the X-Scheduler-Project the run was keyed under")
    one.add_argument("--location", help="the X-Scheduler-Location the run was keyed under")
    args = parser.parse_args(argv)

    config = dedup.DedupConfig.from_env()
    collection = runs_collection(config)
    if args.command == "stuck":
        found = 0
        for run_id, record in stuck_runs(collection, dedup.utcnow()):
            found += 1
            print(f"{run_id}  job={record['job_name']} schedule_time={record['schedule_time']} "
                  f"attempt={record.get('attempts')} lease_expires={record['lease_expires']}")  # fmt: skip
        print(f"{found} stuck run(s) in {config.collection}", file=sys.stderr)
        return 0
    try:
        key = run_key(args.job, args.time, args.project, args.location)
    except ValueError as error:
        print(f"TIME={args.time!r}: {error}", file=sys.stderr)
        return 2
    snapshot = collection.document(key.run_id).get(timeout=dedup.RPC_TIMEOUT_SECONDS)
    if not snapshot.exists:
        print(f"{key.run_id}: no record (never claimed, released after a retryable failure, or deleted by TTL)")
        return 1
    print(f"{key.run_id}:\n{show(snapshot.to_dict())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
