"""The project's one operator command: `python -m scheduled_dedup_tools.runs <command> ...` in the project's root
(`--help` lists them; this package's README).

A job is named by its job id (`nightly`) or its Scheduler job name (`<slug>-nightly`). Firestore: the emulator
FIRESTORE_EMULATOR_HOST names (`make dev` prints it), else your gcloud credentials. A delivery carries the headers
Scheduler sends (keys.delivery_headers) to the local dev server, a deployed function (--url, with an identity token as
Scheduler's OIDC token) or the deliveries queue (--queue). A new command is one function with its @command line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import json
import os
import re
import shlex
import subprocess
import sys
import time
import urllib.parse
import uuid
from collections.abc import Callable

# The project's modules, from its root (`python -m` puts the directory it runs in on the path).
import audit
import dedup
import google.api_core.exceptions
import google.auth
import google.auth.exceptions
import keys
import requests
import rules
import schedules
import task_queue
from config import Config, Job
from config import current as current_config
from google.auth.transport.requests import AuthorizedSession
from ledger import RunLedger
from outcomes import InvalidDelivery, Misconfigured, StoreUnavailable

from scheduled_dedup_tools.firestore_emulator import is_ready

# What --queue names (terraform output task_queue).
TASKS_QUEUE = re.compile(
    f"projects/{rules.PROJECT_ID.pattern}/locations/{rules.REGION.pattern}/queues/" + "[A-Za-z0-9-]{1,100}"
)
# Reads or deliveries from which a progress bar is drawn (on stderr; the table goes to stdout).
PROGRESS_FROM = 50
RUN_HEADER = ["JOB", "SCHEDULE_TIME", "WALL_CLOCK", "STATE", "RUN_ID"]
# What a tool meets when Google or the emulator cannot be reached, with the one thing to do about it.
LOGIN = "no Google credentials: run `gcloud auth application-default login`"
NO_CREDENTIALS = f"{LOGIN}, or use the emulator: export the FIRESTORE_EMULATOR_HOST=... that `make dev` prints"
NO_EMULATOR = "FIRESTORE_EMULATOR_HOST={}: no emulator answers there; start `make dev` (it prints the host to use)"
# The flag of each re-run header: keys.read_rerun, the function's own check, judges the request before it is queued.
RERUN_FLAGS = {keys.RERUN_ID_HEADER: "--rerun-id", keys.RERUN_BY_HEADER: "--by", keys.RERUN_REASON_HEADER: "--reason"}
# The REST roots of the four APIs `smoke` calls. One override for tests: SMOKE_API_ROOT, a local stand-in for all.
API_ROOTS = {
    # POST {root}/v1/{name}:run - https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs/run
    "scheduler": "https://cloudscheduler.googleapis.com",
    # POST {root}/v2/entries:list - https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list
    "logging": "https://logging.googleapis.com",
    # GET {root}/v1/{field name} - Field.ttlConfig.state: CREATING, ACTIVE, NEEDS_REPAIR
    # (https://firebase.google.com/docs/firestore/reference/rest/v1/projects.databases.collectionGroups.fields)
    "firestore": "https://firestore.googleapis.com",
    # GET {root}/v3/projects/P/alertPolicies - https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies/list
    "monitoring": "https://monitoring.googleapis.com",
}
# Cloud Logging shows an entry within seconds, but its documented ingestion delay can reach a minute.
LOG_WAIT_SECONDS = 120.0
POLL_SECONDS = 5.0
# The label the module puts on everything it makes (terraform/modules/scheduled-dedup/main.tf, local.labels).
LABEL = "scheduled-dedup"
# The outcome lines that prove a Force run reached the work (main.py's ANSWERS names them). duplicate: an earlier
# smoke's Force run of the same slot ran it; that still proves Scheduler -> function -> Firestore.
ANSWERED = ("processed", "duplicate")


class BadArgument(ValueError):
    """An argument breaks a rule: the message names it, its value and the rule (exit status 2)."""


class Unavailable(RuntimeError):
    """The emulator, the queue, gcloud or a Google API did not serve: the message says what to start or fix (exit 1)."""


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
        bar = ("#" * (self.WIDTH * done // total)).ljust(self.WIDTH, "-")
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
# Where `backfill` and `rerun` send: by default to SENT_TO's server, like `fire`; from a laptop through the queue.
QUEUE = arg("--queue", nargs="?", const="", default=None, help="through the deliveries queue (config.yaml's)")
WINDOW = [
    arg("--since", required=True, help="window start, RFC 3339 (inclusive)"),
    arg("--until", required=True, help="window end, RFC 3339 (exclusive)"),
    arg("--job", help="one job: its job id or its Scheduler job name (default: every job)"),
]
COMMANDS: dict[str, tuple[str, Callable[[Config, argparse.Namespace], int], tuple]] = {}


def command(what: str, *arguments: tuple[tuple[str, ...], dict[str, object]]):
    """Make the function a command (its name, with '-' for '_'): what it does, its arguments."""

    def register(run: Callable[[Config, argparse.Namespace], int]):
        COMMANDS[run.__name__.replace("_", "-")] = (what, run, arguments)
        return run

    return register


def moment(name: str, text: str) -> dt.datetime:
    try:
        return keys.parse_schedule_time(text)
    except ValueError as error:
        raise BadArgument(f"{name}={text!r}: {error}") from None


def resolve_job(config: Config, job: str, field: str = "JOB") -> str:
    """The Scheduler job name (what a deployed run is keyed by) of a job id, a Scheduler job name or the audit's."""
    for name, spec in config.jobs.items():
        if job in (name, spec.job_id):
            return name
    if job == config.audit_job:
        return job
    known = ", ".join(f"{spec.job_id} ({name})" for name, spec in sorted(config.jobs.items()))
    raise BadArgument(f"{field}={job!r}: not a job of this project: {known or 'none'}, or {config.audit_job}")


def run_key(config: Config, args: argparse.Namespace) -> keys.RunKey:
    """The key of the run JOB TIME names, as the handler keys its delivery (default place: the function's)."""
    return keys.RunKey(
        project=args.project or config.project,
        location=args.location or config.location,
        job_name=resolve_job(config, args.job),
        schedule_time=moment("TIME", args.time),
    )


def selected_jobs(config: Config, job: str | None) -> dict[str, Job]:
    """Every job, or the one --job names."""
    if job is None:
        return dict(config.jobs)
    name = resolve_job(config, job, "--job")
    if name not in config.jobs:
        raise BadArgument(f"--job={job!r}: the audit's own job has no cron to check")
    return {name: config.jobs[name]}


def ledger(config: Config) -> RunLedger:
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
    account's (a VM's, or yours). A service account's is for the function's URL, which Cloud Run checks; gcloud takes
    --audiences from those only (cloud.google.com/sdk/gcloud/reference/auth/print-identity-token)."""
    account = impersonate or gcloud("config", "get-value", "account")
    flags = [f"--audiences={audience}"] if account.endswith(".gserviceaccount.com") else []
    if impersonate:
        flags += [f"--impersonate-service-account={impersonate}", "--include-email"]
    return gcloud("auth", "print-identity-token", *flags)


def target(args: argparse.Namespace) -> str:
    return args.url or f"http://127.0.0.1:{args.port}/"


def post(args: argparse.Namespace, headers: dict[str, str]) -> tuple[int, str]:
    """One delivery to --url (with an identity token) or `make dev`: (HTTP status, its answer), or (0, why not)."""
    url = target(args)
    if args.url:
        headers = {**headers, "Authorization": f"Bearer {identity_token(args.url, args.impersonate)}"}
    try:
        response = requests.post(url, headers=headers, timeout=args.timeout)
    except requests.RequestException as error:  # nothing answered
        return 0, f"cannot reach {url}: {error}" + ("" if args.url else " (is `make dev` running?)")
    return response.status_code, f"{response.status_code} {response.text.strip()}"


@command(
    "send one Scheduler-like delivery of a job",
    JOB,
    arg("--time", default="", help="schedule time, RFC 3339 (default: now rounded to the minute)"),
    *SENT_TO,
    *KEYED_FOR,
)
def fire(config: Config, args: argparse.Namespace) -> int:
    args.time = args.time or keys.rfc3339(dedup.utcnow().replace(second=0, microsecond=0))
    key = run_key(config, args)
    print(f"==> POST {target(args)}  job={key.job_name} schedule_time={keys.rfc3339(key.schedule_time)}", flush=True)
    # The project and location headers only when given: without them the function keys the run by its own.
    given = {keys.PROJECT_HEADER: args.project, keys.LOCATION_HEADER: args.location}
    headers = {name: value for name, value in keys.delivery_headers(key).items() if given.get(name, True)}
    status, answer = post(args, headers)
    print(f"<== {answer}" if status else answer, file=sys.stdout if status else sys.stderr)
    return 0 if 200 <= status < 300 else 1


@command("print a run's id (its Firestore document id)", *ONE_RUN)
def run_id(config: Config, args: argparse.Namespace) -> int:
    print(run_key(config, args).run_id)
    return 0


@command("print a run's record", *ONE_RUN)
def show(config: Config, args: argparse.Namespace) -> int:
    key = run_key(config, args)
    record = ledger(config).read_runs([key.run_id]).get(key.run_id)
    if record is None:
        print(f"{key.run_id}: no record (never claimed, released after a retryable failure, or deleted by TTL)")
        return 1
    print(f"{key.run_id}:\n{json.dumps(record, default=str, indent=2, sort_keys=True)}")
    return 0


@command("list in_progress runs whose lease has expired, and started runs whose execution is overdue")
def stuck(config: Config, args: argparse.Namespace) -> int:
    now = dedup.utcnow()
    found = ledger(config).stuck_runs(now)
    for run_id, record in found:
        print(f"{run_id}  job={record['job_name']} schedule_time={record['schedule_time']} "
              f"attempt={record.get('attempts')} lease_expires={record['lease_expires']}")  # fmt: skip
    # A proxy target's: its execution runs past its job's max_execution_seconds (docs/operations.md).
    overdue = [run for run in ledger(config).started_runs(now) if run.overdue(config, now)]
    for run in overdue:
        bound = config.max_execution_for(run.job_name) // dt.timedelta(seconds=1)
        print(f"{run.run_id}  job={run.job_name} schedule_time={run.schedule_time} overdue execution={run.execution} "
              f"started_at={run.started_at} max_execution_seconds={bound}")  # fmt: skip
    print(f"{len(found)} stuck run(s), {len(overdue)} overdue execution(s) in {config.collection}", file=sys.stderr)
    return 0


def find_runs(config: Config, args: argparse.Namespace) -> list[audit.AuditedRun]:
    """The audit over [--since, --until), for the selected jobs; refuses a window the records cannot answer."""
    since, until, now = moment("--since", args.since), moment("--until", args.until), dedup.utcnow()
    if since >= until:
        raise BadArgument(f"--until={args.until!r}: must be later than --since ({args.since})")
    if since <= now - config.retention:
        raise BadArgument(
            f"--since={args.since!r}: older than the retention window ({int(config.retention.total_seconds())} s); "
            "the TTL may have deleted those records, so a missing run cannot be told from an expired one"
        )
    jobs, records = selected_jobs(config, args.job), ledger(config)
    # As the audit does: each fire time by the schedule in force at it (the history an audit now would keep), and a
    # job judged from the first audit that saw it (none yet: the whole window).
    cursor = records.read_audit_cursor()
    sweep = audit.plan(cursor, jobs, now, config)
    windows = {name: (entry["since"], until) for name, entry in cursor.jobs.items() if name in jobs}
    progress = Progress("reading run records")
    return audit.audit_runs(records, jobs, since, until, now, progress, windows=windows, eras=sweep.eras)


def table(rows: list[list[str]], header: list[str]) -> str:
    widths = [max(len(str(row[i])) for row in [header, *rows]) for i in range(len(header))]
    lines = [
        "  ".join(str(cell).ljust(width) for cell, width in zip(row, widths, strict=True)) for row in [header, *rows]
    ]
    return "\n".join(line.rstrip() for line in lines)


def run_row(found: audit.AuditedRun) -> list[str]:
    dst = f" ({found.dst})" if found.dst else ""
    wall = f"{found.wall_time:%Y-%m-%d %H:%M} {found.time_zone}{dst}"
    return [found.job, keys.rfc3339(found.key.schedule_time), wall, found.state.value, found.key.run_id]


def summary(runs: list[audit.AuditedRun], args: argparse.Namespace) -> str:
    needing = len(list(audit.needing_delivery(runs)))
    return f"{needing} of {len(runs)} expected run(s) from {args.since} to {args.until} need a delivery"


@command(
    "list the runs each job's cron expected that are missing or stuck",
    *WINDOW,
    arg("--json", action="store_true", help="a JSON list instead of a table"),
    arg("--all", action="store_true", help="every expected run, whatever its state"),
)
def missed(config: Config, args: argparse.Namespace) -> int:
    runs = find_runs(config, args)
    listed = runs if args.all else list(audit.needing_delivery(runs))
    if args.json:
        print(json.dumps([found.as_json() for found in listed], indent=2))
    else:
        print(table([run_row(found) for found in listed], RUN_HEADER))
    print(summary(runs, args), file=sys.stderr)
    return 0


def queue_of(config: Config, queue: str) -> str:
    """--queue's value, or the deployed deliveries queue (config.yaml's slug and region name it) for a bare --queue."""
    queue = queue or config.tasks_queue or ""
    if not TASKS_QUEUE.fullmatch(queue):
        raise BadArgument(
            f"--queue={queue!r}: must be projects/PROJECT/locations/REGION/queues/QUEUE (terraform output task_queue)"
        )
    return queue


def queued(config: Config, queue: str, key: keys.RunKey, kind: str, request: keys.Rerun | None = None) -> str:
    """Queue one delivery of the run (task_queue.enqueue_run: one task per run or re-run id); what happened."""
    try:
        done = task_queue.enqueue_run(queue, key, kind, config.attempt_deadline_for(key.job_name), request)
    except google.api_core.exceptions.GoogleAPIError as error:
        raise Unavailable(f"Cloud Tasks did not queue {kind} {key.run_id}: {type(error).__name__}: {error}") from None
    return "queued" if done else "queued before (same task id): not again"


# Who queued a task is on record: CreateTask needs cloudtasks.tasks.create, a DATA_WRITE permission, so each call is in
# the project's Data Access audit log with the caller in protoPayload.authenticationInfo.principalEmail (Cloud Tasks
# "Audit logging", cloud.google.com/tasks/docs/audit-logging); X-Rerun-By is only what the caller wrote. The module's
# tasks.tf (a team bake: its bootstrap root) turns those logs on; the _Default bucket keeps them 30 days.
CREATE_TASK = "google.cloud.tasks.v2.CloudTasks.CreateTask"
WHO_FORMAT = "value(timestamp,protoPayload.authenticationInfo.principalEmail)"


def who_queued(queue: str, term: str, since: dt.datetime | None = None) -> str:
    """The gcloud command that prints when and by whom the tasks `term` names were queued: a task id, or the queue's
    name with `since` (a backfill's tasks). A bare term matches any field of the entry."""
    project = queue.split("/")[1]
    query = [
        f'logName="projects/{project}/logs/cloudaudit.googleapis.com%2Fdata_access"',
        f'protoPayload.methodName="{CREATE_TASK}"',
        f'"{term}"',
    ]
    if since is not None:
        query.append(f'timestamp>="{keys.rfc3339(since)}"')
    command = ["gcloud", "logging", "read", " ".join(query), f"--project={project}", "--freshness=30d"]
    command.append(f"--format={WHO_FORMAT}")
    return f"who queued it, on record (Cloud Tasks' Data Access audit log): {shlex.join(command)}"


@command(
    "deliver each missing or stuck run at its schedule time",
    *WINDOW,
    *SENT_TO,
    arg("--dry-run", action="store_true", help="list what would be delivered, send nothing"),
    QUEUE,
)
def backfill(config: Config, args: argparse.Namespace) -> int:
    """Deliver each missing or stuck run as Scheduler would: same job name and schedule time, so one executes."""
    runs = find_runs(config, args)
    listed = list(audit.needing_delivery(runs))
    queue = queue_of(config, args.queue) if args.queue is not None else None
    started = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=1)  # the audit log's clock may differ a little
    rows, failures, progress = [], 0, Progress("delivering")
    for done, found in enumerate(listed, start=1):
        if args.dry_run:
            answer = "(dry run: not sent)"
        elif queue:  # a task per run id: a backfill asked for twice is queued once
            answer = queued(config, queue, found.key, "backfill")
        else:  # what Scheduler would send for the run
            status, answer = post(args, keys.delivery_headers(found.key))
            failures += not 200 <= status < 300
        rows.append([*run_row(found)[:4], answer])
        progress(done, len(listed))
    print(table(rows, [*RUN_HEADER[:4], "ANSWER"]))
    verb = "would deliver" if args.dry_run else f"queued on {queue}" if queue else f"delivered to {target(args)}"
    print(f"{summary(runs, args)}; {verb} {len(listed)}, {failures} not answered 2xx", file=sys.stderr)
    if queue and listed and not args.dry_run:
        print(who_queued(queue, queue.rsplit("/", 1)[1], since=started), file=sys.stderr)
    return 1 if failures else 0


@command(
    "re-run one finished run: it runs once more, once",
    *ONE_RUN,
    arg("--reason", required=True, help="why it runs again (kept in the run's record)"),
    arg("--by", help="who asks (default: gcloud's active account)"),
    arg("--rerun-id", help="the request's id, to repeat a request safely (default: a new one)"),
    *SENT_TO,
    QUEUE,
)
def rerun(config: Config, args: argparse.Namespace) -> int:
    key = run_key(config, args)
    # Who asks, by default gcloud's active account: the identity Cloud Tasks' audit log records for the enqueue.
    by = args.by or gcloud("config", "get-value", "account")
    if not by:
        raise BadArgument("--by: not given, and gcloud has no active account; say who asks, e.g. --by ana@example.com")
    request = keys.Rerun(args.rerun_id or uuid.uuid4().hex, by, args.reason)
    try:
        keys.read_rerun(keys.delivery_headers(key, request))
    except InvalidDelivery as error:  # "<header>=<value>: <rule>", told by the flag that set it
        header, _, rest = str(error).partition("=")
        raise BadArgument(f"{RERUN_FLAGS.get(header, header)}={rest}") from None
    status, queue = 200, None
    if args.queue is not None:  # a task per re-run id: the same request twice is queued once
        queue = queue_of(config, args.queue)
        answer = queued(config, queue, key, "rerun", request)
    else:  # what the queue would deliver, sent to --url or the local dev server
        status, answer = post(args, keys.delivery_headers(key, request))
    when = keys.rfc3339(key.schedule_time)
    print(f"re-run {request.rerun_id} of {key.job_name} at {when} (run_id {key.run_id}): {answer}")
    again = f"the same request again, safely: --rerun-id {request.rerun_id}"
    outcome = f"python -m scheduled_dedup_tools.runs show {key.job_name} {args.time}"
    print(f"{again}; its outcome: {outcome}", file=sys.stderr)
    if queue:
        print(who_queued(queue, task_queue.task_id(request.rerun_id, "rerun")), file=sys.stderr)
    return 0 if 200 <= status < 300 else 1


class Apis:
    """The REST calls of `smoke`: with Application Default Credentials, or plainly to SMOKE_API_ROOT."""

    def __init__(self) -> None:
        root = os.environ.get("SMOKE_API_ROOT")
        self.roots = dict.fromkeys(API_ROOTS, root.rstrip("/")) if root else API_ROOTS
        self.session = requests.Session()
        if not root:
            try:
                credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
            except google.auth.exceptions.DefaultCredentialsError:
                raise Unavailable(f"{LOGIN} first") from None
            self.session = AuthorizedSession(credentials)

    def call(self, method: str, api: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.roots[api]}/{path}"
        response = self.session.request(method, url, json=body, timeout=30)
        if response.status_code >= 400:
            text = " ".join(response.text.split())[:200]
            raise Unavailable(f"{method} {url} answered {response.status_code}: {text}")
        return response.json() if response.content else {}


@command(
    "after a deploy: a Force run of a job, its outcome line, its record, the TTL and alert policies; PASS or FAIL",
    arg("--job", help="job id or Scheduler job name (default: the first job)"),
    arg("--log-wait", type=float, default=LOG_WAIT_SECONDS, help="seconds to wait for the log line"),
)
def smoke(config: Config, args: argparse.Namespace) -> int:
    """Is the deployed project alive? Five steps, a PASS or FAIL line each (what each proves, what its FAIL means and
    the roles they need: docs/operations.md); a step an earlier failure leaves nothing to check fails."""
    job_name = min(selected_jobs(config, args.job))  # config.yaml has a job at least (rules.check_jobs)
    apis = Apis()
    # A Force run sends the job's next fire time (Google's guide); the line of that run is the one to read.
    # `since` allows for a few seconds between this machine's clock and the function's.
    since = dedup.utcnow() - dt.timedelta(seconds=5)
    schedule_time = schedules.next_fire_after(config.jobs[job_name].fire_rule, since)
    resource = f"projects/{config.project}/locations/{config.location}/jobs/{job_name}"
    passed: list[bool] = []
    line: dict = {}

    def force_run() -> tuple[bool, str]:
        apis.call("POST", "scheduler", f"v1/{resource}:run", {})
        return True, f"{resource}:run accepted"

    def outcome_line() -> tuple[bool, str]:
        if not passed[0]:
            return False, "skipped: no Force run"
        log_filter = (
            f'jsonPayload.job="{job_name}" AND jsonPayload.schedule_time="{schedule_time.isoformat()}" '
            f'AND jsonPayload.outcome:* AND timestamp>="{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
        )
        body = {"resourceNames": [f"projects/{config.project}"], "filter": log_filter, "orderBy": "timestamp desc"}
        deadline = time.monotonic() + args.log_wait
        while not (entries := apis.call("POST", "logging", "v2/entries:list", body).get("entries")):
            if time.monotonic() >= deadline:
                wanted = f"{job_name} at {schedule_time.isoformat()}"
                return False, f"no outcome line of {wanted} in Cloud Logging after {args.log_wait:.0f} s"
            time.sleep(POLL_SECONDS)
        line.update(entries[0].get("jsonPayload", {}))
        detail = f"outcome={line.get('outcome')} http_status={line.get('http_status')} run_id={line.get('run_id')}"
        return line.get("outcome") in ANSWERED, f"{detail}: {line.get('message', '')}"

    def run_record() -> tuple[bool, str]:
        if not line.get("run_id"):
            return False, "skipped: no run_id from an outcome line"
        record = ledger(config).read_runs([line["run_id"]]).get(line["run_id"]) or {}
        status, execution = record.get("status"), record.get("execution")
        # A proxy target's run is `started` with its execution's name until a later delivery or audit sees it end.
        ok = status == dedup.Status.COMPLETED or (status == dedup.Status.STARTED and bool(execution))
        ran = f" execution={execution}" if execution else ""
        return ok, f"{config.collection}/{line['run_id']} status={status}{ran}"

    def ttl_policy() -> tuple[bool, str]:
        field = f"{config.database_name}/collectionGroups/{config.collection}/fields/expire_at"
        state = apis.call("GET", "firestore", f"v1/{field}").get("ttlConfig", {}).get("state", "none")
        return state == "ACTIVE", f"{config.collection}.expire_at ttlConfig.state={state}"

    def alert_policies() -> tuple[bool, str]:
        slug = config.audit_job.removesuffix("_audit")
        query = urllib.parse.urlencode({"filter": f'user_labels."{LABEL}" = "{slug}"'})
        path = f"v3/projects/{config.project}/alertPolicies?{query}"
        policies = apis.call("GET", "monitoring", path).get("alertPolicies", [])
        disabled = [policy.get("displayName", "?") for policy in policies if not policy.get("enabled", False)]
        detail = f"; disabled: {', '.join(disabled)}" if disabled else ", all enabled"
        return bool(policies) and not disabled, f"{len(policies)} alert policies labelled {LABEL}={slug}{detail}"

    probes = {"force run": force_run, "outcome line": outcome_line, "run record": run_record}
    for name, probe in {**probes, "TTL policy": ttl_policy, "alert policies": alert_policies}.items():
        try:
            ok, detail = probe()
        except UNAVAILABLE as error:  # what Google or the emulator did not serve fails the step
            ok, detail = False, str(error)
        print(f"{'PASS' if ok else 'FAIL'}  {name:<15} {detail}", flush=True)
        passed.append(ok)
    print(f"smoke: {'PASS' if all(passed) else 'FAIL'} ({sum(passed)}/{len(passed)} steps)")
    return 0 if all(passed) else 1


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
        return args.run(current_config(), args)
    except (BadArgument, Misconfigured) as error:  # each names its field, its value and the rule
        message, status = str(error), 2
    except UNAVAILABLE as error:  # one line; no credentials (the ledger's client wraps it) names the fix
        message, status = (str(error).strip() or type(error).__name__).splitlines()[0], 1
        if any(isinstance(e, google.auth.exceptions.DefaultCredentialsError) for e in (error, error.__cause__)):
            message, status = NO_CREDENTIALS, 2
    if args.run is smoke:  # its verdict, whatever stopped it: one FAIL line, exit status 1
        message, status = f"smoke: FAIL ({message})", 1
    print(message, file=sys.stderr)
    return status


if __name__ == "__main__":
    sys.exit(main())
