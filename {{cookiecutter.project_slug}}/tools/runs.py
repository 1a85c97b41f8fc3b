"""The project's one operator command: `python tools/runs.py <command> ...` (`--help` lists them; docs/operations.md).

Every command that names a job takes its job id (`nightly`) or its Scheduler job name (`<slug>-nightly`, what a
run is keyed by): `resolve_job` turns either into the deployed name. Firestore: the emulator
FIRESTORE_EMULATOR_HOST names (`make dev` prints it), else your gcloud credentials. A delivery carries the headers
Scheduler sends (task_queue.delivery_headers); it goes to the local dev server, to a deployed function (--url, with
an identity token as Scheduler's OIDC token), or through the deliveries queue (--queue). A new command is one
function, its @command line says what it does and takes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path

import google.api_core.exceptions
import google.auth.exceptions

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: the protocol modules
from firestore_emulator import is_ready  # noqa: E402

import audit  # noqa: E402
import dedup  # noqa: E402
import keys  # noqa: E402
import task_queue  # noqa: E402
from ledger import RunLedger  # noqa: E402
from outcomes import InvalidDelivery, Misconfigured, StoreUnavailable  # noqa: E402
from settings import TASKS_QUEUE, DedupConfig, JobSpec  # noqa: E402

# Reads or deliveries from which a progress bar is drawn (on stderr; the table goes to stdout).
PROGRESS_FROM = 50
RUN_HEADER = ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "RUN_ID"]
# What a tool meets when Firestore cannot be reached, with the one thing to do about it.
NO_CREDENTIALS = (
    "no Google credentials: run `gcloud auth application-default login`, or for Firestore use the local emulator: "
    "`make dev` prints FIRESTORE_EMULATOR_HOST=...; export it in this shell"
)
NO_EMULATOR = "FIRESTORE_EMULATOR_HOST={}: no emulator answers there; start `make dev` (it prints the host to use)"
# The flag of each re-run header: keys.read_rerun, the function's own check, judges the request before it is queued.
RERUN_FLAGS = {keys.RERUN_ID_HEADER: "--rerun-id", keys.RERUN_BY_HEADER: "--by", keys.RERUN_REASON_HEADER: "--reason"}


class BadArgument(ValueError):
    """An argument breaks a rule: the message names it, its value and the rule (exit status 2)."""


class Unavailable(RuntimeError):
    """The emulator, the queue or gcloud did not serve: the message says what to start or fix (exit status 1)."""


# What may fail for want of Google: the message says what to start, log in to or fix.
UNAVAILABLE = (
    google.auth.exceptions.GoogleAuthError,
    google.api_core.exceptions.GoogleAPIError,
    StoreUnavailable,
    Unavailable,
)


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


def arg(*flags: str, **options: object) -> tuple[tuple[str, ...], dict[str, object]]:
    """One argparse argument, as `add_argument` takes it."""
    return flags, options


JOB = arg("job", help="job id (nightly) or Scheduler job name (<slug>-nightly)")
KEYED_FOR = [
    arg("--project", help="the X-Scheduler-Project of the delivery (default: the function's)"),
    arg("--location", help="the X-Scheduler-Location of the delivery (default: the function's)"),
]
ONE_RUN = [JOB, arg("time", help="schedule time, RFC 3339 (X-CloudScheduler-ScheduleTime)"), *KEYED_FOR]
SENT_TO = [  # where `fire` and `backfill` send their deliveries
    arg("--url", default="", help="a deployed function's URL (default: the local dev server)"),
    arg("--impersonate", help="with --url: the service account whose identity token to send (default: yours)"),
    arg("--port", type=int, default=8080, help="the local dev server's port"),
    arg("--timeout", type=float, default=600.0, help="seconds to wait for each answer"),
]
WINDOW = [
    arg("--since", required=True, help="window start, RFC 3339 (inclusive)"),
    arg("--until", required=True, help="window end, RFC 3339 (exclusive)"),
    arg("--job", help="one job: its job id or its Scheduler job name (default: every job)"),
]
COMMANDS: dict[str, tuple[str, Callable[[DedupConfig, argparse.Namespace], int], tuple]] = {}


def command(what: str, *arguments: tuple[tuple[str, ...], dict[str, object]]):
    """Make the function a command (its name, with '-' for '_'): what it does, its arguments."""

    def register(run: Callable[[DedupConfig, argparse.Namespace], int]):
        COMMANDS[run.__name__.replace("_", "-")] = (what, run, arguments)
        return run

    return register


def moment(name: str, text: str) -> dt.datetime:
    try:
        return keys.parse_schedule_time(text)
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


def run_key(config: DedupConfig, args: argparse.Namespace) -> keys.RunKey:
    """The key of the run JOB TIME names, as the deployed handler computes it: the Scheduler job name, the schedule
    time in UTC, the project/location it is delivered for (default: the function's own)."""
    return keys.RunKey(
        project=args.project or config.project,
        location=args.location or config.location,
        job_name=resolve_job(config, args.job),
        schedule_time=moment("TIME", args.time),
    )


def selected_jobs(config: DedupConfig, job: str | None) -> dict[str, JobSpec]:
    """All of DEDUP_JOBS, or the one --job names (by its Scheduler job name or its job id)."""
    if job is None:
        return dict(config.jobs)
    name = resolve_job(config, job, "--job")
    if name not in config.jobs:
        raise BadArgument(f"--job={job!r}: the audit's own job has no cron to check")
    return {name: config.jobs[name]}


def ledger(config: DedupConfig) -> RunLedger:
    """The run records. An emulator named but not running is said at once (the client would retry for minutes)."""
    host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    if host and not is_ready(host):
        raise Unavailable(NO_EMULATOR.format(host))
    return RunLedger(config)


def gcloud(*arguments: str) -> str:
    """What gcloud prints, or Unavailable naming what failed (the tools need it for --url's token and --by)."""
    try:
        return subprocess.run(["gcloud", *arguments], check=True, capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        raise Unavailable(f"gcloud is not installed: `gcloud {' '.join(arguments[:2])}` is needed here") from None
    except subprocess.CalledProcessError as error:
        raise Unavailable(f"gcloud {' '.join(arguments[:2])} failed: {error.stderr.strip()}") from None


@functools.cache
def identity_token(audience: str, impersonate: str | None) -> str:
    """An OIDC identity token from gcloud, once per command: the impersonated service account's, else the active
    account's (a VM's service account, or yours). Its audience is the function's URL, as Cloud Run checks, for a
    service account; gcloud takes --audiences from service accounts only, so a person's has gcloud's own
    (cloud.google.com/sdk/gcloud/reference/auth/print-identity-token)."""
    account = impersonate or gcloud("config", "get-value", "account")
    flags = [f"--audiences={audience}"] if account.endswith(".gserviceaccount.com") else []
    if impersonate:
        flags += [f"--impersonate-service-account={impersonate}", "--include-email"]
    return gcloud("auth", "print-identity-token", *flags)


def target(args: argparse.Namespace) -> str:
    return args.url or f"http://127.0.0.1:{args.port}/"


def post(args: argparse.Namespace, headers: dict[str, str]) -> tuple[int, str]:
    """One delivery to --url (with an identity token) or the local dev server: (HTTP status, what it answered);
    (0, why) when nothing answered."""
    url = target(args)
    if args.url:
        headers = {**headers, "Authorization": f"Bearer {identity_token(args.url, args.impersonate)}"}
    request = urllib.request.Request(url, data=b"", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=args.timeout) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as error:
        status, body = error.code, error.read()
    except OSError as error:  # URLError included: nothing answered
        return 0, f"cannot reach {url}: {error}" + ("" if args.url else " (is `make dev` running?)")
    return status, f"{status} {body.decode(errors='replace').strip()}"


@command(
    "send one Scheduler-like delivery of a job",
    JOB,
    arg("--time", default="", help="schedule time, RFC 3339 (default: now rounded to the minute)"),
    *SENT_TO,
    *KEYED_FOR,
)
def fire(config: DedupConfig, args: argparse.Namespace) -> int:
    """One delivery as Scheduler sends it: the job's Scheduler job name, a schedule time (default: this minute)."""
    args.time = args.time or audit.rfc3339(dedup.utcnow().replace(second=0, microsecond=0))
    key = run_key(config, args)
    print(f"==> POST {target(args)}  job={key.job_name} schedule_time={audit.rfc3339(key.schedule_time)}", flush=True)
    # The project and location headers only when given: without them the function keys the run by its own.
    given = {keys.PROJECT_HEADER: args.project, keys.LOCATION_HEADER: args.location}
    headers = {name: value for name, value in task_queue.delivery_headers(key).items() if given.get(name, True)}
    status, answer = post(args, headers)
    print(f"<== {answer}" if status else answer, file=sys.stdout if status else sys.stderr)
    return 0 if 200 <= status < 300 else 1


@command("print a run's id (its Firestore document id)", *ONE_RUN)
def run_id(config: DedupConfig, args: argparse.Namespace) -> int:
    print(run_key(config, args).run_id)
    return 0


@command("print a run's record", *ONE_RUN)
def show(config: DedupConfig, args: argparse.Namespace) -> int:
    key = run_key(config, args)
    record = ledger(config).read_runs([key.run_id]).get(key.run_id)
    if record is None:
        print(f"{key.run_id}: no record (never claimed, released after a retryable failure, or deleted by TTL)")
        return 1
    print(f"{key.run_id}:\n{json.dumps(record, default=str, indent=2, sort_keys=True)}")
    return 0


@command("list in_progress runs whose lease has expired")
def stuck(config: DedupConfig, args: argparse.Namespace) -> int:
    found = ledger(config).stuck_runs(dedup.utcnow())
    for run_id, record in found:
        print(f"{run_id}  job={record['job_name']} schedule_time={record['schedule_time']} "
              f"attempt={record.get('attempts')} lease_expires={record['lease_expires']}")  # fmt: skip
    print(f"{len(found)} stuck run(s) in {config.collection}", file=sys.stderr)
    return 0


def find_runs(config: DedupConfig, args: argparse.Namespace) -> list[audit.AuditedRun]:
    """The audit over [--since, --until), for the selected jobs; refuses a window the records cannot answer."""
    since, until, now = moment("--since", args.since), moment("--until", args.until), dedup.utcnow()
    if since >= until:
        raise BadArgument(f"--until={args.until!r}: must be later than --since ({args.since})")
    if since <= now - config.retention:
        raise BadArgument(
            f"--since={args.since!r}: older than the retention window ({int(config.retention.total_seconds())} s); "
            "the TTL may have deleted those records, so a missing run cannot be told from an expired one"
        )
    jobs = selected_jobs(config, args.job)
    records = ledger(config)
    # As the audit does: a job is judged from the first audit that saw it (none yet: the whole window).
    starts = audit.starts(records, jobs)
    return audit.audit_runs(records, jobs, since, until, now, progress=Progress("reading run records"), starts=starts)


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


def summary(runs: list[audit.AuditedRun], args: argparse.Namespace) -> str:
    needing = len(list(audit.needing_delivery(runs)))
    return f"{needing} of {len(runs)} expected run(s) from {args.since} to {args.until} need a delivery"


@command(
    "list the runs each job's cron expected that are missing or stuck",
    *WINDOW,
    arg("--json", action="store_true", help="a JSON list instead of a table"),
    arg("--all", action="store_true", help="every expected run, whatever its state"),
)
def missed(config: DedupConfig, args: argparse.Namespace) -> int:
    runs = find_runs(config, args)
    listed = runs if args.all else list(audit.needing_delivery(runs))
    if args.json:
        print(json.dumps([found.as_json() for found in listed], indent=2))
    else:
        print(table([run_row(found, config) for found in listed], RUN_HEADER))
    print(summary(runs, args), file=sys.stderr)
    return 0


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
        raise Unavailable(f"Cloud Tasks did not queue {name}: {type(error).__name__}: {error}") from None


@command(
    "deliver each missing or stuck run at its schedule time",
    *WINDOW,
    *SENT_TO,
    arg("--dry-run", action="store_true", help="list what would be delivered, send nothing"),
    arg("--queue", nargs="?", const="", default=None, help="queue each on the deliveries queue (DEDUP_TASKS_QUEUE)"),
)
def backfill(config: DedupConfig, args: argparse.Namespace) -> int:
    """Deliver each missing or stuck run as Scheduler would: same job name and schedule time, so one executes."""
    runs = find_runs(config, args)
    listed = list(audit.needing_delivery(runs))
    queue = queue_of(config, args.queue) if args.queue is not None else None
    rows, failures, progress = [], 0, Progress("delivering")
    for done, found in enumerate(listed, start=1):
        key = keys.RunKey(config.project, config.location, found.job, found.schedule_time)
        headers = task_queue.delivery_headers(key)  # what Scheduler would send for the run, by either way
        if args.dry_run:
            answer = "(dry run: not sent)"
        elif queue:  # a task per run id: a backfill asked for twice is queued once
            answer = queued(queue, task_queue.task_id(found.run_id, "backfill"), headers)
        else:
            status, answer = post(args, headers)
            failures += not 200 <= status < 300
        rows.append([*run_row(found, config)[:4], answer])
        progress(done, len(listed))
    print(table(rows, ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "ANSWER"]))
    verb = "would deliver" if args.dry_run else f"queued on {queue}" if queue else f"delivered to {target(args)}"
    print(f"{summary(runs, args)}; {verb} {len(listed)}, {failures} not answered 2xx", file=sys.stderr)
    return 1 if failures else 0


@command(
    "queue a re-run of one finished run: it runs once more, once",
    *ONE_RUN,
    arg("--reason", required=True, help="why it runs again (kept in the run's record)"),
    arg("--by", help="who asks (default: gcloud's active account)"),
    arg("--rerun-id", help="the request's id, to repeat a request safely (default: a new one)"),
    arg("--queue", default="", help="the deliveries queue (default: DEDUP_TASKS_QUEUE)"),
)
def rerun(config: DedupConfig, args: argparse.Namespace) -> int:
    """Queue a re-run of one finished run: the function runs it once more, once per re-run id, and records it."""
    key = run_key(config, args)
    # Who asks, by default gcloud's active account: the identity Cloud Tasks' audit log records for the enqueue.
    by = args.by or gcloud("config", "get-value", "account")
    if not by:
        raise BadArgument("--by: not given, and gcloud has no active account; say who asks, e.g. --by ana@example.com")
    request = keys.Rerun(args.rerun_id or uuid.uuid4().hex, by, args.reason)
    headers = task_queue.delivery_headers(key, request)
    try:
        keys.read_rerun(headers)
    except InvalidDelivery as error:  # "<header>=<value>: <rule>", told by the flag that set it
        header, _, rest = str(error).partition("=")
        raise BadArgument(f"{RERUN_FLAGS.get(header, header)}={rest}") from None
    answer = queued(queue_of(config, args.queue), task_queue.task_id(request.rerun_id, "rerun"), headers)
    when = audit.rfc3339(key.schedule_time)
    print(f"re-run {request.rerun_id} of {key.job_name} at {when} (run_id {key.run_id}): {answer}")
    again = f"the same request again, safely: --rerun-id {request.rerun_id}"
    print(f"{again}; its outcome: runs.py show {key.job_name} {args.time}", file=sys.stderr)
    return 0


def unavailable(error: Exception) -> tuple[str, int]:
    """One line for what Google did not give, and the exit status: no credentials (2) names the fix."""
    if any(isinstance(e, google.auth.exceptions.DefaultCredentialsError) for e in (error, error.__cause__)):
        return NO_CREDENTIALS, 2  # the ledger's client wraps the error in StoreUnavailable
    return (str(error).strip() or type(error).__name__).splitlines()[0], 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (what, run, arguments) in COMMANDS.items():
        subparser = commands.add_parser(name, help=what, description=what)
        subparser.set_defaults(run=run)
        for flags, options in arguments:
            subparser.add_argument(*flags, **options)
    args = parser.parse_args(argv)
    try:
        return args.run(DedupConfig.from_env(), args)
    except (BadArgument, Misconfigured) as error:  # each names its field, its value and the rule
        message, status = str(error), 2
    except UNAVAILABLE as error:
        message, status = unavailable(error)
    print(message, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
