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
# Team delivery (terraform/bootstrap, .github/workflows/ci.yml in the bake). A state bucket name follows
# https://cloud.google.com/storage/docs/buckets#naming, without dots (a dotted name must be a domain
# the team has verified); names starting with "goog" or containing "google" are refused by Cloud Storage.
STATE_BUCKET = re.compile(r"(?!goog)(?!.*google)[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
# GitHub: an owner is 1-39 letters, digits or single inner hyphens; a repository name 1-100 letters,
# digits, '.', '_' or '-', but not "." or "..". The bootstrap's Workload Identity provider trusts this one.
REPOSITORY = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")
# Workload Identity Federation maps the token's sub to google.subject, which "cannot exceed 127 bytes"
# (IAM API, WorkloadIdentityPoolProvider.attributeMapping); the deploy job's sub is the longest one.
GOOGLE_SUBJECT_MAX_BYTES = 127
DEPLOY_JOB_SUBJECT = "repo:{repository}:environment:production"

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


def check_state_bucket(value: str) -> str:
    """Empty: local Terraform state, as `make deploy` always had. Otherwise the gcs backend's bucket."""
    if value == "":
        return value
    return check_pattern(
        "state_bucket",
        value,
        STATE_BUCKET,
        "must be empty (local state) or a Cloud Storage bucket name: 3-63 chars of lowercase letters, digits, "
        "'-' and '_', starting and ending with a letter or digit, no dots, not starting with 'goog' "
        "nor containing 'google'",
    )


def check_repository(value: str, state_bucket: str) -> str:
    """The one GitHub repository the bootstrap's Workload Identity provider trusts to plan and deploy.

    No default: a placeholder owner/name would hand deploy rights to whoever owns that name on GitHub.
    Only a bake with a state bucket has the pipeline, so only there is it required.
    """
    if value == "" and not state_bucket:
        return value
    if value == "":
        raise RuleError(
            "repository",
            value,
            "is required with a state_bucket: the GitHub owner/name whose workflows may plan and deploy",
        )
    check_pattern(
        "repository",
        value,
        REPOSITORY,
        "must be a GitHub repository as owner/name (owner: 1-39 letters, digits or inner single hyphens; "
        "name: 1-100 letters, digits, '.', '_' or '-', not '.' or '..')",
    )
    subject = DEPLOY_JOB_SUBJECT.format(repository=value)
    if len(subject.encode()) > GOOGLE_SUBJECT_MAX_BYTES:
        raise RuleError(
            "repository",
            value,
            f"must be at most {GOOGLE_SUBJECT_MAX_BYTES - len(DEPLOY_JOB_SUBJECT.format(repository=''))} chars: "
            f"the deploy job's token subject {subject!r} would exceed the {GOOGLE_SUBJECT_MAX_BYTES} bytes "
            "Workload Identity Federation allows for google.subject",
        )
    return value


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
        if not isinstance(job, Mapping) or set(job) != {"schedule", "time_zone"}:
            raise RuleError(f"jobs.{job_id}", job, 'must be {"schedule": ..., "time_zone": ...} and nothing else')
        checked[job_id] = {
            "schedule": check_schedule(job_id, job["schedule"]),
            "time_zone": check_time_zone(job_id, job["time_zone"]),
        }
    return checked


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
    checked["firestore_database"] = check_database(context["firestore_database"])
    checked["firestore_collection"] = check_collection(context["firestore_collection"])
    checked["state_bucket"] = check_state_bucket(context["state_bucket"])
    checked["repository"] = check_repository(context["repository"], checked["state_bucket"])
    return checked
