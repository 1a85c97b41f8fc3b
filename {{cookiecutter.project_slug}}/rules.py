"""The configuration's rules, once: for the bake's hook, config.py and the tests. Terraform checks shapes only (each
check in terraform/modules/scheduled-dedup/variables.tf says so). Standard library only: the hook runs it too."""

from __future__ import annotations

import calendar
import dataclasses
import datetime as dt
import functools
import importlib
import re
import zoneinfo
from collections.abc import Mapping

# Cloud Scheduler HTTP targets accept attempt deadlines of 15 s to 30 min; its retry_config's bounds.
ATTEMPT_DEADLINE_RANGE = (15, 1800)
MAX_RETRY_COUNT = 5
MAX_BACKOFF_SECONDS = 3600
# A lease outlasts the timeout by this at least (the work stops 10 s before the deadline: config.Config.stop_after).
LEASE_MARGIN_SECONDS = 30
# A job's lease when the file does not say: its deadline + this (a retry comes after it).
LEASE_AFTER_DEADLINE_SECONDS = 60
# Scheduler's deliveries come seconds late: a lateness limit below a minute would skip runs that came on time.
MIN_MAX_LATENESS_SECONDS = 60
# Minutes dividing an hour or a day, so a cron says them (local.audit_schedule); at most 12 h: a day's lookback.
AUDIT_INTERVALS_MINUTES = (5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720)
# How far back each audit run looks (audit.AUDIT_LOOKBACK), never beyond the retention.
AUDIT_LOOKBACK_SECONDS = 86400
DEFAULT_AUDIT_INTERVAL_MINUTES = 60
# A proxy target's run may stay `started` this long before the audit reports it `overdue`: neither API ends an
# execution soon by itself (a Cloud Run task runs up to 24 h per attempt, a Workflows execution up to a year).
DEFAULT_MAX_EXECUTION_SECONDS = 86400
MIN_MAX_EXECUTION_SECONDS = 60
# The bound of keys without one of their own: 1000 years (a few thousand overflow datetime's year 9999).
MAX_SECONDS = 1000 * 365 * 86400

SLUG = re.compile(r"[a-z][a-z0-9-]{1,18}[a-z0-9]")
PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
REGION = re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}")
JOB_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
COLLECTION_ID = re.compile(r"(?!__.*__\Z)[A-Za-z0-9_-]{1,100}")
# Firestore refuses UUID-like database ids (REST projects.databases.create, databaseId).
DATABASE_ID = re.compile(r"(?![0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}\Z)(?:\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9])")
TARGETS = ("function", "cloud_run_job", "workflow")

# Each fixed-shape key, by the bake's question's name: the pattern to fullmatch ("jobs": each id's), the rule.
FIELDS: dict[str, tuple[re.Pattern[str], str]] = {
    # Service-account ids (6-30 chars) add up to 8 characters (-invoker) to the slug, hence 20 at most.
    "project_slug": (
        SLUG,
        "must be 3-20 chars of lowercase letters, digits and hyphens, start with a letter, end with a letter or digit",
    ),
    "gcp_project_id": (
        PROJECT_ID,
        "a GCP project id is 6-30 chars of lowercase letters, digits and hyphens, "
        "starts with a letter and does not end with a hyphen",
    ),
    "region": (REGION, "must be a GCP region such as europe-west1 or us-central1"),
    "target": (re.compile("|".join(TARGETS)), f"must be one of {', '.join(TARGETS)}"),
    "jobs": (
        JOB_ID,
        "each job id must be 1-40 chars of lowercase letters, digits and hyphens, starting with a letter or digit",
    ),
    "firestore_database": (
        DATABASE_ID,
        "must be (default) or 4-63 chars of lowercase letters, digits and hyphens, starting with a letter, "
        "not UUID-like",
    ),
    "firestore_collection": (
        COLLECTION_ID,
        "must be 1-100 chars of letters, digits, '_' or '-', and not __like_this__ (reserved by Firestore)",
    ),
}


class RuleError(ValueError):
    def __init__(self, field: str, value: object, rule: str) -> None:
        super().__init__(f"{field}={value!r}: {rule}")
        self.field = field


def check_field(field: str, value: object, name: str | None = None, shapes: Mapping = FIELDS) -> object:
    """`value` has the shape of shapes[field]; a refusal names `name` (default: the field)."""
    shape, rule = shapes[field]
    if not (isinstance(value, str) and shape.fullmatch(value)):
        raise RuleError(name or field, value, rule)
    return value


def parse_seconds(field: str, value: object, low: int = 0, high: int | None = None, rule: str = "") -> int:
    """A whole number within [low, high], else at most MAX_SECONDS (cookiecutter hands numbers over as text)."""
    text = str(value)  # no strip(): the templates render the value as given
    if not re.fullmatch(r"[0-9]+", text):
        raise RuleError(field, value, rule or "must be a whole number")
    number = int(text)
    if high is None and number > MAX_SECONDS:
        raise RuleError(field, value, f"must be at most {MAX_SECONDS} (1000 years): the function computes dates by it")
    if number < low or (high is not None and number > high):
        raise RuleError(field, value, rule or f"must be {f'{low}-{high}' if high is not None else f'at least {low}'}")
    return number


MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# unix-cron's fields (day of week: 0 and 7 are Sunday), each with its names.
CRON_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    ("month", 1, 12, {month: i for i, month in enumerate(MONTHS, 1)}),
    ("day of week", 0, 7, {day: i for i, day in enumerate(WEEKDAYS)}),
)
# '*', 'n' or 'a-b', each optionally '/step'. ASCII only: \d would pass digits such as "٣" that Scheduler refuses.
CRON_ITEM = re.compile(r"(?P<range>\*|(?P<lo>[0-9A-Za-z]+)(?:-(?P<hi>[0-9A-Za-z]+))?)(?:/(?P<step>[0-9]+))?")
GROC_REFUSED = (
    "groc forms such as 'every 5 minutes' are refused because Cloud Scheduler only guarantees "
    "the X-CloudScheduler-ScheduleTime header for unix-cron"
)
TIMING_KEYS = (
    "attempt_deadline_seconds",
    "lease_seconds",
    "retry_count",
    "min_backoff_seconds",
    "max_backoff_seconds",
    "max_doublings",
    "max_retry_duration_seconds",
)
# What Terraform gives Scheduler as written: a derivation in HCL would copy the formula (derive_timing).
SCHEDULER_KEYS = tuple(key for key in TIMING_KEYS if key != "lease_seconds")
# Per-job options with a fixed set of values (paused is also Terraform's, scheduler.tf).
JOB_CHOICES: dict[str, tuple[object, ...]] = {
    "paused": (False, True),
    "catch_up": (False, True),
    "dst_gap": ("end_of_gap", "skip"),
    "overlap": ("skip", "start"),
}
JOB_KEYS = {"schedule", "time_zone", "max_lateness_seconds", "max_execution_seconds", *TIMING_KEYS, *JOB_CHOICES}


def cron_fields(schedule: str) -> list[str]:
    """Split on ASCII white space, as Terraform's RE2 `\\s` (main.tf, local.cron_shape): a no-break space is refused."""
    return re.findall(r"[^\t\n\f\r ]+", schedule)


def _cron_value(token: str, field: tuple[str, int, int, Mapping[str, int]]) -> int:
    name, low, high, names = field
    number = int(token) if token.isdigit() else names.get(token.lower())
    if number is None or not low <= number <= high:
        raise ValueError(f"{name} value {token!r} is outside {low}-{high}")
    return number


@dataclasses.dataclass(frozen=True)
class Cron:
    """A 5-field unix-cron schedule as sets of values (day of week 0-6, Sunday 0)."""

    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    # Vixie/Debian cron, and cronsim: when the day-of-month or the day-of-week field starts with '*', a day must
    # match both; otherwise either ("0 0 13 * 5": every 13th and every Friday).
    days_and_weekdays: bool

    @classmethod
    def parse(cls, schedule: str) -> Cron:
        parts = cron_fields(schedule)
        sets = []
        for part, field in zip(parts, CRON_FIELDS, strict=True):
            name, low, high, _ = field
            values = set()
            for item in part.split(","):
                match = CRON_ITEM.fullmatch(item)
                if not match:
                    raise ValueError(f"{name} item {item!r} is not a number, range, list or step")
                step = int(match["step"] or 1)
                if match["lo"] is None:  # '*'
                    start, end = low, high
                else:  # 'n/step' runs from n to the field's end, as in Vixie cron
                    start = _cron_value(match["lo"], field)
                    end = _cron_value(match["hi"], field) if match["hi"] else (high if match["step"] else start)
                    if end < start:
                        raise ValueError(f"{name} range {item!r} runs backwards")
                if step == 0:
                    raise ValueError(f"{name} step in {item!r} is 0")
                values.update(range(start, end + 1, step))
            sets.append(frozenset(values))
        minutes, hours, days, months, weekdays = sets
        both = parts[2].startswith("*") or parts[4].startswith("*")
        return cls(minutes, hours, days, months, frozenset(day % 7 for day in weekdays), both)

    def fires_on(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        by_date, by_weekday = day.day in self.days, (day.weekday() + 1) % 7 in self.weekdays
        return (by_date and by_weekday) if self.days_and_weekdays else (by_date or by_weekday)

    @functools.cached_property
    def day_minutes(self) -> tuple[int, ...]:
        return tuple(sorted(hour * 60 + minute for hour in self.hours for minute in self.minutes))

    def walls(self, day: dt.date) -> list[dt.datetime]:
        return [dt.datetime.combine(day, dt.time(minute // 60, minute % 60)) for minute in self.day_minutes]

    def fires_ever(self) -> bool:
        """False for a day of month none of its months has ('0 0 30 2 *'), unless either day field may match."""
        longest = [calendar.monthrange(2000, month)[1] for month in self.months]
        return not self.days_and_weekdays or any(day <= days for days in longest for day in self.days)


def check_schedule(job_id: str, schedule: str) -> str:
    field = f"jobs.{job_id}.schedule"
    if not isinstance(schedule, str):
        raise RuleError(field, schedule, "must be a 5-field unix-cron string")
    if len(cron_fields(schedule)) != 5:
        raise RuleError(field, schedule, f"must be 5-field unix-cron such as '0 3 * * *'; {GROC_REFUSED}")
    try:
        cron = Cron.parse(schedule)
    except ValueError as error:
        # Some groc forms have five words ("1st monday of sep 17:00"): say why groc is refused there too.
        raise RuleError(field, schedule, f"not valid unix-cron: {error}; {GROC_REFUSED}") from None
    if not cron.fires_ever():
        # Terraform and Scheduler take it; cronsim refuses it ("Bad day-of-month"): every delivery `misconfigured`.
        raise RuleError(field, schedule, "never fires: no month in its month field has that day of month")
    return schedule


@functools.cache
def iana_time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def check_time_zone(job_id: str, time_zone: str) -> str:
    # Not ZoneInfo(): it raises on "Europe", loads "posix/Europe/Madrid" and the alias "localtime": none is Scheduler's.
    if not isinstance(time_zone, str) or time_zone not in iana_time_zones():
        rule = "must be an IANA time zone such as Etc/UTC or Europe/Madrid"
        raise RuleError(f"jobs.{job_id}.time_zone", time_zone, rule)
    return time_zone


def check_max_lateness(job_id: str, value: object) -> int:
    rule = f"must be a whole number of seconds, at least {MIN_MAX_LATENESS_SECONDS} (omit it for no limit)"
    return parse_seconds(f"jobs.{job_id}.max_lateness_seconds", value, MIN_MAX_LATENESS_SECONDS, rule=rule)


def max_execution_seconds(
    job_id: str, given: object, retention: int, audit_interval_minutes: int = DEFAULT_AUDIT_INTERVAL_MINUTES
) -> int:
    """At most the retention less two audit intervals: two audits report an overdue run before its record expires."""
    limit = retention - 2 * audit_interval_minutes * 60
    if given is None:
        return max(min(DEFAULT_MAX_EXECUTION_SECONDS, limit), MIN_MAX_EXECUTION_SECONDS)
    rule = (
        f"must be a whole number of seconds from {MIN_MAX_EXECUTION_SECONDS} to {limit} (retention_seconds {retention} "
        f"less two audit intervals of {audit_interval_minutes} min: an overdue execution is reported before its "
        "record could expire)"
    )
    field = f"jobs.{job_id}.max_execution_seconds"
    return parse_seconds(field, given, MIN_MAX_EXECUTION_SECONDS, max(limit, MIN_MAX_EXECUTION_SECONDS - 1), rule)


def check_choice(field: str, value: object, allowed: tuple[object, ...]) -> object:
    """One of `allowed`; true/false also as text (cookiecutter may hand a nested value over so)."""
    if allowed == (False, True):
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if not isinstance(value, bool):
            raise RuleError(field, value, "must be true or false")
    if value not in allowed:
        raise RuleError(field, value, f"must be one of {', '.join(map(str, allowed))}")
    return value


def check_jobs(jobs: object) -> dict[str, dict[str, object]]:
    """The jobs' shape (the timing numbers: check_config)."""
    if not isinstance(jobs, Mapping) or not jobs:
        raise RuleError("jobs", jobs, 'must be a non-empty mapping {"job-id": {"schedule": ..., "time_zone": ...}}')
    checked = {}
    for job_id, job in jobs.items():
        check_field("jobs", job_id)
        if not isinstance(job, Mapping) or "schedule" not in job or not set(job) <= JOB_KEYS:
            rule = f"must hold a schedule, and nothing else but {', '.join(sorted(JOB_KEYS - {'schedule'}))}"
            raise RuleError(f"jobs.{job_id}", job, rule)
        own = {
            "schedule": check_schedule(job_id, job["schedule"]),
            "time_zone": check_time_zone(job_id, job.get("time_zone", "Etc/UTC")),  # Terraform's default too
        }
        if "max_lateness_seconds" in job:
            own["max_lateness_seconds"] = check_max_lateness(job_id, job["max_lateness_seconds"])
        if "max_execution_seconds" in job:  # checked against the retention by check_config
            own["max_execution_seconds"] = job["max_execution_seconds"]
        for key, allowed in JOB_CHOICES.items():
            if key in job:
                own[key] = check_choice(f"jobs.{job_id}.{key}", job[key], allowed)
        checked[job_id] = own | {key: job[key] for key in TIMING_KEYS if key in job}
    return checked


def retry_wait_seconds(retry: int, min_backoff: int, max_backoff: int, max_doublings: int) -> int:
    """Scheduler's wait after attempt `retry` (0: the first): 10 s / 300 s / 3 doublings: 10, 20, 40, 80, 160, 240,
    300 ... (https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs#retryconfig)."""
    if retry <= max_doublings:
        wait = min_backoff * 2**retry
    else:
        wait = min_backoff * 2**max_doublings * (retry - max_doublings + 1)
    return min(wait, max_backoff)


def retry_intervals_seconds(retry_count: int, min_backoff: int, max_backoff: int, max_doublings: int) -> list[int]:
    return [retry_wait_seconds(retry, min_backoff, max_backoff, max_doublings) for retry in range(retry_count)]


def retry_window_seconds(attempt_deadline: int, retry_count: int, max_backoff: int, max_retry_duration: int) -> int:
    """First attempt to the end of the last, every wait max_backoff; Scheduler retries until both bounds are reached."""
    by_count = (retry_count + 1) * attempt_deadline + retry_count * max_backoff
    by_duration = max_retry_duration + max_backoff + attempt_deadline if max_retry_duration else 0
    return max(by_count, by_duration)


def job_retry_window_seconds(timing: Mapping[str, int]) -> int:
    keys = ("attempt_deadline_seconds", "retry_count", "max_backoff_seconds", "max_retry_duration_seconds")
    return retry_window_seconds(*(timing[key] for key in keys))


def check_timing(values: Mapping[str, object], prefix: str = "") -> dict[str, int]:
    """Deadline <= timeout <= lease - margin; retries reach past the lease; retention covers lease + retry window."""
    checked: dict[str, int] = {}

    def number(name: str, low: int = 0, high: int | None = None) -> int:
        checked[name] = parse_seconds(prefix + name, values[name], low, high)
        return checked[name]

    def refuse(name: str, rule: str) -> RuleError:
        return RuleError(prefix + name, values[name], rule)

    deadline = number("attempt_deadline_seconds", *ATTEMPT_DEADLINE_RANGE)
    checked["function_timeout_seconds"] = timeout = deadline
    if "function_timeout_seconds" in values:
        timeout = number("function_timeout_seconds", 1, 3600)  # Cloud Run functions (gen2) HTTP: 60 min at most
        if timeout < deadline:
            raise refuse(
                "function_timeout_seconds",
                f"must be at least attempt_deadline_seconds ({deadline}), "
                "or Scheduler gives up on runs the function still finishes",
            )
    lease = number("lease_seconds", 1)
    if lease < timeout + LEASE_MARGIN_SECONDS:
        limit = "attempt_deadline_seconds" if timeout == deadline else "function_timeout_seconds"
        raise refuse(
            "lease_seconds",
            f"must be at least {limit} + {LEASE_MARGIN_SECONDS} "
            f"({timeout + LEASE_MARGIN_SECONDS}), or a retry takes over a run that is still going",
        )
    retry_count = number("retry_count", 0, MAX_RETRY_COUNT)
    min_backoff = number("min_backoff_seconds", 0, MAX_BACKOFF_SECONDS)
    max_backoff = number("max_backoff_seconds", 0, MAX_BACKOFF_SECONDS)
    if max_backoff < min_backoff:
        raise refuse("max_backoff_seconds", f"must be at least min_backoff_seconds ({min_backoff})")
    max_doublings = number("max_doublings", 0, 16)
    max_retry_duration = number("max_retry_duration_seconds", 0)
    # retry_count = 0 is exempt: no retry can recover a crash, an operator re-runs the run.
    waits = retry_intervals_seconds(retry_count, min_backoff, max_backoff, max_doublings)
    if waits and sum(waits) <= lease:
        rule = (
            f"the retries ({'+'.join(map(str, waits))} = {sum(waits)} s) end before the lease ({lease} s) expires, "
            f"so a run whose instance crashed is never retried; {passing_waits_hint(checked, prefix)}"
        )
        raise refuse("retry_count", rule)
    window = retry_window_seconds(deadline, retry_count, max_backoff, max_retry_duration)
    retention = checked["retention_seconds"] = parse_seconds("retention_seconds", values["retention_seconds"], 1)
    if retention < lease + window:
        rule = (
            f"must be at least {prefix}lease_seconds + the retry window ({lease} + {window} = {lease + window}), "
            "or a late retry finds no record and runs again"
        )
        raise RuleError("retention_seconds", values["retention_seconds"], rule)
    return checked


def passing_waits(retry_count: int, max_doublings: int, lease: int) -> dict[str, int] | None:
    """Backoffs whose `retry_count` waits outlast `lease` within Scheduler's 0-3600 s (None: none do)."""
    if retry_count == 0:
        return None

    def outlast(min_backoff: int, max_backoff: int) -> bool:
        return sum(retry_intervals_seconds(retry_count, min_backoff, max_backoff, max_doublings)) > lease

    derived = derive_timing(ATTEMPT_DEADLINE_RANGE[0], retry_count, lease)
    waits = {key: derived[key] for key in ("min_backoff_seconds", "max_backoff_seconds")}
    if outlast(*waits.values()):
        return waits
    low, high = 1, MAX_BACKOFF_SECONDS  # the waits grow with min_backoff: the smallest that outlasts
    if not outlast(high, MAX_BACKOFF_SECONDS):
        return None
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if outlast(middle, MAX_BACKOFF_SECONDS) else (middle + 1, high)
    return {"min_backoff_seconds": low, "max_backoff_seconds": MAX_BACKOFF_SECONDS}


def passing_waits_hint(timing: Mapping[str, int], prefix: str = "") -> str:
    """Values that pass: retry_count raised up to MAX_RETRY_COUNT, else the lease shortened."""
    lease, doublings, values = timing["lease_seconds"], timing["max_doublings"], {}
    for count in range(timing["retry_count"], MAX_RETRY_COUNT + 1):
        waits = passing_waits(count, doublings, lease)
        if waits:
            break
    else:  # the longest lease the longest waits outlast
        count = MAX_RETRY_COUNT
        lease = values["lease_seconds"] = sum(retry_intervals_seconds(count, *[MAX_BACKOFF_SECONDS] * 2, doublings)) - 1
        waits = passing_waits(count, doublings, lease)
    values |= ({"retry_count": count} if count != timing["retry_count"] else {}) | waits
    return "values that pass: " + ", ".join(f"{prefix}{key} {value}" for key, value in values.items())


def settle_seconds(timing: Mapping[str, int]) -> int:
    """How long after its schedule time a run may still be claimed."""
    return timing["lease_seconds"] + job_retry_window_seconds(timing)


def check_audit_interval(value: object, timing: Mapping[str, int]) -> int:
    """Every run meets an audit only if interval + settle fits the lookback, min(1 day, retention)."""
    field = "audit_interval_minutes"
    minutes = parse_seconds(field, value, 1)
    if minutes not in AUDIT_INTERVALS_MINUTES:
        raise RuleError(field, value, f"must be one of {', '.join(map(str, AUDIT_INTERVALS_MINUTES))}")
    settle = settle_seconds(timing)
    lookback = min(AUDIT_LOOKBACK_SECONDS, timing["retention_seconds"])
    if minutes * 60 + settle > lookback:
        rule = (
            f"the interval ({minutes * 60} s) + lease + retry window ({settle} s) must fit in the audit's lookback "
            f"(min(1 day, retention_seconds) = {lookback} s), or a run could go missing between two audits; "
            + audit_interval_hint(minutes, settle, lookback)
        )
        raise RuleError(field, value, rule)
    return minutes


def audit_interval_hint(minutes: int, settle: int, lookback: int) -> str:
    """The longest interval that fits, else the retention that makes one fit, else what must shrink."""
    fitting = [interval for interval in AUDIT_INTERVALS_MINUTES if interval * 60 + settle <= lookback]
    if fitting:
        return f"a value that passes: audit_interval_minutes {fitting[-1]}"
    in_a_day = [interval for interval in AUDIT_INTERVALS_MINUTES if interval * 60 + settle <= AUDIT_LOOKBACK_SECONDS]
    if minutes in in_a_day:
        return f"a value that passes: retention_seconds {minutes * 60 + settle}"
    if in_a_day:
        longest = in_a_day[-1]
        return f"values that pass: audit_interval_minutes {longest}, retention_seconds {longest * 60 + settle}"
    most = AUDIT_LOOKBACK_SECONDS - AUDIT_INTERVALS_MINUTES[0] * 60
    return f"no interval fits a day's lookback: shorten the lease or retries (lease + retry window at most {most} s)"


# The module's defaults (terraform/modules/scheduled-dedup/variables.tf, a test compares); no ceiling on instances:
# "a baseline quota of 1000 vCPU or 2000 GiB memory would allow ... a maximum of 1000 instances"
# (https://cloud.google.com/run/docs/configuring/max-instances-limits): 1,001 instances of 256M fit it.
FUNCTION_DEFAULTS = {"max_instance_count": 5, "max_instance_request_concurrency": 1}
# Cloud Run: "You can increase this to a maximum of 1,000" concurrent requests per instance
# (https://cloud.google.com/run/docs/about-concurrency); below 1 vCPU "Maximum concurrency must be set to 1"
# (https://cloud.google.com/run/docs/configuring/cpu): a concurrency above 1 gets a whole CPU (the module sets it).
MAX_CONCURRENCY = 1000
# available_cpu: 0.08 to 1 by 0.001, above 1 whole, at most 8 (https://cloud.google.com/run/docs/configuring/cpu).
CPU_SHAPE = re.compile(r"[0-9](\.[0-9]{1,3})?")
CPU_RANGE = (0.08, 8)
# The audit's Scheduler job reads its cron in this zone (audit.tf's time_zone; config.Config.audit).
AUDIT_TIME_ZONE = "Etc/UTC"


def audit_cron(minutes: int) -> str:
    """The audit's cron, in AUDIT_TIME_ZONE: local.audit_schedule (audit.tf) says the same (a test compares)."""
    return f"*/{minutes} * * * *" if minutes < 60 else f"0 */{minutes // 60} * * *"


def check_cpu(value: object, concurrency: int) -> str:
    """available_cpu as Terraform passes it (text); a whole CPU at least above concurrency 1 (MAX_CONCURRENCY)."""
    text = str(value)
    low, high = CPU_RANGE
    if not CPU_SHAPE.fullmatch(text) or not low <= float(text) <= high or (float(text) > 1 and float(text) % 1):
        rule = f"must be a number of vCPUs from {low} to 1, or a whole number from 1 to {high} (Cloud Run's limits)"
        raise RuleError("function.available_cpu", value, rule)
    if concurrency > 1 and float(text) < 1:
        rule = (
            f"max_instance_request_concurrency {concurrency} needs a whole CPU (1 or more): below 1 vCPU Cloud Run "
            "takes one request at a time"
        )
        raise RuleError("function.available_cpu", value, rule)
    return text


def check_function(value: object) -> dict[str, int | str]:
    """config.yaml's `function:` block, the rest FUNCTION_DEFAULTS (the module's available_cpu default)."""
    value = {} if value is None else value
    keys = (*FUNCTION_DEFAULTS, "available_cpu")
    if not isinstance(value, Mapping) or not set(value) <= set(keys):
        raise RuleError("function", value, f"must be a mapping of some of {', '.join(keys)}")
    checked = {**FUNCTION_DEFAULTS}
    if "max_instance_count" in value:
        checked["max_instance_count"] = parse_seconds(
            "function.max_instance_count", value["max_instance_count"], 1, rule="must be a whole number, at least 1"
        )
    if "max_instance_request_concurrency" in value:
        rule = f"must be a whole number from 1 to {MAX_CONCURRENCY} (Cloud Run's limit per instance)"
        concurrency = value["max_instance_request_concurrency"]
        checked["max_instance_request_concurrency"] = parse_seconds(
            "function.max_instance_request_concurrency", concurrency, 1, MAX_CONCURRENCY, rule
        )
    if "available_cpu" in value:
        checked["available_cpu"] = check_cpu(value["available_cpu"], checked["max_instance_request_concurrency"])
    return checked


# config.yaml's keys: every one but OPTIONAL_KEYS is required.
OPTIONAL_KEYS = ("retention_seconds", "audit_interval_minutes", "serve", "function", "defaults")
CONFIG_KEYS = ("slug", "project", "region", "target", "database", "collection", *OPTIONAL_KEYS, "jobs")


def derive_timing(
    deadline: int, retry_count: int = 5, lease: int | None = None, min_backoff: int | None = None
) -> dict[str, int]:
    """The numbers a deadline implies (the lease outlasts it, the waits the lease): the one copy of these formulas."""
    lease = deadline + LEASE_AFTER_DEADLINE_SECONDS if lease is None else lease
    retries = min(max(retry_count, 0), MAX_RETRY_COUNT)
    if min_backoff is None:  # else given: the longest wait follows it
        # Waits of b, 2b, 4b, 8b, 16b... with 3 doublings: 1, 1+2, 1+2+4, 1+2+4+8, 1+2+4+8+8 (+ the cap) times b.
        growth = (1, 1, 3, 7, 15, 25)[retries]
        doubling = max(30, (lease + growth) // growth)
        even = min((lease + retries) // retries, MAX_BACKOFF_SECONDS) if retries else 30
        min_backoff = doubling if retries and doubling <= 360 else even
    fifth_wait = lease + 1 - 15 * min_backoff if retry_count == MAX_RETRY_COUNT else 0
    max_backoff = min(max(10 * min_backoff, fifth_wait), MAX_BACKOFF_SECONDS)
    return {"lease_seconds": lease, "min_backoff_seconds": min_backoff, "max_backoff_seconds": max_backoff}


def resolve_job_timing(
    job_id: str, job: Mapping[str, object], defaults: Mapping[str, object], prefix: str | None = None
) -> dict[str, object]:
    """A job's numbers, else the defaults'; no lease of its own: deadline + 60 if it sets its deadline or the defaults
    no lease. A Scheduler number in neither is refused with derive_timing's value (Terraform reads it as written)."""
    prefix = f"jobs.{job_id}." if prefix is None else prefix
    merged = {**defaults, **{key: job[key] for key in TIMING_KEYS if key in job}}
    missing = [key for key in SCHEDULER_KEYS if key not in merged]
    own_lease = "lease_seconds" not in job and ("attempt_deadline_seconds" in job or "lease_seconds" not in merged)
    if missing or own_lease:
        given = merged.get("attempt_deadline_seconds", 0)
        deadline = parse_seconds(f"{prefix}attempt_deadline_seconds", given, *ATTEMPT_DEADLINE_RANGE)
    if missing:
        hint = derive_timing(deadline, int(str(merged.get("retry_count", MAX_RETRY_COUNT))))
        suggestion = f"(e.g. {hint[missing[0]]})" if missing[0] in hint else "(e.g. the default)"
        rule = f"is set neither for the job nor under defaults: Terraform takes it as written, so write it {suggestion}"
        raise RuleError(f"{prefix}{missing[0]}", None, rule)
    if own_lease:
        merged["lease_seconds"] = derive_timing(deadline)["lease_seconds"]
    return merged


def check_serve(value: object, project: str, region: str) -> list[dict[str, str]]:
    if value is None:
        return [{"project": project, "location": region}]
    rule = "must be a list of {project: <GCP project id>, location: <region>}"
    if not isinstance(value, list) or not value:
        raise RuleError("serve", value, rule)
    for entry in value:
        if not isinstance(entry, Mapping) or set(entry) != {"project", "location"}:
            raise RuleError("serve", entry, rule)
        check_field("gcp_project_id", entry["project"], "serve.project")
        check_field("region", entry["location"], "serve.location")
    return [dict(entry) for entry in value]


# The tools package (requirements-dev.txt's pin) that holds the deploy-time rules: never the function's.
TOOLS = "scheduled_dedup_tools"


def check_config(
    raw: object, start: dt.date | None = None, schedules: bool = True, defaults_prefix: str = "defaults."
) -> dict[str, object]:
    """config.yaml, checked: each job with its resolved numbers (`timing`), the defaults as the audit's. `schedules`:
    also the deploy-time rules, imported by name so that the function's imports (config.undeployed) never reach them."""
    schedule_rules = importlib.import_module(f"{TOOLS}.schedule_rules") if schedules else None
    if not isinstance(raw, Mapping):
        raise RuleError("config.yaml", raw, f"must be a mapping of {', '.join(CONFIG_KEYS)}")
    unknown = sorted(set(raw) - set(CONFIG_KEYS))
    missing = sorted(set(CONFIG_KEYS) - set(OPTIONAL_KEYS) - set(raw))
    if unknown or missing:
        rule = f"unknown key(s) {unknown} or missing key(s) {missing}: the keys are {', '.join(CONFIG_KEYS)}"
        raise RuleError("config.yaml", sorted(raw), rule)
    project, region = check_field("gcp_project_id", raw["project"]), check_field("region", raw["region"])
    checked: dict[str, object] = {
        "slug": check_field("project_slug", raw["slug"]),
        "project": project,
        "region": region,
        "target": check_field("target", raw["target"]),
        "database": check_field("firestore_database", raw["database"]),
        "collection": check_field("firestore_collection", raw["collection"]),
        "serve": check_serve(raw.get("serve"), project, region),
    }
    defaults = raw.get("defaults") or {}
    if not isinstance(defaults, Mapping) or not set(defaults) <= set(TIMING_KEYS):
        raise RuleError("defaults", defaults, f"must be a mapping of some of {', '.join(TIMING_KEYS)}")
    jobs = check_jobs(raw["jobs"])
    retention = raw.get("retention_seconds", 604800)
    start = start or dt.date.today()
    audit = {**resolve_job_timing("audit", {}, defaults, defaults_prefix), "retention_seconds": retention}
    audit_timing = check_timing(audit, defaults_prefix)
    warnings = schedule_rules.check_schedule_timing({}, audit_timing, start, defaults_prefix) if schedules else []
    for job_id, job in jobs.items():
        prefix = f"jobs.{job_id}."
        values = {**resolve_job_timing(job_id, job, defaults), "retention_seconds": retention}
        job["timing"] = check_timing(values, prefix)
        if schedules:
            own = schedule_rules.check_schedule_timing({job_id: job}, job["timing"], start, prefix)
            if {"retry_count", "max_retry_duration_seconds"} & set(job):  # else the defaults' warning says it
                warnings.extend(f"{prefix.rstrip('.')}: {warning}" for warning in own)
    checked["retention_seconds"] = parse_seconds("retention_seconds", retention, 1)
    interval = raw.get("audit_interval_minutes", DEFAULT_AUDIT_INTERVAL_MINUTES)
    # One lookback for all: the slowest job to settle decides, and a refusal's hint holds for every job.
    slowest = max([audit_timing, *(job["timing"] for job in jobs.values())], key=settle_seconds)
    checked["audit_interval_minutes"] = check_audit_interval(interval, slowest)
    for job_id, job in jobs.items():  # every job's, given or not: the audit judges its runs by it
        given = job.get("max_execution_seconds")
        retention_seconds, minutes = checked["retention_seconds"], checked["audit_interval_minutes"]
        job["max_execution_seconds"] = max_execution_seconds(job_id, given, retention_seconds, minutes)
    if schedules:  # not a refusal: the dates daylight saving repeats or skips a job's fire times
        warnings.extend(schedule_rules.dst_warnings(jobs, start))
    checked = {**checked, "defaults": audit_timing, "jobs": jobs, "warnings": warnings}
    checked["function"] = check_function(raw.get("function"))
    if schedules:
        checked["herd"] = schedule_rules.schedule_herd(checked, start)
        schedule_rules.check_capacity(checked["function"], checked["herd"], audit_timing["retry_count"])
    return checked
