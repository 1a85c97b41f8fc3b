"""The rules a bake must satisfy, as small functions the hooks call and the tests import.

Every rule that Terraform also enforces says so next to it: the same rule lives in
`terraform/modules/scheduled-dedup/variables.tf` (a `validation` block) and both are tested.
Each refusal is a `RuleError` whose message is one line: the variable, the value given, the rule.
Standard library only: a hook runs in whatever Python runs cookiecutter.
"""

from __future__ import annotations

import functools
import re
import unicodedata
import zoneinfo
from collections.abc import Mapping

# Also in Terraform (locals.lease_margin_seconds): how much longer than the function timeout a lease lasts.
LEASE_MARGIN_SECONDS = 30
# Cloud Scheduler HTTP targets accept attempt deadlines of 15 s to 30 min.
ATTEMPT_DEADLINE_RANGE = (15, 1800)
# Cloud Run functions (gen2) HTTP functions time out after at most 60 min.
MAX_FUNCTION_TIMEOUT_SECONDS = 3600
# Cloud Scheduler retry_config bounds.
MAX_RETRY_COUNT = 5
MAX_BACKOFF_SECONDS = 3600

SLUG = re.compile(r"[a-z][a-z0-9-]{1,18}[a-z0-9]")
PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
REGION = re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}")
JOB_ID = re.compile(r"[a-z0-9][a-z0-9-]{0,39}")
# Firestore reserves collection ids of the form __name__.
COLLECTION_ID = re.compile(r"(?!__.*__\Z)[A-Za-z0-9_-]{1,100}")
DATABASE_ID = re.compile(r"\(default\)|[a-z][a-z0-9-]{2,61}[a-z0-9]")
TARGETS = ("function", "cloud_run_job", "workflow")

MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
# unix-cron: minute, hour, day of month, month, day of week (0 and 7 are Sunday).
CRON_FIELDS = (
    ("minute", 0, 59, {}),
    ("hour", 0, 23, {}),
    ("day of month", 1, 31, {}),
    (
        "month",
        1,
        12,
        {m: i + 1 for i, m in enumerate(MONTHS)},
    ),
    ("day of week", 0, 7, {d: i for i, d in enumerate(WEEKDAYS)}),
)
# ASCII only: \w and \d would let through digits such as "٣" that int() reads but Cloud Scheduler refuses.
CRON_ITEM = re.compile(r"(?P<range>\*|(?P<lo>[0-9A-Za-z]+)(?:-(?P<hi>[0-9A-Za-z]+))?)(?:/(?P<step>[0-9]+))?")


class RuleError(ValueError):
    """A value breaks a rule. The message is one line: field, value, rule."""

    def __init__(self, field: str, value: object, rule: str) -> None:
        super().__init__(f"{field}={value!r}: {rule}")
        self.field = field


def check_pattern(field: str, value: str, pattern: re.Pattern[str], rule: str) -> str:
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise RuleError(field, value, rule)
    return value


def check_project_name(value: str) -> str:
    # It is rendered inside TOML strings and Terraform comments, where a control character breaks the file.
    if (
        not isinstance(value, str)
        or not value.strip()
        or any(unicodedata.category(c) in ("Cc", "Cs", "Zl", "Zp") for c in value)
    ):
        raise RuleError("project_name", value, "must be one line of non-blank text without control characters")
    return value


def check_slug(value: str) -> str:
    # Slugs name the directory and every cloud resource; service-account ids (6-30 chars) add a
    # suffix of up to 8 characters (-invoker), hence 20 at most. cookiecutter.json falls back to "-" when the
    # name slugifies to nothing: an empty slug would name the output directory itself, and cookiecutter
    # would stop with "directory already exists" before this rule could explain.
    return check_pattern(
        "project_slug",
        value,
        SLUG,
        "must be 3-20 chars of lowercase letters, digits and hyphens, start with a letter, end with a letter or digit",
    )


def check_project_id(value: str) -> str:
    return check_pattern(
        "gcp_project_id",
        value,
        PROJECT_ID,
        "a GCP project id is 6-30 chars of lowercase letters, digits and hyphens, "
        "starts with a letter and does not end with a hyphen",
    )


def check_region(value: str) -> str:
    return check_pattern("region", value, REGION, "must be a GCP region such as europe-west1 or us-central1")


def check_target(value: str) -> str:
    if value not in TARGETS:
        raise RuleError("target", value, f"must be one of {', '.join(TARGETS)}")
    return value


def check_collection(value: str) -> str:
    return check_pattern(
        "firestore_collection",
        value,
        COLLECTION_ID,
        "must be 1-100 chars of letters, digits, '_' or '-', and not __like_this__ (reserved by Firestore)",
    )


def check_database(value: str) -> str:
    return check_pattern(
        "firestore_database",
        value,
        DATABASE_ID,
        "must be (default) or 4-63 chars of lowercase letters, digits and hyphens, starting with a letter",
    )


def parse_seconds(field: str, value: object, low: int = 0, high: int | None = None) -> int:
    """A whole number of seconds within [low, high]; cookiecutter hands numbers over as text."""
    text = str(value)  # no strip(): the templates render the value as given
    if not re.fullmatch(r"[0-9]+", text):
        raise RuleError(field, value, "must be a whole number")
    number = int(text)
    if number < low or (high is not None and number > high):
        bounds = f"{low}-{high}" if high is not None else f"at least {low}"
        raise RuleError(field, value, f"must be {bounds}")
    return number


def _cron_value(token: str, name: str, low: int, high: int, names: Mapping[str, int]) -> int:
    number = int(token) if token.isdigit() else names.get(token.lower())
    if number is None or not low <= number <= high:
        raise ValueError(f"{name} value {token!r} is outside {low}-{high}")
    return number


def check_cron_field(text: str, name: str, low: int, high: int, names: Mapping[str, int]) -> None:
    """One cron field: a comma list of '*', 'n', 'a-b', each optionally '/step'."""
    for item in text.split(","):
        match = CRON_ITEM.fullmatch(item)
        if not match:
            raise ValueError(f"{name} item {item!r} is not a number, range, list or step")
        if match["lo"] is not None:
            start = _cron_value(match["lo"], name, low, high, names)
            if match["hi"] is not None and _cron_value(match["hi"], name, low, high, names) < start:
                raise ValueError(f"{name} range {item!r} runs backwards")
        if match["step"] is not None and int(match["step"]) == 0:
            raise ValueError(f"{name} step in {item!r} is 0")


GROC_REFUSED = (
    "groc forms such as 'every 5 minutes' are refused because Cloud Scheduler only guarantees "
    "the X-CloudScheduler-ScheduleTime header for unix-cron"
)


def check_schedule(job_id: str, schedule: str) -> str:
    """Five-field unix-cron only: Cloud Scheduler guarantees X-CloudScheduler-ScheduleTime for it alone."""
    field = f"jobs.{job_id}.schedule"
    if not isinstance(schedule, str):
        raise RuleError(field, schedule, "must be a 5-field unix-cron string")
    # Fields split on ASCII white space only, as Terraform's RE2 `\S+` does (variables.tf): a no-break
    # space stays inside a field and is refused there, by both.
    parts = re.findall(r"[^\t\n\f\r ]+", schedule)
    if len(parts) != 5:
        raise RuleError(field, schedule, f"must be 5-field unix-cron such as '0 3 * * *'; {GROC_REFUSED}")
    for part, (name, low, high, names) in zip(parts, CRON_FIELDS, strict=True):
        try:
            check_cron_field(part, name, low, high, names)
        except ValueError as error:
            # Some groc forms have five words ("1st monday of sep 17:00"): say why groc is refused there too.
            raise RuleError(field, schedule, f"not valid unix-cron: {error}; {GROC_REFUSED}") from None
    return schedule


def check_time_zone(job_id: str, time_zone: str) -> str:
    field = f"jobs.{job_id}.time_zone"
    # The list, not ZoneInfo(): ZoneInfo("Europe") raises IsADirectoryError and ZoneInfo("posix/Europe/Madrid")
    # loads, yet neither is a zone Cloud Scheduler knows. "localtime" is the machine's alias, not an IANA name.
    if not isinstance(time_zone, str) or time_zone not in iana_time_zones():
        raise RuleError(field, time_zone, "must be an IANA time zone such as Etc/UTC or Europe/Madrid")
    return time_zone


@functools.cache
def iana_time_zones() -> frozenset[str]:
    return frozenset(zoneinfo.available_timezones() - {"localtime"})


def check_jobs(jobs: object) -> dict[str, dict[str, str]]:
    if not isinstance(jobs, Mapping) or not jobs:
        raise RuleError("jobs", jobs, 'must be a non-empty JSON object {"job-id": {"schedule": ..., "time_zone": ...}}')
    checked = {}
    for job_id, job in jobs.items():
        check_pattern(
            "jobs",
            job_id,
            JOB_ID,
            "each job id must be 1-40 chars of lowercase letters, digits and hyphens, starting with a letter or digit",
        )
        if not isinstance(job, Mapping) or not {"schedule", "time_zone"} <= set(job) <= JOB_KEYS:
            raise RuleError(
                f"jobs.{job_id}",
                job,
                'must be {"schedule": ..., "time_zone": ...} and nothing else but an optional "max_lateness_seconds"',
            )
        checked[job_id] = {
            "schedule": check_schedule(job_id, job["schedule"]),
            "time_zone": check_time_zone(job_id, job["time_zone"]),
        }
        if "max_lateness_seconds" in job:
            checked[job_id]["max_lateness_seconds"] = check_max_lateness(job_id, job["max_lateness_seconds"])
    return checked


JOB_KEYS = {"schedule", "time_zone", "max_lateness_seconds"}


def check_max_lateness(job_id: str, value: object) -> int:
    """A delivery later than this after its schedule time is recorded skipped and never runs the work.

    A whole number of seconds, at least 60: Scheduler's own deliveries come seconds late, and a limit
    below a minute would skip runs that came on time. cookiecutter hands nested numbers over as text.
    Also in Terraform: a validation of var.jobs in terraform/modules/scheduled-dedup/variables.tf.
    """
    field = f"jobs.{job_id}.max_lateness_seconds"
    try:
        return parse_seconds(field, value, MIN_MAX_LATENESS_SECONDS)
    except RuleError:
        rule = f"must be a whole number of seconds, at least {MIN_MAX_LATENESS_SECONDS} (omit it for no limit)"
        raise RuleError(field, value, rule) from None


MIN_MAX_LATENESS_SECONDS = 60

# The audit job's cadence: minutes that divide an hour or a day evenly, so that a cron says it exactly;
# at most 12 h, so that it fits in the one-day lookback with the settle time.
# Also in Terraform (var.audit's validation; local.audit_schedule turns it into the cron).
AUDIT_INTERVALS_MINUTES = (5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720)
# Also in the baked audit.py (AUDIT_LOOKBACK): how far back each audit run looks, never beyond the retention.
AUDIT_LOOKBACK_SECONDS = 86400


def check_audit_interval(values: Mapping[str, object], timing: Mapping[str, int]) -> int:
    """The audit runs every `audit_interval_minutes`; each looks back min(1 day, retention).

    A run is judged once lease + retry window (settle) has passed since its schedule time, so every
    run is seen by at least one audit only if interval + settle fits in the lookback.
    Also in Terraform: a validation of var.audit in terraform/modules/scheduled-dedup/variables.tf.
    """
    field = "audit_interval_minutes"
    minutes = parse_seconds(field, values[field], 1)
    if minutes not in AUDIT_INTERVALS_MINUTES:
        raise RuleError(field, values[field], f"must be one of {', '.join(map(str, AUDIT_INTERVALS_MINUTES))}")
    settle = timing["lease_seconds"] + retry_window_seconds(
        timing["attempt_deadline_seconds"],
        timing["retry_count"],
        timing["max_backoff_seconds"],
        timing["max_retry_duration_seconds"],
    )
    lookback = min(AUDIT_LOOKBACK_SECONDS, timing["retention_seconds"])
    if minutes * 60 + settle > lookback:
        raise RuleError(
            field,
            values[field],
            f"the interval ({minutes * 60} s) + lease + retry window ({settle} s) must fit in the audit's lookback "
            f"(min(1 day, retention_seconds) = {lookback} s), or a run could go missing between two audits",
        )
    return minutes


def retry_window_seconds(attempt_deadline: int, retry_count: int, max_backoff: int, max_retry_duration: int) -> int:
    """The longest time from a run's first attempt to the end of its last one.

    Conservative: every wait counts as max_backoff. Cloud Scheduler keeps retrying until both
    retry_count and max_retry_duration are reached, so the longer of the two bounds wins.
    Also in Terraform: locals.retry_window_seconds.
    """
    by_count = (retry_count + 1) * attempt_deadline + retry_count * max_backoff
    by_duration = max_retry_duration + max_backoff + attempt_deadline if max_retry_duration else 0
    return max(by_count, by_duration)


def retry_intervals_seconds(retry_count: int, min_backoff: int, max_backoff: int, max_doublings: int) -> list[int]:
    """Cloud Scheduler's waits before each of its `retry_count` retries (RetryConfig.max_doublings).

    The wait starts at min_backoff, doubles max_doublings times, then grows linearly by
    min_backoff * 2**max_doublings, never beyond max_backoff: for 10 s / 300 s / 3 doublings,
    10, 20, 40, 80, 160, 240, 300, 300 ... The baked tools/live_server.py (RetryPolicy.delays)
    models the same shape for the fault tests; tests/test_rules.py checks that the two agree.
    Also in Terraform, spelled out in a validation of var.timing in terraform/modules/scheduled-dedup/variables.tf.
    """
    waits = []
    for retry in range(retry_count):
        if retry <= max_doublings:
            wait = min_backoff * 2**retry
        else:
            wait = min_backoff * 2**max_doublings * (retry - max_doublings + 1)
        waits.append(min(wait, max_backoff))
    return waits


def check_timing(values: Mapping[str, object]) -> dict[str, int]:
    """Deadline <= timeout <= lease - margin; retries reach past the lease; retention covers lease + retry window."""
    deadline = parse_seconds("attempt_deadline_seconds", values["attempt_deadline_seconds"], *ATTEMPT_DEADLINE_RANGE)
    timeout = parse_seconds(
        "function_timeout_seconds", values["function_timeout_seconds"], 1, MAX_FUNCTION_TIMEOUT_SECONDS
    )
    if timeout < deadline:
        raise RuleError(
            "function_timeout_seconds",
            values["function_timeout_seconds"],
            f"must be at least attempt_deadline_seconds ({deadline}), "
            "or Scheduler gives up on runs the function still finishes",
        )
    lease = parse_seconds("lease_seconds", values["lease_seconds"], 1)
    if lease < timeout + LEASE_MARGIN_SECONDS:
        raise RuleError(
            "lease_seconds",
            values["lease_seconds"],
            f"must be at least function_timeout_seconds + {LEASE_MARGIN_SECONDS} ({timeout + LEASE_MARGIN_SECONDS}), "
            "or a retry takes over a run that is still going",
        )
    retry_count = parse_seconds("retry_count", values["retry_count"], 0, MAX_RETRY_COUNT)
    min_backoff = parse_seconds("min_backoff_seconds", values["min_backoff_seconds"], 0, MAX_BACKOFF_SECONDS)
    max_backoff = parse_seconds("max_backoff_seconds", values["max_backoff_seconds"], 0, MAX_BACKOFF_SECONDS)
    if max_backoff < min_backoff:
        raise RuleError(
            "max_backoff_seconds",
            values["max_backoff_seconds"],
            f"must be at least min_backoff_seconds ({min_backoff})",
        )
    max_doublings = parse_seconds("max_doublings", values["max_doublings"], 0, 16)
    max_retry_duration = parse_seconds("max_retry_duration_seconds", values["max_retry_duration_seconds"], 0)
    # With retries, the last one must come after the lease ends: a run whose instance crashed right after
    # its claim is then taken over by a retry, instead of meeting 409 until Scheduler gives up (at-most-once).
    # retry_count = 0 is exempt: no retry can recover a crash, an operator re-runs the run.
    # Also in Terraform: a validation of var.timing in terraform/modules/scheduled-dedup/variables.tf
    # (it reads var.retry; the reverse would be a cycle), with the same one-line message.
    waits = retry_intervals_seconds(retry_count, min_backoff, max_backoff, max_doublings)
    if waits and sum(waits) <= lease:
        raise RuleError(
            "retry_count",
            values["retry_count"],
            f"the retries ({'+'.join(map(str, waits))} = {sum(waits)} s) end before the lease ({lease} s) expires, "
            "so a run whose instance crashed is never retried; "
            "raise retry_count or min_backoff_seconds, or shorten lease_seconds",
        )
    window = retry_window_seconds(deadline, retry_count, max_backoff, max_retry_duration)
    retention = parse_seconds("retention_seconds", values["retention_seconds"], 1)
    if retention < lease + window:
        raise RuleError(
            "retention_seconds",
            values["retention_seconds"],
            f"must be at least lease_seconds + the retry window ({lease} + {window} = {lease + window}), "
            "or a late retry finds no record and runs again",
        )
    return {
        "attempt_deadline_seconds": deadline,
        "function_timeout_seconds": timeout,
        "lease_seconds": lease,
        "retry_count": retry_count,
        "min_backoff_seconds": min_backoff,
        "max_backoff_seconds": max_backoff,
        "max_doublings": max_doublings,
        "max_retry_duration_seconds": max_retry_duration,
        "retention_seconds": retention,
    }


def validate(context: Mapping[str, object]) -> dict[str, object]:
    """All rules, in prompt order; the first broken one raises. Returns the normalised answers."""
    checked: dict[str, object] = {
        "project_name": check_project_name(context["project_name"]),
        "project_slug": check_slug(context["project_slug"]),
        "gcp_project_id": check_project_id(context["gcp_project_id"]),
        "region": check_region(context["region"]),
        "target": check_target(context["target"]),
        "jobs": check_jobs(context["jobs"]),
    }
    checked.update(check_timing(context))
    checked["audit_interval_minutes"] = check_audit_interval(context, checked)
    checked["firestore_database"] = check_database(context["firestore_database"])
    checked["firestore_collection"] = check_collection(context["firestore_collection"])
    return checked
