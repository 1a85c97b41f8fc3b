"""Inspect run records (docs/operations.md). Uses FIRESTORE_EMULATOR_HOST if set, else your gcloud credentials.

`python tools/runs.py stuck` lists the in_progress runs whose lease has expired;
`python tools/runs.py show JOB TIME` prints one run's record, found by the run_id dedup.RunKey computes;
`python tools/runs.py missed --since T1 --until T2 [--job JOB] [--json]` lists the runs the audit finds
missing or stuck (audit.py: each job's cron against the records, one batched read);
`python tools/runs.py backfill --since T1 --until T2 [--job JOB] [--url URL | --queue] [--dry-run]` delivers
each of them to the function with its original schedule time, so the dedup keeps it to one execution; with
--queue through the deliveries queue (Cloud Tasks), which reaches the internal-only function from a laptop;
`python tools/runs.py rerun JOB TIME --reason WHY [--by WHO] [--rerun-id ID]` queues a re-run of a finished run:
it runs once more, once, and its record keeps who asked, when and why (docs/schedules-and-manual-runs.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

from google.api_core import exceptions as api_exceptions
from google.cloud.firestore_v1.base_query import FieldFilter

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: dedup.py
from fire import delivery_headers, post, scheduler_job_name  # noqa: E402
from run_id import run_key  # noqa: E402

import audit  # noqa: E402
import dedup  # noqa: E402
import task_queue  # noqa: E402

# Reads or deliveries from which a progress bar is drawn (on stderr; the table goes to stdout).
PROGRESS_FROM = 50


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


class Progress:
    """A one-line text progress bar on stderr, drawn only for long windows (stdlib: no dependency)."""

    WIDTH = 30

    def __init__(self, label: str, stream=sys.stderr) -> None:
        self.label = label
        self.stream = stream

    def __call__(self, done: int, total: int) -> None:
        if total < PROGRESS_FROM:
            return
        filled = self.WIDTH * done // total
        bar = "#" * filled + "-" * (self.WIDTH - filled)
        end = "\n" if done >= total else ""
        self.stream.write(f"\r{self.label} [{bar}] {done}/{total} {100 * done // total:3d}%{end}")
        self.stream.flush()


class QueueUnavailable(Exception):
    """Cloud Tasks did not take a delivery (permission, no such queue, unreachable): the message says which."""


class BadArgument(ValueError):
    """An argument breaks a rule: the message names it, its value and the rule."""


def moment(name: str, text: str) -> dt.datetime:
    try:
        return dedup.parse_schedule_time(text)
    except ValueError as error:
        raise BadArgument(f"{name}={text!r}: {error}") from None


def selected_jobs(config: dedup.DedupConfig, job: str | None) -> dict[str, dedup.JobSpec]:
    """All of DEDUP_JOBS, or the one --job names (by its Scheduler job name or its job id)."""
    if job is None:
        return dict(config.jobs)
    for name, spec in config.jobs.items():
        if job in (name, spec.job_id):
            return {name: spec}
    raise BadArgument(f"--job={job!r}: not a job of DEDUP_JOBS ({', '.join(sorted(config.jobs)) or 'none'})")


def find_runs(config: dedup.DedupConfig, args: argparse.Namespace, now: dt.datetime) -> list[audit.AuditedRun]:
    """The audit over [--since, --until), for the selected jobs; refuses a window the records cannot answer."""
    since, until = moment("--since", args.since), moment("--until", args.until)
    if since >= until:
        raise BadArgument(f"--until={args.until!r}: must be later than --since ({args.since})")
    if since <= now - config.retention:
        raise BadArgument(
            f"--since={args.since!r}: older than the retention window ({int(config.retention.total_seconds())} s); "
            "the TTL may have deleted those records, so a missing run cannot be told from an expired one"
        )
    jobs = selected_jobs(config, args.job)
    ledger = dedup.RunLedger(config)
    # As the audit does: a job is judged from the first audit that saw it (none yet: the whole window).
    starts = audit.starts(ledger, jobs)
    return audit.audit_runs(ledger, jobs, since, until, now, progress=Progress("reading run records"), starts=starts)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def run_row(found: audit.AuditedRun, config: dedup.DedupConfig) -> list[str]:
    zone = config.jobs[found.job].time_zone
    wall = found.wall_time.strftime("%Y-%m-%d %H:%M") + f" {zone}" + (f" ({found.dst.value})" if found.dst else "")
    return [found.job, audit.rfc3339(found.schedule_time), wall, found.state.value, found.run_id]


RUN_HEADER = ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "RUN_ID"]


def summary(runs: list[audit.AuditedRun], listed: list[audit.AuditedRun], args: argparse.Namespace) -> str:
    return f"{len(listed)} of {len(runs)} expected run(s) from {args.since} to {args.until} need a delivery"


def missed(config: dedup.DedupConfig, args: argparse.Namespace) -> int:
    runs = find_runs(config, args, dedup.utcnow())
    listed = runs if args.all else list(audit.needing_delivery(runs))
    if args.json:
        print(json.dumps([found.as_json() for found in listed], indent=2))
    else:
        print(table([run_row(found, config) for found in listed], RUN_HEADER))
    print(summary(runs, list(audit.needing_delivery(runs)), args), file=sys.stderr)
    return 0


def id_token_for(url: str) -> str:
    """An identity token for the function (audience: its URL) from google-auth: a service account key or
    an impersonated account in GOOGLE_APPLICATION_CREDENTIALS, or the metadata server of a VM or Cloud Run."""
    import google.auth.exceptions
    import google.auth.transport.requests
    import google.oauth2.id_token

    try:
        return google.oauth2.id_token.fetch_id_token(google.auth.transport.requests.Request(), url)
    except google.auth.exceptions.GoogleAuthError as error:
        raise BadArgument(
            f"--url={url!r}: no identity token for it ({error}); run from a VM in the project's network, or "
            "`gcloud auth application-default login --impersonate-service-account=<invoker>`"
        ) from None


def queue_of(config: dedup.DedupConfig, queue: str) -> str:
    """--queue's value, or the deployed deliveries queue (DEDUP_TASKS_QUEUE) for a bare --queue."""
    queue = queue or config.tasks_queue or ""
    if not dedup.TASKS_QUEUE.fullmatch(queue):
        raise BadArgument(
            f"--queue={queue!r}: must be projects/PROJECT/locations/REGION/queues/QUEUE (terraform output task_queue)"
        )
    return queue


def queued(queue: str, name: str, headers: dict[str, str]) -> str:
    """Queue one delivery as task `name`; what happened, for the table."""
    try:
        return "queued" if task_queue.enqueue(queue, name, headers) else "queued before (same task id): not again"
    except api_exceptions.GoogleAPIError as error:
        raise QueueUnavailable(f"Cloud Tasks did not queue {name}: {type(error).__name__}: {error}") from None


def backfill(config: dedup.DedupConfig, args: argparse.Namespace) -> int:
    """Deliver each missing or stuck run as Scheduler would: same job name and schedule time, so one executes."""
    runs = find_runs(config, args, dedup.utcnow())
    listed = list(audit.needing_delivery(runs))
    queue = queue_of(config, args.queue) if args.queue is not None else None
    url = args.url or f"http://127.0.0.1:{args.port}/"
    token = id_token_for(args.url) if args.url and not args.dry_run and listed and not queue else None
    rows = []
    failures = 0
    progress = Progress("delivering")
    for done, found in enumerate(listed, start=1):
        if args.dry_run:
            answer = "(dry run: not sent)"
        elif queue:  # a task per run id: a backfill asked for twice is queued once
            key = dedup.RunKey(config.project, config.location, found.job, found.schedule_time)
            answer = queued(queue, task_queue.task_id(found.run_id, "backfill"), task_queue.delivery_headers(key))
        else:
            headers = delivery_headers(found.job, audit.rfc3339(found.schedule_time), config.project, config.location)
            if token:
                headers["Authorization"] = f"Bearer {token}"
            try:
                status, body = post(url, headers, args.timeout)
            except OSError as error:  # URLError included: nothing answered
                status, body = 0, f"cannot reach {url}: {error}"
            failures += not 200 <= status < 300
            answer = f"{status} {body.strip()}"
        rows.append([*run_row(found, config)[:4], answer])
        progress(done, len(listed))
    print(table(rows, ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "ANSWER"]))
    verb = "would deliver" if args.dry_run else f"queued on {queue}" if queue else f"delivered to {url}"
    print(f"{summary(runs, listed, args)}; {verb} {len(listed)}, {failures} not answered 2xx", file=sys.stderr)
    return 1 if failures else 0


def gcloud_account() -> str:
    """Who is asking: gcloud's active account (the identity Cloud Tasks' audit log records for the enqueue)."""
    try:
        account = subprocess.run(
            ["gcloud", "config", "get-value", "account"], check=True, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        account = ""
    if not account:
        raise BadArgument("--by: not given, and gcloud has no active account; say who asks, e.g. --by ana@example.com")
    return account


def rerun(config: dedup.DedupConfig, args: argparse.Namespace) -> int:
    """Queue a re-run of one finished run: the function runs it once more, once per re-run id, and records it."""
    rerun_id = args.rerun_id or uuid.uuid4().hex
    request = dedup.Rerun(rerun_id, args.by or gcloud_account(), args.reason)
    for name, value, pattern in (
        ("--rerun-id", request.rerun_id, dedup.RERUN_ID),
        ("--by", request.by, dedup.RERUN_TEXT),
        ("--reason", request.reason, dedup.RERUN_TEXT),
    ):
        if not pattern.fullmatch(value):
            raise BadArgument(f"{name}={value!r}: must be {pattern.pattern}")
    try:
        key = run_key(scheduler_job_name(args.job, config), args.time, args.project, args.location)
    except ValueError as error:
        raise BadArgument(f"TIME={args.time!r}: {error}") from None
    queue = queue_of(config, args.queue)
    answer = queued(queue, task_queue.task_id(rerun_id, "rerun"), task_queue.delivery_headers(key, request))
    print(f"re-run {rerun_id} of {key.job_name} at {audit.rfc3339(key.schedule_time)} (run_id {key.run_id}): {answer}")
    again = f"the same request again, safely: --rerun-id {rerun_id}"
    print(f"{again}; its outcome: runs.py show {key.job_name} {args.time}", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("stuck", help="list in_progress runs whose lease has expired")
    one = commands.add_parser("show", help="print one run's record")
    one.add_argument("job", help="Cloud Scheduler job id")
    one.add_argument("time", help="schedule time, RFC 3339")
    one.add_argument("--project", help="the X-Scheduler-Project the run was keyed under")
    one.add_argument("--location", help="the X-Scheduler-Location the run was keyed under")
    for name, text in (
        ("missed", "list the runs each job's cron expected that are missing or stuck"),
        ("backfill", "deliver each missing or stuck run to the function with its original schedule time"),
    ):
        window = commands.add_parser(name, help=text)
        window.add_argument("--since", required=True, help="window start, RFC 3339 (inclusive)")
        window.add_argument("--until", required=True, help="window end, RFC 3339 (exclusive)")
        window.add_argument("--job", help="one job: its Scheduler job name or its job id (default: every job)")
    commands.choices["missed"].add_argument("--json", action="store_true", help="a JSON list instead of a table")
    commands.choices["missed"].add_argument("--all", action="store_true", help="every expected run, whatever its state")
    fill = commands.choices["backfill"]
    fill.add_argument("--url", default="", help="the deployed function's URL (default: the local dev server)")
    fill.add_argument("--port", type=int, default=8080, help="the local dev server's port")
    fill.add_argument("--dry-run", action="store_true", help="list what would be delivered, send nothing")
    fill.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each answer")
    fill.add_argument("--queue", nargs="?", const="", default=None,
                      help="queue each on the deliveries queue (default queue: DEDUP_TASKS_QUEUE)")  # fmt: skip
    again = commands.add_parser("rerun", help="queue a re-run of one finished run: it runs once more, once")
    again.add_argument("job", help="job id (nightly) or Scheduler job name")
    again.add_argument("time", help="the run's schedule time, RFC 3339")
    again.add_argument("--reason", required=True, help="why it runs again (kept in the run's record)")
    again.add_argument("--by", help="who asks (default: gcloud's active account)")
    again.add_argument("--rerun-id", help="the request's id, to repeat a request safely (default: a new one)")
    again.add_argument("--queue", default="", help="the deliveries queue (default: DEDUP_TASKS_QUEUE)")
    again.add_argument("--project", help="the X-Scheduler-Project the run was keyed under")
    again.add_argument("--location", help="the X-Scheduler-Location the run was keyed under")
    args = parser.parse_args(argv)

    try:
        config = dedup.DedupConfig.from_env()
        if args.command in ("missed", "backfill", "rerun"):
            return {"missed": missed, "backfill": backfill, "rerun": rerun}[args.command](config, args)
    except (BadArgument, dedup.Misconfigured) as error:
        print(error, file=sys.stderr)
        return 2
    except (dedup.StoreUnavailable, QueueUnavailable) as error:
        print(error, file=sys.stderr)
        return 1
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
