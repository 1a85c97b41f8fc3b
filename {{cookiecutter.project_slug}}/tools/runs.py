"""The project's one operator command: `python tools/runs.py <command> ...` (`--help` lists them; docs/operations.md).

Every command that names a job takes its job id (`nightly`) or its Scheduler job name (`<slug>-nightly`, what a
run is keyed by): `resolve_job` turns either into the deployed name. Firestore: the emulator
FIRESTORE_EMULATOR_HOST names (`make dev` prints it), else your gcloud credentials. A new command is one function
and one entry of COMMANDS.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import subprocess
import sys
import urllib.error
import uuid
from collections.abc import Callable
from pathlib import Path

import google.api_core.exceptions
import google.auth.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: the protocol modules
from delivery import delivery_headers, identity_token, minute_now, post  # noqa: E402
from firestore_emulator import is_ready  # noqa: E402

import audit  # noqa: E402
import dedup  # noqa: E402
import task_queue  # noqa: E402
from keys import RERUN_ID, RERUN_TEXT, Rerun, RunKey, parse_schedule_time  # noqa: E402
from ledger import RunLedger  # noqa: E402
from outcomes import Misconfigured, StoreUnavailable  # noqa: E402
from settings import TASKS_QUEUE, DedupConfig, JobSpec  # noqa: E402

# Reads or deliveries from which a progress bar is drawn (on stderr; the table goes to stdout).
PROGRESS_FROM = 50


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
        return parse_schedule_time(text)
    except ValueError as error:
        raise BadArgument(f"{name}={text!r}: {error}") from None


def resolve_job(config: DedupConfig, job: str, field: str = "JOB") -> str:
    """The Scheduler job name (what a deployed run is keyed by) of `job`: a job id or a Scheduler job name of
    DEDUP_JOBS, or the audit's job. The one place the tools turn a name into the deployed one."""
    for name, spec in config.jobs.items():
        if job in (name, spec.job_id):
            return name
    if job == config.audit_job:
        return job
    known = ", ".join(f"{spec.job_id} ({name})" for name, spec in sorted(config.jobs.items()))
    raise BadArgument(f"{field}={job!r}: not a job of this project: {known or 'none'}, or {config.audit_job}")


def run_key(config: DedupConfig, job: str, time: str, project: str | None = None, location: str | None = None):
    """The key of one scheduled run as the deployed handler computes it (RunKey): the Scheduler job name,
    the schedule time normalised to UTC, the project/location it was delivered for (default: the function's own)."""
    return RunKey(
        project=project or config.project,
        location=location or config.location,
        job_name=resolve_job(config, job),
        schedule_time=moment("TIME", time),
    )


def selected_jobs(config: DedupConfig, job: str | None) -> dict[str, JobSpec]:
    """All of DEDUP_JOBS, or the one --job names (by its Scheduler job name or its job id)."""
    if job is None:
        return dict(config.jobs)
    name = resolve_job(config, job, "--job")
    if name not in config.jobs:
        raise BadArgument(f"--job={job!r}: the audit's own job has no cron to check")
    return {name: config.jobs[name]}


def find_runs(config: DedupConfig, args: argparse.Namespace, now: dt.datetime) -> list[audit.AuditedRun]:
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
    ledger = RunLedger(config)
    # As the audit does: a job is judged from the first audit that saw it (none yet: the whole window).
    starts = audit.starts(ledger, jobs)
    return audit.audit_runs(ledger, jobs, since, until, now, progress=Progress("reading run records"), starts=starts)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def run_row(found: audit.AuditedRun, config: DedupConfig) -> list[str]:
    zone = config.jobs[found.job].time_zone
    wall = found.wall_time.strftime("%Y-%m-%d %H:%M") + f" {zone}" + (f" ({found.dst.value})" if found.dst else "")
    return [found.job, audit.rfc3339(found.schedule_time), wall, found.state.value, found.run_id]


RUN_HEADER = ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "RUN_ID"]


def summary(runs: list[audit.AuditedRun], listed: list[audit.AuditedRun], args: argparse.Namespace) -> str:
    return f"{len(listed)} of {len(runs)} expected run(s) from {args.since} to {args.until} need a delivery"


def missed(config: DedupConfig, args: argparse.Namespace) -> int:
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


def queue_of(config: DedupConfig, queue: str) -> str:
    """--queue's value, or the deployed deliveries queue (DEDUP_TASKS_QUEUE) for a bare --queue."""
    queue = queue or config.tasks_queue or ""
    if not TASKS_QUEUE.fullmatch(queue):
        raise BadArgument(
            f"--queue={queue!r}: must be projects/PROJECT/locations/REGION/queues/QUEUE (terraform output task_queue)"
        )
    return queue


def queued(queue: str, name: str, headers: dict[str, str]) -> str:
    """Queue one delivery as task `name`; what happened, for the table."""
    try:
        return "queued" if task_queue.enqueue(queue, name, headers) else "queued before (same task id): not again"
    except google.api_core.exceptions.GoogleAPIError as error:
        raise QueueUnavailable(f"Cloud Tasks did not queue {name}: {type(error).__name__}: {error}") from None


def backfill(config: DedupConfig, args: argparse.Namespace) -> int:
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
        # The same headers by either way: what Scheduler would send for the run.
        headers = task_queue.delivery_headers(RunKey(config.project, config.location, found.job, found.schedule_time))
        if args.dry_run:
            answer = "(dry run: not sent)"
        elif queue:  # a task per run id: a backfill asked for twice is queued once
            answer = queued(queue, task_queue.task_id(found.run_id, "backfill"), headers)
        else:
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


def rerun(config: DedupConfig, args: argparse.Namespace) -> int:
    """Queue a re-run of one finished run: the function runs it once more, once per re-run id, and records it."""
    rerun_id = args.rerun_id or uuid.uuid4().hex
    request = Rerun(rerun_id, args.by or gcloud_account(), args.reason)
    for name, value, pattern in (
        ("--rerun-id", request.rerun_id, RERUN_ID),
        ("--by", request.by, RERUN_TEXT),
        ("--reason", request.reason, RERUN_TEXT),
    ):
        if not pattern.fullmatch(value):
            raise BadArgument(f"{name}={value!r}: must be {pattern.pattern}")
    key = run_key(config, args.job, args.time, args.project, args.location)
    queue = queue_of(config, args.queue)
    answer = queued(queue, task_queue.task_id(rerun_id, "rerun"), task_queue.delivery_headers(key, request))
    print(f"re-run {rerun_id} of {key.job_name} at {audit.rfc3339(key.schedule_time)} (run_id {key.run_id}): {answer}")
    again = f"the same request again, safely: --rerun-id {rerun_id}"
    print(f"{again}; its outcome: runs.py show {key.job_name} {args.time}", file=sys.stderr)
    return 0


def fire(config: DedupConfig, args: argparse.Namespace) -> int:
    """One delivery as Scheduler sends it: the job's Scheduler job name, a schedule time (default: this minute)."""
    time = args.time or minute_now()
    moment("TIME", time)
    job = resolve_job(config, args.job)
    headers = delivery_headers(job, time, args.project, args.location)
    url = args.url or f"http://127.0.0.1:{args.port}/"
    if args.url:
        headers["Authorization"] = f"Bearer {identity_token(args.url, args.impersonate)}"
    print(f"==> POST {url}  job={job} schedule_time={time}", flush=True)
    try:
        status, body = post(url, headers, args.timeout)
    except (urllib.error.URLError, OSError) as error:
        print(f"cannot reach {url}: {error} (is `make dev` running?)", file=sys.stderr)
        return 1
    print(f"<== {status} {body.strip()}")
    return 0 if 200 <= status < 300 else 1


def print_run_id(config: DedupConfig, args: argparse.Namespace) -> int:
    print(run_key(config, args.job, args.time, args.project, args.location).run_id)
    return 0


def show_run(config: DedupConfig, args: argparse.Namespace) -> int:
    key = run_key(config, args.job, args.time, args.project, args.location)
    record = RunLedger(config).read_runs([key.run_id]).get(key.run_id)
    if record is None:
        print(f"{key.run_id}: no record (never claimed, released after a retryable failure, or deleted by TTL)")
        return 1
    print(f"{key.run_id}:\n{show(record)}")
    return 0


def list_stuck(config: DedupConfig, args: argparse.Namespace) -> int:
    found = 0
    for run_id, record in RunLedger(config).stuck_runs(dedup.utcnow()):
        found += 1
        print(f"{run_id}  job={record['job_name']} schedule_time={record['schedule_time']} "
              f"attempt={record.get('attempts')} lease_expires={record['lease_expires']}")  # fmt: skip
    print(f"{found} stuck run(s) in {config.collection}", file=sys.stderr)
    return 0


def one_run(parser: argparse.ArgumentParser, time: str = "(X-CloudScheduler-ScheduleTime)") -> None:
    parser.add_argument("job", help="job id (nightly) or Scheduler job name (<slug>-nightly)")
    parser.add_argument("time", help=f"schedule time, RFC 3339 {time}")
    keyed_for(parser)


def keyed_for(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--project", help="the X-Scheduler-Project of the delivery (default: the function's)")
    parser.add_argument("--location", help="the X-Scheduler-Location of the delivery (default: the function's)")


def sent_to(parser: argparse.ArgumentParser) -> None:
    """Where `fire` and `backfill` send their deliveries."""
    parser.add_argument("--url", default="", help="a deployed function's URL (default: the local dev server)")
    parser.add_argument("--port", type=int, default=8080, help="the local dev server's port")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for each answer")


def fire_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("job", help="job id (nightly) or Scheduler job name (<slug>-nightly)")
    parser.add_argument("--time", default="", help="schedule time, RFC 3339 (default: now rounded to the minute)")
    parser.add_argument("--impersonate", help="service account whose identity token to send (with --url)")
    sent_to(parser)
    keyed_for(parser)


def window(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--since", required=True, help="window start, RFC 3339 (inclusive)")
    parser.add_argument("--until", required=True, help="window end, RFC 3339 (exclusive)")
    parser.add_argument("--job", help="one job: its job id or its Scheduler job name (default: every job)")


def missed_arguments(parser: argparse.ArgumentParser) -> None:
    window(parser)
    parser.add_argument("--json", action="store_true", help="a JSON list instead of a table")
    parser.add_argument("--all", action="store_true", help="every expected run, whatever its state")


def backfill_arguments(parser: argparse.ArgumentParser) -> None:
    window(parser)
    sent_to(parser)
    parser.add_argument("--dry-run", action="store_true", help="list what would be delivered, send nothing")
    parser.add_argument("--queue", nargs="?", const="", default=None,
                        help="queue each on the deliveries queue (default queue: DEDUP_TASKS_QUEUE)")  # fmt: skip


def rerun_arguments(parser: argparse.ArgumentParser) -> None:
    one_run(parser, time="(the run's)")
    parser.add_argument("--reason", required=True, help="why it runs again (kept in the run's record)")
    parser.add_argument("--by", help="who asks (default: gcloud's active account)")
    parser.add_argument("--rerun-id", help="the request's id, to repeat a request safely (default: a new one)")
    parser.add_argument("--queue", default="", help="the deliveries queue (default: DEDUP_TASKS_QUEUE)")


@dataclasses.dataclass(frozen=True)
class Command:
    help: str
    arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[DedupConfig, argparse.Namespace], int]
    reads_records: bool = True


COMMANDS: dict[str, Command] = {
    "fire": Command("send one Scheduler-like delivery of a job", fire_arguments, fire, reads_records=False),
    "run-id": Command("print a run's id (its Firestore document id)", one_run, print_run_id, reads_records=False),
    "show": Command("print a run's record", one_run, show_run),
    "stuck": Command("list in_progress runs whose lease has expired", lambda parser: None, list_stuck),
    "missed": Command("list the runs each job's cron expected that are missing or stuck", missed_arguments, missed),
    "backfill": Command("deliver each missing or stuck run at its schedule time", backfill_arguments, backfill),
    "rerun": Command("queue a re-run of one finished run: it runs once more, once", rerun_arguments, rerun, False),
}

# What a tool meets when Firestore cannot be reached, with the one thing to do about it.
NO_CREDENTIALS = (
    "no Google credentials for Firestore: run `gcloud auth application-default login`, or use the local "
    "emulator: `make dev` prints FIRESTORE_EMULATOR_HOST=...; export it in this shell"
)


NO_EMULATOR = "FIRESTORE_EMULATOR_HOST={}: no emulator answers there; start `make dev` (it prints the host to use)"


def check_emulator() -> None:
    """An emulator named but not running: said at once (the client would retry the connection for minutes)."""
    host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    if host and not is_ready(host):
        raise Unreachable(NO_EMULATOR.format(host))


class Unreachable(RuntimeError):
    """Firestore cannot be reached: the message says what to start or log in to."""


def unreachable(error: Exception) -> str:
    first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return f"Firestore did not answer ({first_line}): check `gcloud auth application-default login` and the project"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in COMMANDS.items():
        command.arguments(commands.add_parser(name, help=command.help, description=command.help))
    args = parser.parse_args(argv)
    command = COMMANDS[args.command]
    try:
        if command.reads_records:
            check_emulator()
        return command.run(DedupConfig.from_env(), args)
    except (BadArgument, Misconfigured) as error:  # each names its field, its value and the rule
        print(error, file=sys.stderr)
        return 2
    except google.auth.exceptions.DefaultCredentialsError:
        print(NO_CREDENTIALS, file=sys.stderr)
        return 2
    except (StoreUnavailable, Unreachable, QueueUnavailable) as error:
        if isinstance(error.__cause__, google.auth.exceptions.DefaultCredentialsError):  # the ledger's client
            print(NO_CREDENTIALS, file=sys.stderr)
            return 2
        print(error, file=sys.stderr)
        return 1
    except (google.api_core.exceptions.GoogleAPIError, google.auth.exceptions.TransportError) as error:
        print(unreachable(error), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
