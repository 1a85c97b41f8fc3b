"""Each Cloud Scheduler run exactly once: the claim protocol, and the only code that touches Firestore.

A run is keyed by (project, location, job name, schedule time): Cloud Scheduler keeps the schedule
time constant across retries of one run. The key's sha256 is the run's document id, and the record
moves through one state machine (see `decide`):

    absent ──create──▶ in_progress ──complete──▶ completed    replays: duplicate, the work does not run
                          │ ├──fail (terminal)──▶ failed       replays: duplicate, the work does not run
                          │ ├──skip (too late)──▶ skipped      delivered past the job's max_lateness_seconds
                          │ ├──start (a proxy)──▶ started ──execution ended──▶ completed | failed
                          │                  (a proxy bake follows it: the job's next delivery, the audit)
                          │ └──release (retryable)──▶ absent   the next retry runs at once
                          └──lease expired──▶ taken over by the next delivery (new attempt_id)
    A record past expire_at counts as absent: Firestore's TTL deletes it lazily, often a day later.

Every write is conditional, so no transaction is needed: the claim is a create (fails if the run
exists), a takeover and every finish are guarded by the update time the claim last wrote. An
attempt whose lease was taken over therefore cannot overwrite or delete its successor's record.
Cost: a fresh run is 2 RPCs (create, finish), a replay 2 (create, read), a takeover 4.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import hashlib
import json
import os
import re
import uuid
import zoneinfo
from collections.abc import Iterable, Mapping
from types import MappingProxyType

import google.auth.exceptions
from cronsim import CronSim, CronSimError
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

import config
import rules
import schedules
from run_context import RunContext

UTC = dt.UTC

JOB_NAME_HEADER = "X-CloudScheduler-JobName"
SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"
# Cloud Scheduler sends no project or location; our Scheduler jobs add these (see terraform/), so
# one endpoint can serve jobs of several projects or regions that reuse a JOB_ID.
PROJECT_HEADER = "X-Scheduler-Project"
LOCATION_HEADER = "X-Scheduler-Location"
# A re-run: a person asked (tools/runs.py rerun, through the Cloud Tasks queue) that a finished run
# runs once more. The id is the request's: its retries carry the same id, so the work runs once per id.
RERUN_ID_HEADER = "X-Rerun-Id"
RERUN_BY_HEADER = "X-Rerun-By"
RERUN_REASON_HEADER = "X-Rerun-Reason"

# A forced run ("Force run" in the console) sends the next scheduled time, which can lie a whole
# schedule period ahead; anything further out is refused as nonsense. Not a setting: no project differs.
MAX_FUTURE_SECONDS = "2764800"


@functools.cache
def baked_settings() -> Mapping[str, str]:
    """config.yaml (read once per process by config.load) as DEDUP_* values, or Misconfigured. Each is overridden
    by the environment variable of its name, for a test or a local run: the deployed function gets none."""
    try:
        loaded = config.load()
    except config.ConfigError as error:
        raise Misconfigured(str(error)) from None
    jobs = {
        loaded.scheduler_job_name(job_id): {
            "job_id": job_id,
            "schedule": job.schedule,
            "time_zone": job.time_zone,
            "attempt_deadline_seconds": job.timing["attempt_deadline_seconds"],
            "lease_seconds": job.timing["lease_seconds"],
            "retry_window_seconds": job.retry_window_seconds,
            **({"max_lateness_seconds": job.max_lateness_seconds} if job.max_lateness_seconds is not None else {}),
            # issue 18's per-job choices, as written; a switch that is off is left out.
            **{key: value for key, value in job.options.items() if value is not False},
        }
        for job_id, job in loaded.jobs.items()
    }
    defaults = loaded.defaults
    return MappingProxyType({
        "DEDUP_PROJECT": loaded.project,
        "DEDUP_LOCATION": loaded.region,
        "DEDUP_DATABASE": loaded.database,
        "DEDUP_COLLECTION": loaded.collection,
        # The audit job's (and a job's that sets none): the defaults block's.
        "DEDUP_LEASE_SECONDS": str(defaults["lease_seconds"]),
        "DEDUP_ATTEMPT_DEADLINE_SECONDS": str(defaults["attempt_deadline_seconds"]),
        "DEDUP_RETRY_WINDOW_SECONDS": str(
            rules.retry_window_seconds(
                defaults["attempt_deadline_seconds"],
                defaults["retry_count"],
                defaults["max_backoff_seconds"],
                defaults["max_retry_duration_seconds"],
            )
        ),
        "DEDUP_RETENTION_SECONDS": str(loaded.retention_seconds),
        "DEDUP_MAX_FUTURE_SECONDS": MAX_FUTURE_SECONDS,
        "DEDUP_JOBS": json.dumps(jobs),
        "DEDUP_AUDIT_JOB": loaded.audit_job_name,
        "DEDUP_TASKS_QUEUE": loaded.task_queue,
        # config.yaml's `serve`; its default (only the function's own place) is left out, so that an overridden
        # DEDUP_PROJECT / DEDUP_LOCATION stays the one place served (DedupConfig.served).
        **({"DEDUP_SERVE": json.dumps([{"project": p, "location": loc} for p, loc in loaded.serve])}
           if loaded.serve != ((loaded.project, loaded.region),) else {}),
    })  # fmt: skip


# The stop (stop.py): a run's work is killed this long before its job's attempt deadline, so that the
# release (one Firestore write, RPC_TIMEOUT_SECONDS at most) and the answer reach Cloud Scheduler before
# it gives up on the attempt: two Firestore deadlines, as the kill and the answer take milliseconds.
RELEASE_MARGIN = dt.timedelta(seconds=10)
DEADLINE_RULE = f"must be a whole number of seconds above the release margin ({RELEASE_MARGIN.seconds} s)"

# Bounded time per Firestore call. Writes are never retried by the client: a write whose answer
# was lost must not be repeated blind; the delivery answers 5xx and Cloud Scheduler retries it.
RPC_TIMEOUT_SECONDS = 5.0
READ_RETRY = api_retry.Retry(initial=0.1, maximum=1.0, multiplier=2.0, timeout=RPC_TIMEOUT_SECONDS)
# Ids per BatchGetDocuments: a bounded request (~100 KB of document names) and a bounded answer.
READ_BATCH = 1000
# The audit's bookmark, one document in the runs collection for every job: per Scheduler job name when
# the audit first saw the job (`since`) and up to when its runs are judged (`judged_until`), and when the
# last full sweep ran. One read and one write per audit whatever the jobs (about 100 bytes a job: the
# 1 MiB document limit holds some 10,000). Not 64 hex characters, so never a run id; no status, so no
# query of runs.py finds it; no expire_at, so kept.
AUDIT_CURSOR_ID = "audit-cursor"
# Before the cursor, one marker per job held `since` (read once, when the cursor is first written).
AUDIT_START_PREFIX = "audit-start-"

# A guarded write's refusal, the protocol's answer "another attempt changed or removed the record
# since this one last wrote it": FAILED_PRECONDITION (its update time moved on; the emulator says so
# for a deleted record too) or NOT_FOUND (the record is gone).
GUARD_FAILED = (api_exceptions.FailedPrecondition, api_exceptions.NotFound)
# The same two codes where a call does not expect them as its answer: the database itself cannot
# hold the records. NOT_FOUND: it does not exist, e.g. a new project or a misspelt DEDUP_DATABASE
# (googleapis/nodejs-firestore#2216, firebase/firebase-admin-node#2732); FAILED_PRECONDITION "The
# Cloud Firestore API is not available for Firestore in Datastore Mode database ..."
# (quarkiverse/quarkus-google-cloud-services#422). Retries cannot help; a deploy does.
DATABASE_UNUSABLE = (api_exceptions.NotFound, api_exceptions.FailedPrecondition)

WHOLE_NUMBER = re.compile(r"[0-9]+")
RERUN_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
# Who asked and why: printable text of bounded length (a header value; it is stored in the record).
RERUN_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,500}")
TASKS_QUEUE = re.compile(
    r"projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/[a-z]+-[a-z]+[0-9]{1,2}/queues/[A-Za-z0-9-]{1,100}"
)
JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,500}")
PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
LOCATION = re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}")
RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<hms>\d{2}:\d{2}):(?P<second>\d{2})(?P<fraction>\.\d+)?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
)


class Status(enum.StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"  # delivered past max_lateness_seconds, or while the job's execution ran (overlap: skip)
    STARTED = "started"  # a proxy target started the run's execution; how it ends is not known yet


class Outcome(enum.StrEnum):
    """What happened to one delivery, by its log label: one name from the decision to the exception
    to the log line. What Cloud Scheduler is answered is the HTTP adapter's business (main.py)."""

    PROCESSED = "processed"
    DUPLICATE = "duplicate"  # the run is finished already; the work does not run again
    IN_PROGRESS = "in_progress"  # another attempt holds a live lease
    INVALID_DELIVERY = "invalid_delivery"
    TERMINAL_FAILURE = "terminal_failure"
    RETRYABLE_FAILURE = "retryable_failure"
    SUPERSEDED = "superseded"  # this attempt's lease expired and another took the run over
    STORE_UNAVAILABLE = "store_unavailable"
    MISCONFIGURED = "misconfigured"  # a DEDUP_* setting, its database or the work for a job: a deploy fixes it
    SKIPPED_LATE = "skipped_late"  # past max_lateness_seconds: recorded `skipped`, the work does not run
    SKIPPED_DST_GAP = "skipped_dst_gap"  # a time the clocks skip, of a job with dst_gap: skip; nothing written
    METHOD_NOT_ALLOWED = "method_not_allowed"  # not a POST: Cloud Scheduler's HTTP jobs send POST (terraform/)
    SKIPPED_OVERLAP = "skipped_overlap"  # the job's previous execution still runs (overlap: skip): recorded `skipped`


class RunNotProcessed(Exception):
    """The delivery ends without this attempt finishing the work; one subclass per outcome, named after it."""

    outcome: Outcome


class InvalidDelivery(RunNotProcessed):
    outcome = Outcome.INVALID_DELIVERY


class Duplicate(RunNotProcessed):
    outcome = Outcome.DUPLICATE


class InProgress(RunNotProcessed):
    outcome = Outcome.IN_PROGRESS


class Superseded(RunNotProcessed):
    """This attempt's lease expired and another attempt took the run over; its result is not recorded."""

    outcome = Outcome.SUPERSEDED


class StoreUnavailable(RunNotProcessed):
    outcome = Outcome.STORE_UNAVAILABLE


class Misconfigured(RunNotProcessed, ValueError):
    outcome = Outcome.MISCONFIGURED


class SkippedLate(RunNotProcessed):
    """Delivered later than its job's max_lateness_seconds: recorded `skipped`, the work does not run."""

    outcome = Outcome.SKIPPED_LATE


class SkippedDstGap(RunNotProcessed):
    """A wall-clock time daylight saving skips, of a job whose dst_gap is skip: nothing is written or run."""

    outcome = Outcome.SKIPPED_DST_GAP


class MethodNotAllowed(RunNotProcessed):
    outcome = Outcome.METHOD_NOT_ALLOWED


class SkippedOverlap(RunNotProcessed):
    """A proxy target's job whose previous execution still runs, with overlap "skip": recorded `skipped`."""

    outcome = Outcome.SKIPPED_OVERLAP


# What a proxy target's new run does while the job's previous execution still runs (JobSpec.overlap).
OVERLAP_RULES = rules.JOB_CHOICES["overlap"]


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One Scheduler job as DEDUP_JOBS describes it: its id in the answers, its cron, the zone it is read in,
    its lateness limit."""

    job_id: str  # as written in config.yaml (`nightly`); Scheduler sends "<slug>-<job id>"
    schedule: str
    time_zone: str
    max_lateness: dt.timedelta | None = None  # None: a delivery may come any time after its schedule time
    paused: bool = False  # paused in Scheduler too (terraform): the audit reports its fire times `paused`
    catch_up: bool = False  # the audit delivers a missing run itself (Cloud Tasks) while within max_lateness
    overlap: str = "skip"  # proxy targets: one of OVERLAP_RULES
    # The job's own numbers (config.yaml); None: the project's (DedupConfig.attempt_deadline, .lease, .retry_window).
    attempt_deadline: dt.timedelta | None = None
    lease: dt.timedelta | None = None
    retry_window: dt.timedelta | None = None
    dst_gap: str = schedules.END_OF_GAP  # a wall-clock time the clocks skip: run at the gap's end, or skip

    @property
    def fire_rule(self) -> schedules.Schedule:
        """When the job fires: what schedules.py computes fire times from."""
        return schedules.Schedule(self.schedule, self.time_zone, self.dst_gap)


@functools.lru_cache(maxsize=8)
def parse_jobs(text: str) -> Mapping[str, JobSpec]:
    """DEDUP_JOBS, {"<Scheduler job name>": {"job_id", "schedule", "time_zone", "max_lateness_seconds"?,
    "attempt_deadline_seconds"?, "lease_seconds"?, "retry_window_seconds"?, "paused"?, "catch_up"?, "overlap"?,
    "dst_gap"?}}, or Misconfigured.
    Cached: a delivery does not parse the table again, nor build a cron parser per job."""
    try:
        jobs = json.loads(text)
    except ValueError as error:
        raise Misconfigured(f"DEDUP_JOBS={_shown(text)}: is not JSON ({error})") from None
    if not isinstance(jobs, dict):
        raise Misconfigured(f"DEDUP_JOBS={_shown(text)}: must be a JSON object of job name -> job")
    specs = {}
    for name, job in jobs.items():
        field = f"DEDUP_JOBS.{name}"
        if not JOB_NAME.fullmatch(name):
            raise Misconfigured(f"DEDUP_JOBS={_shown(name)}: a job name is letters, digits, '-', '_'")
        if not isinstance(job, dict) or not {"job_id", "schedule", "time_zone"} <= set(job):
            raise Misconfigured(f"{field}={_shown(json.dumps(job))}: must hold job_id, schedule and time_zone")
        if not isinstance(job["job_id"], str) or not JOB_NAME.fullmatch(job["job_id"]):
            raise Misconfigured(f"{field}.job_id={job['job_id']!r}: a job id is letters, digits, '-', '_'")
        try:
            CronSim(str(job["schedule"]), dt.datetime(2000, 1, 1))
        except CronSimError as error:
            raise Misconfigured(f"{field}.schedule={job['schedule']!r}: is not a cron schedule ({error})") from None
        try:
            zoneinfo.ZoneInfo(str(job["time_zone"]))
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
            raise Misconfigured(f"{field}.time_zone={job['time_zone']!r}: is not an IANA time zone") from None
        numbers = {}
        for key in ("max_lateness_seconds", "attempt_deadline_seconds", "lease_seconds", "retry_window_seconds"):
            number = job.get(key)
            if number is not None and (type(number) is not int or number <= 0):
                raise Misconfigured(f"{field}.{key}={number!r}: must be a positive whole number or null")
            numbers[key] = dt.timedelta(seconds=number) if number is not None else None
        deadline = job.get("attempt_deadline_seconds")  # a whole number by now
        if deadline is not None and deadline <= RELEASE_MARGIN.total_seconds():  # stopped before it could start
            raise Misconfigured(f"{field}.attempt_deadline_seconds={deadline!r}: {DEADLINE_RULE}")
        for flag in ("paused", "catch_up"):
            if type(job.get(flag, False)) is not bool:
                raise Misconfigured(f"{field}.{flag}={job[flag]!r}: must be true or false")
        overlap = job.get("overlap", "skip")
        if overlap not in OVERLAP_RULES:
            raise Misconfigured(f"{field}.overlap={overlap!r}: must be one of {', '.join(OVERLAP_RULES)}")
        dst_gap = job.get("dst_gap", schedules.END_OF_GAP)
        if dst_gap not in schedules.DST_GAP_RULES:
            raise Misconfigured(f"{field}.dst_gap={dst_gap!r}: must be one of {', '.join(schedules.DST_GAP_RULES)}")
        specs[name] = JobSpec(
            job_id=job["job_id"],
            schedule=str(job["schedule"]),
            time_zone=str(job["time_zone"]),
            max_lateness=numbers["max_lateness_seconds"],
            attempt_deadline=numbers["attempt_deadline_seconds"],
            lease=numbers["lease_seconds"],
            retry_window=numbers["retry_window_seconds"],
            paused=job.get("paused", False),
            catch_up=job.get("catch_up", False),
            overlap=overlap,
            dst_gap=dst_gap,
        )
    return MappingProxyType(specs)


def overridden(jobs: Mapping[str, JobSpec], environ: Mapping[str, str]) -> Mapping[str, JobSpec]:
    """A DEDUP_ATTEMPT_DEADLINE_SECONDS, DEDUP_LEASE_SECONDS or DEDUP_RETRY_WINDOW_SECONDS of the environment (a
    test's, a local run's) holds for every job, over each job's own from config.yaml."""
    cleared = {}
    if environ.get("DEDUP_ATTEMPT_DEADLINE_SECONDS"):
        cleared["attempt_deadline"] = None
    if environ.get("DEDUP_LEASE_SECONDS"):
        cleared["lease"] = None
    if environ.get("DEDUP_RETRY_WINDOW_SECONDS"):
        cleared["retry_window"] = None
    if not cleared:
        return jobs
    return MappingProxyType({name: dataclasses.replace(job, **cleared) for name, job in jobs.items()})


def parse_serve(text: str | None) -> tuple[tuple[str, str], ...]:
    """DEDUP_SERVE, [{"project", "location"}, ...]: where the runs this function accepts may be keyed
    (`serve` in the configuration); unset: () (DedupConfig.served: only its own). Or Misconfigured."""
    if text is None:
        return ()
    try:
        places = json.loads(text)
    except ValueError as error:
        raise Misconfigured(f"DEDUP_SERVE={_shown(text)}: is not JSON ({error})") from None
    rule = 'must be a non-empty JSON list of {"project": "<GCP project id>", "location": "<GCP region>"}'
    if not isinstance(places, list) or not places:
        raise Misconfigured(f"DEDUP_SERVE={_shown(text)}: {rule}")
    served = []
    for place in places:
        if (
            not isinstance(place, dict)
            or set(place) != {"project", "location"}
            or not PROJECT.fullmatch(str(place["project"]))
            or not LOCATION.fullmatch(str(place["location"]))
        ):
            raise Misconfigured(f"DEDUP_SERVE={_shown(json.dumps(place))}: {rule}")
        served.append((place["project"], place["location"]))
    return tuple(served)


@dataclasses.dataclass(frozen=True)
class DedupConfig:
    project: str
    location: str
    database: str
    collection: str
    lease: dt.timedelta
    retention: dt.timedelta
    max_future: dt.timedelta
    retry_window: dt.timedelta
    jobs: Mapping[str, JobSpec]
    audit_job: str
    # Cloud Scheduler's attempt deadline of the audit job and of a job that sets none of its own (the defaults').
    attempt_deadline: dt.timedelta
    # The Cloud Tasks queue that delivers re-runs, backfills and catch-ups (projects/P/locations/L/queues/Q);
    # None: not deployed with one (the job catch_up needs it).
    tasks_queue: str | None = None
    # Where a run may be keyed (project, location): `serve` in the configuration; empty: only the function's own.
    serve: tuple[tuple[str, str], ...] = ()

    @property
    def served(self) -> tuple[tuple[str, str], ...]:
        return self.serve or ((self.project, self.location),)

    @property
    def settle(self) -> dt.timedelta:
        """How long after its schedule time a run may still be claimed: its deliveries, then the last one's lease.
        The project's (the audit job's); a job's own is settle_for."""
        return self.lease + self.retry_window

    def lease_for(self, job_name: str) -> dt.timedelta:
        """The lease of a run of `job_name`: the job's own (config.yaml), else the project's."""
        job = self.jobs.get(job_name)
        return job.lease if job is not None and job.lease is not None else self.lease

    def settle_for(self, job_name: str) -> dt.timedelta:
        """settle, for a run of `job_name`: with the job's own lease and retry window."""
        job = self.jobs.get(job_name)
        window = job.retry_window if job is not None and job.retry_window is not None else self.retry_window
        return self.lease_for(job_name) + window

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> DedupConfig:
        """The settings, or Misconfigured naming the variable, its value and the rule."""

        def value(name: str, pattern: re.Pattern[str] | None = None, rule: str = "") -> str:
            text = environ.get(name) or baked_settings().get(name)
            if text is None:
                raise Misconfigured(f"{name} is not set, and config.yaml has no value for it")
            if pattern and not pattern.fullmatch(text):
                raise Misconfigured(f"{name}={text!r}: {rule}")
            return text

        def optional_queue() -> str | None:
            text = environ.get("DEDUP_TASKS_QUEUE", baked_settings().get("DEDUP_TASKS_QUEUE")) or None
            if text is not None and not TASKS_QUEUE.fullmatch(text):
                raise Misconfigured(
                    f"DEDUP_TASKS_QUEUE={text!r}: must be projects/PROJECT/locations/REGION/queues/QUEUE"
                )
            return text

        def seconds(name: str) -> dt.timedelta:
            text = value(name, WHOLE_NUMBER, "must be a positive whole number of seconds")
            if int(text) == 0:
                raise Misconfigured(f"{name}={text!r}: must be a positive whole number of seconds")
            return dt.timedelta(seconds=int(text))

        def attempt_deadline() -> dt.timedelta:
            name = "DEDUP_ATTEMPT_DEADLINE_SECONDS"
            text = value(name, WHOLE_NUMBER, DEADLINE_RULE)
            if int(text) <= RELEASE_MARGIN.total_seconds():
                raise Misconfigured(f"{name}={text!r}: {DEADLINE_RULE}")
            return dt.timedelta(seconds=int(text))

        config = cls(
            project=value("DEDUP_PROJECT", PROJECT, "must be a GCP project id"),
            location=value("DEDUP_LOCATION", LOCATION, "must be a GCP region such as europe-west1"),
            database=value("DEDUP_DATABASE"),
            collection=value("DEDUP_COLLECTION"),
            lease=seconds("DEDUP_LEASE_SECONDS"),
            retention=seconds("DEDUP_RETENTION_SECONDS"),
            max_future=seconds("DEDUP_MAX_FUTURE_SECONDS"),
            retry_window=seconds("DEDUP_RETRY_WINDOW_SECONDS"),
            jobs=overridden(parse_jobs(value("DEDUP_JOBS")), environ),
            audit_job=value("DEDUP_AUDIT_JOB", JOB_NAME, "must be a Cloud Scheduler job name"),
            attempt_deadline=attempt_deadline(),
            serve=parse_serve(environ.get("DEDUP_SERVE") or baked_settings().get("DEDUP_SERVE")),
            tasks_queue=optional_queue(),
        )
        for name, job in config.jobs.items():
            if job.catch_up and config.tasks_queue is None:
                raise Misconfigured(
                    f"DEDUP_JOBS.{name}.catch_up=true: the audit delivers through a Cloud Tasks queue, "
                    "and DEDUP_TASKS_QUEUE is not set"
                )
        return config

    def stop_after(self, job_name: str) -> dt.timedelta:
        """How long after a delivery arrives its work is stopped (stop.py): the job's attempt deadline less the
        release margin, so that the release and the answer reach Scheduler in time. The one place that says it."""
        job = self.jobs.get(job_name)
        deadline = job.attempt_deadline if job and job.attempt_deadline else self.attempt_deadline
        return deadline - RELEASE_MARGIN

    def job_id(self, job_name: str) -> str | None:
        """The job id of the Scheduler job `job_name`, as the answers spell it; None for a job DEDUP_JOBS lacks."""
        job = self.jobs.get(job_name)
        return job.job_id if job else None

    @property
    def database_name(self) -> str:
        """The database's resource name, as Firestore spells it in its own errors."""
        return f"projects/{self.project}/databases/{self.database}"


@dataclasses.dataclass(frozen=True)
class RunKey:
    project: str
    location: str
    job_name: str
    schedule_time: dt.datetime  # UTC
    # A delivery dated later than now (beyond schedules.CLOCK_MARGIN): a Force run, keyed apart from the scheduled run.
    manual: bool = False

    @property
    def run_id(self) -> str:
        parts = (self.project, self.location, self.job_name, self.schedule_time.isoformat())
        material = "\n".join(parts + (("manual",) if self.manual else ()))
        return hashlib.sha256(material.encode()).hexdigest()

    @property
    def trigger(self) -> str:
        """How the run came: `scheduled`, or `manual` (a Force run before its schedule time)."""
        return "manual" if self.manual else "scheduled"


def _shown(value: str) -> str:
    """A header value fit for a one-line reason: escaped, and cut short (headers reach 80 KB)."""
    return repr(value[:80] + ("..." if len(value) > 80 else ""))


def parse_schedule_time(text: str) -> dt.datetime:
    """RFC 3339 with a mandatory offset, as Cloud Scheduler sends it; returns UTC."""
    match = RFC3339.fullmatch(text)
    if not match:
        raise ValueError("is not an RFC 3339 timestamp such as 2026-10-16T12:00:00Z")
    if match["second"] == "60":
        raise ValueError("is a leap second, which Cloud Scheduler never sends")
    fraction = (match["fraction"] or "")[:7]  # microseconds: the precision Firestore stores
    offset = "+00:00" if match["offset"] in "Zz" else match["offset"]
    try:
        parsed = dt.datetime.fromisoformat(f"{match['date']}T{match['hms']}:{match['second']}{fraction}{offset}")
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # OverflowError: 0001-01-01T00:00:00+01:00 has no UTC datetime
        raise ValueError("is not a valid date and time") from None


def read_run_key(headers: Mapping[str, str], config: DedupConfig, now: dt.datetime) -> RunKey:
    """Headers (any letter case) -> the run's key, or InvalidDelivery with a one-line reason."""
    lowered = {name.lower(): value for name, value in headers.items()}

    def header(name: str, pattern: re.Pattern[str], rule: str, default: str | None = None) -> str:
        value = lowered.get(name.lower(), default)
        if value is None:
            raise InvalidDelivery(f"missing {name} header: not a Cloud Scheduler delivery")
        if not pattern.fullmatch(value):
            raise InvalidDelivery(f"{name}={_shown(value)}: {rule}")
        return value

    job_name = header(JOB_NAME_HEADER, JOB_NAME, "must be a Cloud Scheduler job id (letters, digits, '-', '_')")
    project = header(PROJECT_HEADER, PROJECT, "must be a GCP project id", config.project)
    location = header(LOCATION_HEADER, LOCATION, "must be a GCP region such as europe-west1", config.location)
    if (project, location) not in config.served:
        served = ", ".join(f"{p}/{loc}" for p, loc in config.served)
        raise InvalidDelivery(
            f"{PROJECT_HEADER}={_shown(project)}, {LOCATION_HEADER}={_shown(location)}: this function serves "
            f"only {served} (`serve` in the configuration); a run keyed elsewhere would never be audited"
        )
    raw_time = lowered.get(SCHEDULE_TIME_HEADER.lower())
    if raw_time is None:
        # Google's dedup guide: a Force run sends the next scheduled time "or can be omitted".
        raise InvalidDelivery(
            f"missing {SCHEDULE_TIME_HEADER} header: Cloud Scheduler sends it for unix-cron jobs, and a Force run "
            "may omit it; a run without it cannot be deduplicated, so nothing ran. Force-run the job again, or "
            "send the header yourself (docs/schedules-and-manual-runs.md)"
        )
    try:
        schedule_time = parse_schedule_time(raw_time)
    except ValueError as error:
        raise InvalidDelivery(f"{SCHEDULE_TIME_HEADER}={_shown(raw_time)}: {error}") from None
    # Past the retention window the run's record may be gone, so a replay would run again. At its very
    # edge too: a record counts as absent from expire_at (>= schedule time + retention) on.
    if schedule_time <= now - config.retention:
        raise InvalidDelivery(
            f"{SCHEDULE_TIME_HEADER}={_shown(raw_time)}: older than the retention window "
            f"({int(config.retention.total_seconds())} s); refusing a run that may already have happened"
        )
    # Dated later than now: a Force run, which sends the next fire time; a scheduled delivery never comes early.
    # The time as sent decides: a reading of a daylight saving time may be keyed at a later instant.
    manual = schedule_time > now + schedules.CLOCK_MARGIN
    job = config.jobs.get(job_name)
    if job is None:  # the audit job, or a job the configuration lacks: no cron to check against
        if schedule_time > now + config.max_future:
            raise InvalidDelivery(
                f"{SCHEDULE_TIME_HEADER}={_shown(raw_time)}: more than "
                f"{int(config.max_future.total_seconds())} s in the future"
            )
    else:
        schedule_time = _fire_time(job, schedule_time, raw_time, now)
    return RunKey(project=project, location=location, job_name=job_name, schedule_time=schedule_time, manual=manual)


def _fire_time(job: JobSpec, schedule_time: dt.datetime, raw_time: str, now: dt.datetime) -> dt.datetime:
    """The schedule time a delivery of `job` is keyed by: the fire time it is a reading of (schedules.py: a
    time daylight saving repeats or skips has one), or InvalidDelivery past the job's next fire time, or
    SkippedDstGap for a skipped time the job skips."""
    fire = schedules.fire_time_of(job.fire_rule, schedule_time)
    if fire is not None and fire.instant is None:
        raise SkippedDstGap(
            f"{SCHEDULE_TIME_HEADER}={_shown(raw_time)}: {fire.wall:%Y-%m-%d %H:%M} does not exist in "
            f"{job.time_zone} (daylight saving) and the job's dst_gap is {schedules.SKIP}; the work does not run"
        )
    keyed = fire.instant if fire is not None else schedule_time
    latest = schedules.next_fire_after(job.fire_rule, now + schedules.CLOCK_MARGIN)
    if latest is None or keyed > latest:
        raise InvalidDelivery(
            f"{SCHEDULE_TIME_HEADER}={_shown(raw_time)}: later than the job's next fire time after now "
            f"({latest.isoformat() if latest else 'none'}) plus the clock margin "
            f"({int(schedules.CLOCK_MARGIN.total_seconds())} s); Cloud Scheduler never sends that"
        )
    return keyed


@dataclasses.dataclass(frozen=True)
class Rerun:
    """A person's request that a finished run runs once more: its id, who asked, why."""

    rerun_id: str
    by: str
    reason: str

    def entry(self, now: dt.datetime, previous: Mapping[str, object] | None) -> dict[str, object]:
        """What the run's record keeps of it (field `reruns`, one entry per re-run that ran)."""
        entry: dict[str, object] = {"rerun_id": self.rerun_id, "by": self.by, "reason": self.reason, "at": now}
        if previous is not None:
            entry["previous_status"] = previous["status"]
        return entry


def read_rerun(headers: Mapping[str, str]) -> Rerun | None:
    """The re-run a delivery asks for (X-Rerun-Id, -By, -Reason), None for a plain delivery, or InvalidDelivery."""
    lowered = {name.lower(): value for name, value in headers.items()}
    rerun_id = lowered.get(RERUN_ID_HEADER.lower())
    if rerun_id is None:
        return None
    fields = {}
    for name, pattern, rule in (
        (RERUN_ID_HEADER, RERUN_ID, "must be 1-100 letters, digits, '-', '_'"),
        (RERUN_BY_HEADER, RERUN_TEXT, "must say who asked (1-500 printable characters)"),
        (RERUN_REASON_HEADER, RERUN_TEXT, "must say why (1-500 printable characters)"),
    ):
        value = lowered.get(name.lower())
        if value is None:
            raise InvalidDelivery(f"missing {name} header: a re-run ({RERUN_ID_HEADER}) says who asked and why")
        if not pattern.fullmatch(value):
            raise InvalidDelivery(f"{name}={_shown(value)}: {rule}")
        fields[name] = value
    return Rerun(fields[RERUN_ID_HEADER], fields[RERUN_BY_HEADER], fields[RERUN_REASON_HEADER])


class Decision(enum.Enum):
    """What a delivery may do with the record it found; the last two end as the outcome of their name."""

    TAKE_OVER = "take_over"
    DUPLICATE = Outcome.DUPLICATE.value
    IN_PROGRESS = Outcome.IN_PROGRESS.value


def decide(record: Mapping[str, object], now: dt.datetime) -> Decision:
    """The state machine's one decision: what a delivery may do with the run's existing record."""
    if record["expire_at"] <= now:  # TTL deletes lazily; an expired record counts as absent
        return Decision.TAKE_OVER
    if record["status"] in (Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.STARTED):
        return Decision.DUPLICATE
    if record["lease_expires"] > now:
        return Decision.IN_PROGRESS
    return Decision.TAKE_OVER


@dataclasses.dataclass(frozen=True)
class Claim:
    """This attempt owns the run while the record's update time is still `write_time`."""

    key: RunKey
    attempt_id: str
    attempt: int
    write_time: dt.datetime
    taken_over_from: str | None = None  # the expired attempt's id, on a takeover
    rerun_id: str | None = None  # the re-run this claim runs, if it is one

    def context(self, job_id: str | None) -> RunContext:
        return RunContext(
            run_id=self.key.run_id,
            job_id=job_id,
            job_name=self.key.job_name,
            schedule_time=self.key.schedule_time,
            attempt_id=self.attempt_id,
            attempt=self.attempt,
            project=self.key.project,
            location=self.key.location,
            trigger=self.key.trigger,
            rerun_id=self.rerun_id,
        )


@dataclasses.dataclass(frozen=True)
class StartedRun:
    """A run recorded `started`: a proxy target started its execution, whose end is not known yet."""

    run_id: str
    job_name: str
    schedule_time: dt.datetime
    execution: str  # the execution's full resource name
    write_time: dt.datetime  # the record's update time when read: ending it is guarded by it


@functools.cache
def firestore_client(project: str, database: str) -> firestore.Client:
    """One client per process, made on first use (never at import: no network before a request)."""
    return firestore.Client(project=project, database=database)


def utcnow() -> dt.datetime:
    return dt.datetime.now(UTC)


@dataclasses.dataclass(frozen=True)
class AuditCursor:
    """The audit's bookmark (AUDIT_CURSOR_ID): job name -> {"since", "judged_until"}, and the last full sweep."""

    jobs: Mapping[str, Mapping[str, dt.datetime]]
    last_full_sweep: dt.datetime | None = None
    update_time: dt.datetime | None = None  # None: not stored yet


class RecordChanged(Exception):
    """A guarded write's refusal: another writer changed or removed the record since the caller last saw it."""


class GuardedRecords:
    """The one way the protocol's records are written (the run ledger's, and the Cloud Run job target's items):
    create (None if the record exists), and update or delete only while the record's update time is
    still the one the caller last saw (RecordChanged otherwise). No transaction is needed."""

    def __init__(self, client: firestore.Client, call) -> None:
        self.client = client
        self._call = call  # firestore_call on the client's database

    def create(self, ref: firestore.DocumentReference, record: Mapping[str, object]) -> dt.datetime | None:
        """The new record's update time, or None if the record exists already."""
        try:
            return self._call(ref.create, record, retry=None, answers=(api_exceptions.AlreadyExists,)).update_time
        except api_exceptions.AlreadyExists:
            return None

    def update_if_unchanged(
        self, ref: firestore.DocumentReference, fields: Mapping[str, object], since: dt.datetime
    ) -> dt.datetime:
        """The record's new update time; RecordChanged if it changed or vanished since `since`."""
        option = self.client.write_option(last_update_time=since)
        try:
            return self._call(ref.update, fields, option=option, retry=None, answers=GUARD_FAILED).update_time
        except GUARD_FAILED:
            raise RecordChanged(ref.id) from None

    def delete_if_unchanged(self, ref: firestore.DocumentReference, since: dt.datetime) -> None:
        """RecordChanged if the record changed or vanished since `since`."""
        option = self.client.write_option(last_update_time=since)
        try:
            self._call(ref.delete, option=option, retry=None, answers=GUARD_FAILED)
        except GUARD_FAILED:
            raise RecordChanged(ref.id) from None


class RunLedger:
    """The run records in one Firestore collection, changed only through the protocol's transitions."""

    def __init__(self, config: DedupConfig, client: firestore.Client | None = None) -> None:
        self.config = config
        try:
            self.client = client or firestore_client(config.project, config.database)
        except google.auth.exceptions.GoogleAuthError as error:  # no credentials: nothing can be claimed
            raise StoreUnavailable(f"no Firestore client: {type(error).__name__}: {_first_line(error)}") from error
        self.collection = self.client.collection(config.collection)
        self._call = functools.partial(firestore_call, database=config.database_name)
        self.records = GuardedRecords(self.client, self._call)

    def claim(self, key: RunKey, now: dt.datetime, rerun: Rerun | None = None) -> Claim:
        """Own the run, or raise Duplicate / InProgress / StoreUnavailable / Misconfigured.

        A re-run whose id the record does not hold yet reopens a finished run (a guarded write, so
        two deliveries of it cannot both reopen it); once the record holds its id, its retries are
        answered like any replay: the work runs once per re-run id."""
        ref = self.collection.document(key.run_id)
        attempt_id = uuid.uuid4().hex
        record = self._claim_record(key, attempt_id, attempt=1, now=now)
        if rerun is not None:
            record |= {"rerun_id": rerun.rerun_id, "reruns": [rerun.entry(now, None)]}
        write_time = self.records.create(ref, record)
        if write_time is not None:
            return Claim(key, attempt_id, 1, write_time, rerun_id=rerun and rerun.rerun_id)
        snapshot = self._call(ref.get, retry=READ_RETRY)
        if not snapshot.exists:  # released between our create and our read: let the next retry claim it
            raise InProgress("the run was released while this delivery claimed it; retry")
        current = snapshot.to_dict()
        decision = decide(current, now)
        fresh_rerun = rerun is not None and current.get("rerun_id") != rerun.rerun_id
        if decision is Decision.DUPLICATE and not fresh_rerun:
            if key.manual:
                raise Duplicate(
                    f"a manual run for {key.schedule_time.isoformat()} is already {current['status']}: a Force run "
                    "before a schedule time runs the work once; the scheduled run at that time still runs"
                )
            raise Duplicate(f"run already {current['status']}; the work does not run again")
        if decision is Decision.IN_PROGRESS:
            raise InProgress(f"attempt {current['attempt_id']} holds the lease until {current['lease_expires']}")
        attempt = int(current.get("attempts", 1)) + 1
        takeover = self._claim_record(key, attempt_id, attempt=attempt, now=now) | {
            "finished_at": firestore.DELETE_FIELD,
            "last_error": firestore.DELETE_FIELD,
            "result": firestore.DELETE_FIELD,
        }
        if fresh_rerun:
            takeover |= {
                "rerun_id": rerun.rerun_id,
                "reruns": [*current.get("reruns", []), rerun.entry(now, current)],
            }
        try:
            write_time = self.records.update_if_unchanged(ref, takeover, since=snapshot.update_time)
        except RecordChanged:
            raise InProgress("another delivery took the run over first") from None
        rerun_id = rerun.rerun_id if fresh_rerun else current.get("rerun_id")
        return Claim(key, attempt_id, attempt, write_time, taken_over_from=current["attempt_id"], rerun_id=rerun_id)

    def complete(self, claim: Claim, now: dt.datetime, result: str | None = None) -> None:
        """Success; `result` is what the work reported (a proxy: the execution it started)."""
        fields = {"status": Status.COMPLETED.value, "finished_at": now}
        if result is not None:
            fields["result"] = str(result)[:1500]
        self._finish(claim, fields)

    def fail(self, claim: Claim, reason: str, now: dt.datetime) -> None:
        """Terminal failure: record it, so replays stop; the work does not run again."""
        self._finish(claim, {"status": Status.FAILED.value, "finished_at": now, "last_error": reason[:1500]})

    def skip_if_late(self, claim: Claim, now: dt.datetime) -> None:
        """Past its job's max_lateness_seconds: record the run `skipped` and raise SkippedLate; else nothing.
        Judged on a run's first claim only: a takeover continues a run claimed in time (the work may have
        started), so it is finished or retried, never recorded as never run. A re-run is late on purpose: a person
        asked for it, so the limit does not apply to it."""
        job = self.config.jobs.get(claim.key.job_name)
        if claim.rerun_id is not None:
            return
        if claim.taken_over_from is not None or job is None or job.max_lateness is None:
            return
        if now - claim.key.schedule_time <= job.max_lateness:
            return
        late = int((now - claim.key.schedule_time).total_seconds())
        limit = int(job.max_lateness.total_seconds())
        reason = f"delivered {late} s after its schedule time, past max_lateness_seconds={limit}; the work does not run"
        self._skip(claim, now, SkippedLate(reason))

    def skip_overlapping(self, claim: Claim, now: dt.datetime, reason: str) -> None:
        """The job's previous execution still runs, and its overlap rule is "skip": record `skipped`, raise
        SkippedOverlap."""
        self._skip(claim, now, SkippedOverlap(reason))

    def start(self, claim: Claim, now: dt.datetime, execution: str) -> None:
        """The work started `execution` (a proxy target) and does not wait for it: the run is `started` until
        the execution is seen to end (end_execution)."""
        self._finish(claim, {"status": Status.STARTED.value, "started_at": now, "execution": execution[:1500]})

    def started_runs(self, now: dt.datetime, job_name: str | None = None) -> list[StartedRun]:
        """The unexpired runs whose execution was not yet seen to end: of one Scheduler job, or of all.

        Equality filters only: Firestore serves them by merging its automatic single-field indexes, no
        composite index to create (firebase.google.com/docs/firestore/query-data/index-overview, "Index
        merging"). Few runs are ever `started` at once, so the expiry is compared here.
        """
        query = self.collection.where(filter=FieldFilter("status", "==", Status.STARTED.value))
        if job_name is not None:
            query = query.where(filter=FieldFilter("job_name", "==", job_name))
        snapshots = self._call(self._stream, query, retry=READ_RETRY)
        return [
            StartedRun(s.id, record["job_name"], record["schedule_time"], record["execution"], s.update_time)
            for s in snapshots
            if (record := s.to_dict())["expire_at"] > now
        ]

    def end_execution(self, run: StartedRun, status: Status, now: dt.datetime, reason: str | None = None) -> bool:
        """Record how a started run's execution ended (`completed`, or `failed` with the reason); False if
        another follower (a delivery, the audit) recorded it first."""
        fields: dict[str, object] = {"status": status.value, "finished_at": now}
        if reason is not None:
            fields["last_error"] = reason[:1500]
        try:
            self.records.update_if_unchanged(self.collection.document(run.run_id), fields, since=run.write_time)
        except RecordChanged:
            return False
        return True

    def _skip(self, claim: Claim, now: dt.datetime, stop: RunNotProcessed) -> None:
        """Record the run `skipped` with the stop's reason, then raise the stop: the work does not run."""
        self._finish(claim, {"status": Status.SKIPPED.value, "finished_at": now, "last_error": str(stop)})
        raise stop

    def release(self, claim: Claim) -> None:
        """Retryable failure: delete the claim so that the next retry runs at once."""
        self._finish(claim, None)

    def read_runs(self, run_ids: Iterable[str]) -> dict[str, dict[str, object]]:
        """The records of many runs by id, absent ones left out: one BatchGetDocuments per READ_BATCH ids."""
        ids = list(dict.fromkeys(run_ids))
        found: dict[str, dict[str, object]] = {}
        for start in range(0, len(ids), READ_BATCH):
            refs = [self.collection.document(run_id) for run_id in ids[start : start + READ_BATCH]]
            snapshots = self._call(self._get_all, refs, retry=READ_RETRY)
            found.update({snapshot.id: snapshot.to_dict() for snapshot in snapshots if snapshot.exists})
        return found

    def read_audit_cursor(self, job_names: Iterable[str]) -> AuditCursor:
        """The audit's bookmark (one read); before its first write, seeded from the older per-job markers."""
        snapshot = self._call(self.collection.document(AUDIT_CURSOR_ID).get, retry=READ_RETRY)
        if snapshot.exists:
            stored = snapshot.to_dict()
            return AuditCursor(stored.get("jobs", {}), stored.get("last_full_sweep"), snapshot.update_time)
        refs = [self.collection.document(AUDIT_START_PREFIX + name) for name in job_names]
        markers = self._call(self._get_all, refs, retry=READ_RETRY) if refs else []
        jobs = {m.id.removeprefix(AUDIT_START_PREFIX): m.to_dict()["since"] for m in markers if m.exists}
        return AuditCursor({name: {"since": since, "judged_until": since} for name, since in jobs.items()})

    def write_audit_cursor(self, cursor: AuditCursor) -> None:
        """Store the bookmark; RecordChanged if another audit moved it since `cursor` was read."""
        ref = self.collection.document(AUDIT_CURSOR_ID)
        fields = {"jobs": dict(cursor.jobs), "last_full_sweep": cursor.last_full_sweep}
        if cursor.update_time is None:
            if self.records.create(ref, fields) is None:
                raise RecordChanged(ref.id)
        else:
            self.records.update_if_unchanged(ref, fields, since=cursor.update_time)

    def _get_all(self, refs, **kwargs) -> list:
        """get_all streams: read the stream here, so that its errors are the call's."""
        return list(self.client.get_all(refs, **kwargs))

    @staticmethod
    def _stream(query, **kwargs) -> list:
        """A query streams: read the stream here, so that its errors are the call's."""
        return list(query.stream(**kwargs))

    def _claim_record(self, key: RunKey, attempt_id: str, attempt: int, now: dt.datetime) -> dict[str, object]:
        return {
            "status": Status.IN_PROGRESS.value,
            "attempt_id": attempt_id,
            "lease_expires": now + self.config.lease_for(key.job_name),
            # From the later of now and the schedule time: a forced run keys a future time.
            "expire_at": max(now, key.schedule_time) + self.config.retention,
            "attempts": attempt,
            "claimed_at": now,
            "job_name": key.job_name,
            "schedule_time": key.schedule_time,
            "project": key.project,
            "location": key.location,
            "trigger": key.trigger,
        }

    def _finish(self, claim: Claim, fields: dict[str, object] | None) -> None:
        """The claim's last write (fields, or None: delete), or Superseded if another attempt took the run over."""
        ref = self.collection.document(claim.key.run_id)
        try:
            if fields is None:
                self.records.delete_if_unchanged(ref, since=claim.write_time)
            else:
                self.records.update_if_unchanged(ref, fields, since=claim.write_time)
        except RecordChanged:
            raise Superseded(
                f"attempt {claim.attempt_id} lost its lease to a newer attempt; its result is not recorded"
            ) from None


def firestore_call(method, *args, database: str, answers: tuple[type[Exception], ...] = (), **kwargs):
    """A Firestore call on `database` with a bounded time, which ends in its result, one of the errors
    the call site expects as the protocol's answer (`answers`, re-raised), Misconfigured (an unexpected
    DATABASE_UNUSABLE code: the database is missing or in Datastore mode) or StoreUnavailable (every
    other gRPC status, and a read's RetryError)."""
    try:
        return method(*args, timeout=RPC_TIMEOUT_SECONDS, **kwargs)
    except answers:
        raise
    except DATABASE_UNUSABLE as error:
        raise Misconfigured(
            f"Firestore database {database} cannot hold the run records ({type(error).__name__}: "
            f"{_first_line(error)}): it does not exist or is in Datastore mode; see DEDUP_PROJECT, DEDUP_DATABASE"
        ) from error
    except api_exceptions.GoogleAPIError as error:
        raise StoreUnavailable(f"Firestore call failed: {type(error).__name__}: {_first_line(error)}") from error


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else ""
