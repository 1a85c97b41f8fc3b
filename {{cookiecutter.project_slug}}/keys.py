"""A delivery's run key, read from its headers: (project, location, job name, schedule time), constant across
Scheduler's retries of one run; its sha256 is the run's id (its record's document id). Re-run headers are read here
too, and a run's headers written (for Cloud Tasks)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
from collections.abc import Mapping

import rules
import schedules
from config import Config, Job
from outcomes import InvalidDelivery, SkippedDstGap, quoted

JOB_NAME_HEADER = "X-CloudScheduler-JobName"
SCHEDULE_TIME_HEADER = "X-CloudScheduler-ScheduleTime"
# Cloud Scheduler sends no project or location; our Scheduler jobs add these, so one endpoint serves several.
PROJECT_HEADER = "X-Scheduler-Project"
LOCATION_HEADER = "X-Scheduler-Location"
# A re-run (scheduled_dedup_tools.runs rerun): its retries carry the same id, so the work runs once per id.
RERUN_ID_HEADER = "X-Rerun-Id"
RERUN_BY_HEADER = "X-Rerun-By"
RERUN_REASON_HEADER = "X-Rerun-Reason"
RERUN_HEADERS = (RERUN_ID_HEADER, RERUN_BY_HEADER, RERUN_REASON_HEADER)  # Rerun's fields, in order

JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,500}")  # Cloud Scheduler's job id shape
RERUN_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")
RERUN_TEXT = re.compile(r"[^\x00-\x1f\x7f]{1,500}")  # who asked and why: printable and bounded (stored in the record)
RFC3339 = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})[Tt](?P<hms>\d{2}:\d{2}):(?P<second>\d{2})(?P<fraction>\.\d+)?"
    r"(?P<offset>[Zz]|[+-]\d{2}:\d{2})"
)
HEADER_RULES = {  # each header's rule (the schedule time's: parse_schedule_time)
    JOB_NAME_HEADER: (JOB_NAME, "must be a Cloud Scheduler job id (letters, digits, '-', '_')"),
    PROJECT_HEADER: (rules.PROJECT_ID, "must be a GCP project id"),
    LOCATION_HEADER: (rules.REGION, "must be a GCP region such as europe-west1"),
    RERUN_ID_HEADER: (RERUN_ID, "must be 1-100 letters, digits, '-', '_'"),
    RERUN_BY_HEADER: (RERUN_TEXT, "must say who asked (1-500 printable characters)"),
    RERUN_REASON_HEADER: (RERUN_TEXT, "must say why (1-500 printable characters)"),
}


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
    def trigger(self) -> str:  # the record's and the log line's name of how the run came
        return "manual" if self.manual else "scheduled"

    @property
    def log_fields(self) -> dict[str, str]:
        """The run on a log line about it (the handler's, the audit's): its logs and the per-job metric find it so."""
        return {
            "run_id": self.run_id,
            "job": self.job_name,
            "schedule_time": self.schedule_time.isoformat(),
            "trigger": self.trigger,
        }


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
        return parsed.astimezone(dt.UTC)
    except (ValueError, OverflowError):  # OverflowError: 0001-01-01T00:00:00+01:00 has no UTC datetime
        raise ValueError("is not a valid date and time") from None


def rfc3339(moment: dt.datetime) -> str:
    """UTC with a Z, as Cloud Scheduler sends X-CloudScheduler-ScheduleTime."""
    return moment.astimezone(dt.UTC).isoformat().replace("+00:00", "Z")


def _header(headers: Mapping[str, str], name: str, missing: str, default: str | None = None) -> str:
    """Header `name` (of lower-cased `headers`) as HEADER_RULES wants it, or InvalidDelivery saying `missing`."""
    pattern, rule = HEADER_RULES[name]
    value = headers.get(name.lower(), default)
    if value is None:
        raise InvalidDelivery(f"missing {name} header: {missing}")
    if not pattern.fullmatch(value):
        raise InvalidDelivery(f"{name}={quoted(value)}: {rule}")
    return value


def read_run_key(headers: Mapping[str, str], config: Config, now: dt.datetime) -> RunKey:
    """Headers (any letter case) -> the run's key, or InvalidDelivery with a one-line reason."""
    lowered = {name.lower(): value for name, value in headers.items()}
    missing = "not a Cloud Scheduler delivery"
    job_name = _header(lowered, JOB_NAME_HEADER, missing)
    project = _header(lowered, PROJECT_HEADER, missing, config.project)
    location = _header(lowered, LOCATION_HEADER, missing, config.location)
    if (project, location) not in config.served:
        served = ", ".join(f"{p}/{loc}" for p, loc in config.served)
        raise InvalidDelivery(
            f"{PROJECT_HEADER}={quoted(project)}, {LOCATION_HEADER}={quoted(location)}: this function serves "
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
        raise InvalidDelivery(f"{SCHEDULE_TIME_HEADER}={quoted(raw_time)}: {error}") from None
    # Past retention (its very edge too: a record counts as absent from expire_at on) a replay would run again.
    if schedule_time <= now - config.retention:
        raise InvalidDelivery(
            f"{SCHEDULE_TIME_HEADER}={quoted(raw_time)}: older than the retention window "
            f"({int(config.retention.total_seconds())} s); refusing a run that may already have happened"
        )
    # Dated ahead by the time as sent (a DST reading may be keyed later): a Force run; Scheduler is never early.
    manual = schedule_time > now + schedules.CLOCK_MARGIN
    job = config.spec_of(job_name)  # the audit job's cron too
    if job is None:  # a job the configuration lacks: no cron to check against
        if schedule_time > now + config.max_future:
            raise InvalidDelivery(
                f"{SCHEDULE_TIME_HEADER}={quoted(raw_time)}: more than "
                f"{int(config.max_future.total_seconds())} s in the future"
            )
    else:
        schedule_time = _fire_time(job, schedule_time, raw_time, now)
    return RunKey(project=project, location=location, job_name=job_name, schedule_time=schedule_time, manual=manual)


def _fire_time(job: Job, schedule_time: dt.datetime, raw_time: str, now: dt.datetime) -> dt.datetime:
    """The fire time a delivery of `job` is a reading of (schedules.py: daylight saving), or InvalidDelivery past
    the job's next fire time, or SkippedDstGap for a skipped time the job skips."""
    fire = schedules.fire_time_of(job.fire_rule, schedule_time)
    if fire is not None and fire.instant is None:
        raise SkippedDstGap(
            f"{SCHEDULE_TIME_HEADER}={quoted(raw_time)}: {fire.wall:%Y-%m-%d %H:%M} does not exist in "
            f"{job.time_zone} (daylight saving) and the job's dst_gap is {schedules.SKIP}; the work does not run"
        )
    keyed = fire.instant if fire is not None else schedule_time
    if keyed <= now + schedules.CLOCK_MARGIN:
        return keyed  # before the next fire time after now + the margin, which comes later still
    # Only a delivery dated ahead (a Force run, or a forged time) walks the cron to the next fire time.
    latest = schedules.next_fire_after(job.fire_rule, now + schedules.CLOCK_MARGIN)
    if latest is None or keyed > latest:
        raise InvalidDelivery(
            f"{SCHEDULE_TIME_HEADER}={quoted(raw_time)}: later than the job's next fire time after now "
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


def read_rerun(headers: Mapping[str, str]) -> Rerun | None:
    """The re-run a delivery asks for (X-Rerun-Id, -By, -Reason), None for a plain delivery, or InvalidDelivery."""
    lowered = {name.lower(): value for name, value in headers.items()}
    if RERUN_ID_HEADER.lower() not in lowered:
        return None
    missing = f"a re-run ({RERUN_ID_HEADER}) says who asked and why"
    return Rerun(*(_header(lowered, name, missing) for name in RERUN_HEADERS))


def delivery_headers(key: RunKey, rerun: Rerun | None = None) -> dict[str, str]:
    """A Scheduler delivery's headers of the run (plus the re-run's). Cloud Tasks replaces only Host, Content-Length,
    User-Agent, X-Google-* and X-AppEngine-* (Cloud Tasks v2 API, HttpRequest.headers)."""
    headers = {
        JOB_NAME_HEADER: key.job_name,
        SCHEDULE_TIME_HEADER: rfc3339(key.schedule_time),
        PROJECT_HEADER: key.project,
        LOCATION_HEADER: key.location,
    }
    return headers | (dict(zip(RERUN_HEADERS, dataclasses.astuple(rerun), strict=True)) if rerun else {})
