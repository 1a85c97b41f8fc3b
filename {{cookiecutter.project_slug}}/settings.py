"""The protocol's settings: DedupConfig and each job's JobSpec, built from config.yaml.

config.py reads and checks config.yaml; this module turns it into the DEDUP_* values the protocol runs by
(`baked_settings`), each overridden by the environment variable of its name (a test's, a local run's: the
deployed function gets none), and checks each value, or raises Misconfigured naming it, its value and the rule.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import os
import re
import zoneinfo
from collections.abc import Mapping
from types import MappingProxyType

from cronsim import CronSim, CronSimError

import config
import rules
import schedules
from outcomes import Misconfigured, quoted

# A forced run ("Force run" in the console) sends the next scheduled time, which can lie a whole
# schedule period ahead; anything further out is refused as nonsense. Not a setting: no project differs.
MAX_FUTURE_SECONDS = "2764800"
# The audit job's time zone: Terraform's (audit.tf, time_zone), its cron's (config.Config.audit_schedule).
AUDIT_TIME_ZONE = rules.AUDIT_TIME_ZONE


@functools.cache
def baked_settings() -> Mapping[str, str]:
    """config.yaml (read once per process by config.load) as DEDUP_* values, or Misconfigured."""
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
            "retry_window_seconds": rules.job_retry_window_seconds(job.timing),
            **({"max_lateness_seconds": job.max_lateness_seconds} if job.max_lateness_seconds is not None else {}),
            "max_execution_seconds": job.max_execution_seconds,
            # issue 18's per-job choices, as written; a switch that is off is left out.
            **{key: value for key, value in job.options.items() if value is not False},
        }
        for job_id, job in loaded.jobs.items()
    }
    defaults = loaded.defaults
    return MappingProxyType({
        "DEDUP_PROJECT": loaded.project,
        "DEDUP_LOCATION": loaded.region,
        "DEDUP_TARGET": loaded.target,
        "DEDUP_DATABASE": loaded.database,
        "DEDUP_COLLECTION": loaded.collection,
        # The audit job's (and a job's that sets none): the defaults block's.
        "DEDUP_LEASE_SECONDS": str(defaults["lease_seconds"]),
        "DEDUP_ATTEMPT_DEADLINE_SECONDS": str(defaults["attempt_deadline_seconds"]),
        "DEDUP_RETRY_WINDOW_SECONDS": str(rules.job_retry_window_seconds(defaults)),
        "DEDUP_RETENTION_SECONDS": str(loaded.retention_seconds),
        "DEDUP_MAX_FUTURE_SECONDS": MAX_FUTURE_SECONDS,
        "DEDUP_JOBS": json.dumps(jobs),
        "DEDUP_AUDIT_JOB": loaded.audit_job_name,
        "DEDUP_AUDIT_SCHEDULE": loaded.audit_schedule,
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

WHOLE_NUMBER = re.compile(r"[0-9]+")
POSITIVE_SECONDS = "must be a positive whole number of seconds"
JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,500}")
PROJECT, LOCATION = rules.PROJECT_ID, rules.REGION
TASKS_QUEUE = re.compile(f"projects/{PROJECT.pattern}/locations/{LOCATION.pattern}/queues/" + "[A-Za-z0-9-]{1,100}")


@dataclasses.dataclass(frozen=True)
class JobSpec:
    """One Scheduler job as DEDUP_JOBS describes it (config.yaml's job; rules.JOB_CHOICES for its choices)."""

    job_id: str  # as written in config.yaml (`nightly`); Scheduler sends "<slug>-<job id>"
    schedule: str
    time_zone: str
    max_lateness: dt.timedelta | None = None  # None: a delivery may come any time after its schedule time
    paused: bool = False  # paused in Scheduler too (terraform): the audit reports its fire times `paused`
    catch_up: bool = False  # the audit delivers a missing run itself (Cloud Tasks) while within max_lateness
    overlap: str = "skip"  # proxy targets: what a new run does while the job's previous execution still runs
    # The job's own numbers (config.yaml); None: the project's (DedupConfig.attempt_deadline, .lease, .retry_window).
    attempt_deadline: dt.timedelta | None = None
    lease: dt.timedelta | None = None
    retry_window: dt.timedelta | None = None
    # Proxy targets: how long a run may stay `started` before the audit reports it overdue; None: the project's
    # (DedupConfig.max_execution_for).
    max_execution: dt.timedelta | None = None
    dst_gap: str = schedules.END_OF_GAP  # a wall-clock time the clocks skip: run at the gap's end, or skip

    @property
    def fire_rule(self) -> schedules.Schedule:
        """When the job fires: what schedules.py computes fire times from."""
        return schedules.Schedule(self.schedule, self.time_zone, self.dst_gap)


@functools.lru_cache(maxsize=8)
def parse_jobs(text: str) -> Mapping[str, JobSpec]:
    """DEDUP_JOBS, {"<Scheduler job name>": {"job_id", "schedule", "time_zone", and JobSpec's other fields as
    config.yaml names them}}, or Misconfigured. Cached: a delivery does not parse the table again."""
    try:
        jobs = json.loads(text)
    except ValueError as error:
        raise Misconfigured(f"DEDUP_JOBS={quoted(text)}: is not JSON ({error})") from None
    if not isinstance(jobs, dict):
        raise Misconfigured(f"DEDUP_JOBS={quoted(text)}: must be a JSON object of job name -> job")
    specs = {}
    for name, job in jobs.items():
        field = f"DEDUP_JOBS.{name}"
        if not JOB_NAME.fullmatch(name):
            raise Misconfigured(f"DEDUP_JOBS={quoted(name)}: a job name is letters, digits, '-', '_'")
        if not isinstance(job, dict) or not {"job_id", "schedule", "time_zone"} <= set(job):
            raise Misconfigured(f"{field}={quoted(json.dumps(job))}: must hold job_id, schedule and time_zone")
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
        numbers = {}  # JobSpec's field of each: the key without "_seconds"
        for key in (
            "max_lateness_seconds",
            "attempt_deadline_seconds",
            "lease_seconds",
            "retry_window_seconds",
            "max_execution_seconds",
        ):
            number = job.get(key)
            if number is not None and (type(number) is not int or number <= 0):
                raise Misconfigured(f"{field}.{key}={number!r}: must be a positive whole number or null")
            numbers[key.removesuffix("_seconds")] = dt.timedelta(seconds=number) if number is not None else None
        deadline = job.get("attempt_deadline_seconds")  # a whole number by now
        if deadline is not None and deadline <= RELEASE_MARGIN.total_seconds():  # stopped before it could start
            raise Misconfigured(f"{field}.attempt_deadline_seconds={deadline!r}: {DEADLINE_RULE}")
        try:  # paused, catch_up, dst_gap, overlap: the same rule as config.yaml's
            choices = {
                key: rules.check_choice(f"{field}.{key}", job[key], allowed)
                for key, allowed in rules.JOB_CHOICES.items()
                if key in job
            }
        except rules.RuleError as error:
            raise Misconfigured(str(error)) from None
        specs[name] = JobSpec(job["job_id"], str(job["schedule"]), str(job["time_zone"]), **numbers, **choices)
    return MappingProxyType(specs)


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
    # config.yaml's target (rules.TARGETS): a proxy target's job.py starts executions, which the handler follows.
    target: str
    # The Cloud Tasks queue that delivers re-runs, backfills and catch-ups (projects/P/locations/L/queues/Q);
    # None: not deployed with one (the job catch_up needs it).
    tasks_queue: str | None = None
    # Where a run may be keyed (project, location): `serve` in the configuration; empty: only the function's own.
    serve: tuple[tuple[str, str], ...] = ()
    # The audit job's cron (Etc/UTC, as Terraform's audit job): its deliveries are keyed by it like a job's.
    audit_schedule: str | None = None

    @property
    def served(self) -> tuple[tuple[str, str], ...]:
        return self.serve or ((self.project, self.location),)

    @property
    def settle(self) -> dt.timedelta:
        """How long after its schedule time a run may still be claimed: its deliveries, then the last one's lease.
        The project's (the audit job's); a job's own is settle_for."""
        return self.lease + self.retry_window

    def spec_of(self, job_name: str) -> JobSpec | None:
        """The job a delivery names: one of DEDUP_JOBS, the audit job (its cron), or None (a job none lists)."""
        if job_name == self.audit_job and job_name not in self.jobs and self.audit_schedule:
            return JobSpec(job_name, self.audit_schedule, AUDIT_TIME_ZONE)
        return self.jobs.get(job_name)

    def _own(self, job_name: str, field: str, default):
        """The job's own value of `field` (config.yaml), else `default`, the project's."""
        value = getattr(self.jobs.get(job_name), field, None)
        return default if value is None else value

    def lease_for(self, job_name: str) -> dt.timedelta:
        return self._own(job_name, "lease", self.lease)

    def max_execution_for(self, job_name: str) -> dt.timedelta:
        """How long a run of `job_name` may stay `started`: the job's own (config.yaml), else rules' default for
        the retention (a DEDUP_JOBS without it: a test's, a hand-set one)."""
        default = rules.max_execution_seconds(job_name, None, int(self.retention.total_seconds()))
        return self._own(job_name, "max_execution", dt.timedelta(seconds=default))

    @property
    def dead_letters_collection(self) -> str:
        """Where a Cloud Run job target's tasks write the items that failed for good (its store module)."""
        return f"{self.collection}_job_dead_letters"

    def settle_for(self, job_name: str) -> dt.timedelta:
        """settle, for a run of `job_name`: with the job's own lease and retry window."""
        return self.lease_for(job_name) + self._own(job_name, "retry_window", self.retry_window)

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

        def seconds(name: str, minimum: int = 0, rule: str = POSITIVE_SECONDS) -> dt.timedelta:
            text = value(name, WHOLE_NUMBER, rule)
            if int(text) <= minimum:
                raise Misconfigured(f"{name}={text!r}: {rule}")
            return dt.timedelta(seconds=int(text))

        # An environment's deadline, lease or retry window (a test's, a local run's) holds for every job, over
        # each job's own from config.yaml.
        overridden = ("attempt_deadline", "lease", "retry_window")
        cleared = {field: None for field in overridden if environ.get(f"DEDUP_{field.upper()}_SECONDS")}
        jobs = parse_jobs(value("DEDUP_JOBS"))
        # Empty: deployed without a deliveries queue (a catch_up job needs one).
        queue = environ.get("DEDUP_TASKS_QUEUE", baked_settings().get("DEDUP_TASKS_QUEUE")) or None
        if queue is not None and not TASKS_QUEUE.fullmatch(queue):
            raise Misconfigured(f"DEDUP_TASKS_QUEUE={queue!r}: must be projects/PROJECT/locations/REGION/queues/QUEUE")
        # config.yaml's `serve` as JSON, checked by its rule (rules.check_serve); unset: only the function's own place.
        serve = environ.get("DEDUP_SERVE") or baked_settings().get("DEDUP_SERVE")
        try:
            places = rules.check_serve(json.loads(serve) or [], "", "") if serve else []  # null is refused too
        except json.JSONDecodeError as error:
            raise Misconfigured(f"DEDUP_SERVE={quoted(serve)}: is not JSON ({error})") from None
        except rules.RuleError as error:
            raise Misconfigured(f"DEDUP_SERVE={quoted(serve)}: {error}") from None
        for name, job in jobs.items():
            if job.catch_up and queue is None:
                raise Misconfigured(
                    f"DEDUP_JOBS.{name}.catch_up=true: the audit delivers through a Cloud Tasks queue, "
                    "and DEDUP_TASKS_QUEUE is not set"
                )
        return cls(
            project=value("DEDUP_PROJECT", PROJECT, "must be a GCP project id"),
            location=value("DEDUP_LOCATION", LOCATION, "must be a GCP region such as europe-west1"),
            database=value("DEDUP_DATABASE"),
            collection=value("DEDUP_COLLECTION"),
            lease=seconds("DEDUP_LEASE_SECONDS"),
            retention=seconds("DEDUP_RETENTION_SECONDS"),
            max_future=seconds("DEDUP_MAX_FUTURE_SECONDS"),
            retry_window=seconds("DEDUP_RETRY_WINDOW_SECONDS"),
            jobs={name: dataclasses.replace(job, **cleared) for name, job in jobs.items()} if cleared else jobs,
            audit_job=value("DEDUP_AUDIT_JOB", JOB_NAME, "must be a Cloud Scheduler job name"),
            attempt_deadline=seconds("DEDUP_ATTEMPT_DEADLINE_SECONDS", RELEASE_MARGIN.seconds, DEADLINE_RULE),
            target=value("DEDUP_TARGET", *rules.FIELDS["target"]),
            serve=tuple((place["project"], place["location"]) for place in places),
            tasks_queue=queue,
            # config.Config.audit_schedule's, never a user's: derived from audit_interval_minutes, checked there.
            audit_schedule=environ.get("DEDUP_AUDIT_SCHEDULE") or baked_settings().get("DEDUP_AUDIT_SCHEDULE"),
        )

    def stop_after(self, job_name: str) -> dt.timedelta:
        """How long after a delivery arrives its work is stopped (stop.py): the job's attempt deadline less the
        release margin, so that the release and the answer reach Scheduler in time. The one place that says it."""
        return self.attempt_deadline_for(job_name) - RELEASE_MARGIN

    def attempt_deadline_for(self, job_name: str) -> dt.timedelta:
        """How long Scheduler, and the queue for a task of the job (task_queue.enqueue), waits for an answer."""
        return self._own(job_name, "attempt_deadline", self.attempt_deadline)

    def job_id(self, job_name: str) -> str | None:
        """The job id of the Scheduler job `job_name`, as the answers spell it; None for a job DEDUP_JOBS lacks."""
        return self._own(job_name, "job_id", None)

    @property
    def database_name(self) -> str:
        """The database's resource name, as Firestore spells it in its own errors."""
        return f"projects/{self.project}/databases/{self.database}"
