"""The bake's answers, checked and turned into the first config.yaml: what only the hooks run. The rules a
config.yaml key must pass are the baked project's rules.py (the hooks put the template's copy on the path); here
only what the answers add: the questions config.yaml has no key for, the `jobs` answer's text, the derived numbers.
Standard library only, as rules.py: cookiecutter's interpreter runs it.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Mapping

import rules
from scheduled_dedup_tools import schedule_rules  # the template's copy of the tools package (the hooks' path)

# Also in Terraform (variable "alert_email"): the shape of an address; Monitoring checks the rest.
EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")
TARGETS = rules.TARGETS
# Team delivery (the bootstrap root and the plan/apply jobs of .github/workflows/ci.yml in the bake).
# A state bucket name follows https://cloud.google.com/storage/docs/buckets#naming, without dots (a
# dotted name must be a domain the team has verified); names starting with "goog" or containing
# "google" are refused by Cloud Storage.
STATE_BUCKET = re.compile(r"(?!goog)(?!.*google)[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
# GitHub: an owner is 1-39 letters, digits or single inner hyphens; a repository name 1-100 letters,
# digits, '.', '_' or '-', but not "." or "..". The bootstrap's Workload Identity provider trusts this one.
REPOSITORY = re.compile(r"[A-Za-z0-9](?:-?[A-Za-z0-9]){0,38}/(?!\.\.?\Z)[A-Za-z0-9._-]{1,100}")
# Workload Identity Federation maps the token's sub to google.subject, which "cannot exceed 127 bytes"
# (IAM API, WorkloadIdentityPoolProvider.attributeMapping); the deploy job's sub is the longest one.
GOOGLE_SUBJECT_MAX_BYTES = 127
DEPLOY_JOB_SUBJECT = "repo:{repository}:environment:production"

# Each question, in the prompt's order (cookiecutter.json), and its shape: a question config.yaml keeps takes the
# key's rule (rules.FIELDS), the others are here. The pattern its value must fullmatch (bool: must be a bool; "jobs":
# each job id's), and the rule a refusal states. "" also passes an OPTIONAL question.
FIELDS: dict[str, tuple[re.Pattern[str] | type, str]] = {
    # Rendered inside TOML strings and Terraform comments, where a control character (Unicode categories Cc,
    # Cs, Zl, Zp) breaks the file.
    "project_name": (
        re.compile(r"(?=.*\S)[^\x00-\x1f\x7f-\x9f\ud800-\udfff\u2028\u2029]+"),
        "must be one line of non-blank text without control characters",
    ),
    # cookiecutter.json falls back to "-" when the name slugifies to nothing: an empty slug would name the output
    # directory itself, and cookiecutter would stop with "directory already exists" before this rule could explain.
    "project_slug": rules.FIELDS["project_slug"],
    "gcp_project_id": rules.FIELDS["gcp_project_id"],
    "region": rules.FIELDS["region"],
    "target": rules.FIELDS["target"],
    "jobs": rules.FIELDS["jobs"],
    "firestore_database": rules.FIELDS["firestore_database"],
    # cookiecutter turns yes/no (and true/false) answers into a bool; anything else is a typo.
    "create_firestore_database": (bool, "must be yes or no"),
    "firestore_collection": rules.FIELDS["firestore_collection"],
    "alert_email": (EMAIL, "must be an e-mail address such as oncall@example.com, or empty"),
    # Empty: local Terraform state, as `make deploy` always had. Otherwise the gcs backend's bucket.
    "state_bucket": (
        STATE_BUCKET,
        "must be empty (local state) or a Cloud Storage bucket name: 3-63 chars of lowercase letters, digits, "
        "'-' and '_', starting and ending with a letter or digit, no dots, not starting with 'goog' "
        "nor containing 'google'",
    ),
    "repository": (
        REPOSITORY,
        "must be a GitHub repository as owner/name (owner: 1-39 letters, digits or inner single hyphens; "
        "name: 1-100 letters, digits, '.', '_' or '-', not '.' or '..')",
    ),
}
OPTIONAL = ("alert_email", "state_bucket")
# The answers that become config.yaml's defaults block ("" in cookiecutter.json: rules.derive_timing's value).
DERIVED_ANSWERS = ("lease_seconds", "min_backoff_seconds", "max_backoff_seconds")


def check_answer(field: str, value: object) -> object:
    """`value` has the shape of FIELDS[field] (a yes/no question's is a bool; "" passes an OPTIONAL one)."""
    shape, rule = FIELDS[field]
    if shape is bool:
        if not isinstance(value, bool):
            raise rules.RuleError(field, value, rule)
        return value
    if field in OPTIONAL and value == "":
        return value
    return rules.check_field(field, value, shapes=FIELDS)


def check_repository(value: str, state_bucket: str) -> str:
    """The one GitHub repository the bootstrap's Workload Identity provider trusts to plan and deploy.

    No default: a placeholder owner/name would hand deploy rights to whoever owns that name on GitHub.
    Only a bake with a state bucket has the pipeline, so only there is it required.
    """
    if value == "":
        if state_bucket:
            rule = "is required with a state_bucket: the GitHub owner/name whose workflows may plan and deploy"
            raise rules.RuleError("repository", value, rule)
        return value
    subject = DEPLOY_JOB_SUBJECT.format(repository=check_answer("repository", value))
    if len(subject.encode()) > GOOGLE_SUBJECT_MAX_BYTES:
        rule = (
            f"must be at most {GOOGLE_SUBJECT_MAX_BYTES - len(DEPLOY_JOB_SUBJECT.format(repository=''))} chars: "
            f"the deploy job's token subject {subject!r} would exceed the {GOOGLE_SUBJECT_MAX_BYTES} bytes "
            "Workload Identity Federation allows for google.subject"
        )
        raise rules.RuleError("repository", value, rule)
    return value


def parse_jobs(jobs: object) -> object:
    """The jobs answer (not config.yaml's, which YAML parses) as given: a JSON object, or its text. cookiecutter
    hands the text over unparsed (the default, `jobs='{...}'` on its command line, a typed answer); a
    `--config-file`'s default_context, `extra_context` and `cruft create --extra-context` give the parsed object.
    The default is text, not an object, because cookiecutter merges an object answer into an object default key
    by key (cookiecutter/generate.py, apply_overwrites_to_context), which would keep the default job beside the
    given ones."""
    if not isinstance(jobs, str):
        return jobs
    try:
        return json.loads(jobs)
    except ValueError as error:
        raise rules.RuleError("jobs", jobs, f"is not JSON ({error})") from None


def config_from_answers(context: Mapping[str, object]) -> dict[str, object]:
    """The first config.yaml, from the bake's answers: defaults from the timing answers, derive_timing's value
    for a derived answer left empty. The answers stay as given (cookiecutter hands numbers over as text: a
    refusal shows them so); the hook writes them into config.yaml as numbers."""
    deadline = rules.parse_seconds(
        "attempt_deadline_seconds", context["attempt_deadline_seconds"], *rules.ATTEMPT_DEADLINE_RANGE
    )
    retry_count = rules.parse_seconds("retry_count", context["retry_count"], 0, rules.MAX_RETRY_COUNT)
    given = {
        key: rules.parse_seconds(key, context.get(key, ""), 0) if context.get(key, "") != "" else None
        for key in ("lease_seconds", "min_backoff_seconds")
    }
    derived = rules.derive_timing(deadline, retry_count, given["lease_seconds"], given["min_backoff_seconds"])
    defaults: dict[str, object] = {}
    for key in rules.TIMING_KEYS:
        answer = context.get(key, "")
        if answer != "":
            defaults[key] = answer
        elif key in DERIVED_ANSWERS and key != "lease_seconds":  # the lease is derived per job, from its deadline
            defaults[key] = derived[key]
    jobs = parse_jobs(context["jobs"])
    if isinstance(jobs, Mapping):
        jobs = {job_id: with_own_waits(job_id, job, defaults) for job_id, job in jobs.items()}
    return with_function(
        {
            "slug": context["project_slug"],
            "project": context["gcp_project_id"],
            "region": context["region"],
            "target": context["target"],
            "database": context["firestore_database"],
            "collection": context["firestore_collection"],
            "retention_seconds": context["retention_seconds"],
            "audit_interval_minutes": context["audit_interval_minutes"],
            "defaults": defaults,
            "jobs": jobs,
        }
    )


def with_function(config: dict[str, object]) -> dict[str, object]:
    """The config with the `function:` block whose instances start every run of the busiest minute at once at the
    configuration's concurrency (schedule_rules.instances_for); the concurrency stays the module's default unless
    the user raises it. A config the rules refuse is left as it is, for check_config to name."""
    today = dt.date.today()
    try:
        shapes = rules.check_config(config, today, schedules=False, defaults_prefix="")
    except rules.RuleError:
        return config
    concurrency = shapes["function"]["max_instance_request_concurrency"]
    herd = schedule_rules.schedule_herd(shapes, today)
    return {**config, "function": {"max_instance_count": schedule_rules.instances_for(herd, concurrency)}}


def with_own_waits(job_id: str, job: object, defaults: Mapping[str, object]) -> object:
    """A job that sets its own deadline, and no waits, with the waits its lease implies (rules.passing_waits)
    when the defaults' end before that lease: a 30-minute job bakes with every other answer at its default.
    Anything the rules refuse is left as given, for check_config to name."""
    own = {"min_backoff_seconds", "max_backoff_seconds"}
    if not isinstance(job, Mapping) or "attempt_deadline_seconds" not in job or own & set(job):
        return job
    try:
        timing = {key: int(str(value)) for key, value in rules.resolve_job_timing(job_id, job, defaults).items()}
    except (rules.RuleError, ValueError):
        return job
    count, doublings, lease = timing["retry_count"], timing["max_doublings"], timing["lease_seconds"]
    waits = rules.retry_intervals_seconds(
        count, timing["min_backoff_seconds"], timing["max_backoff_seconds"], doublings
    )
    if not waits or sum(waits) > lease:
        return job
    return {**job, **(rules.passing_waits(count, doublings, lease) or {})}


def validate(context: Mapping[str, object]) -> dict[str, object]:
    """All rules: the answers in the prompt's order (FIELDS'), then the configuration they make; the first broken one
    raises. Returns the normalised answers, `config` (what the bake writes as config.yaml) and `warnings`."""
    checked = {}
    for field in FIELDS:
        if field == "jobs":
            checked[field] = rules.check_jobs(parse_jobs(context[field]))
        elif field == "repository":
            checked[field] = check_repository(context[field], context["state_bucket"])
        else:
            checked[field] = check_answer(field, context[field])
    config = config_from_answers(context)
    resolved = rules.check_config(config, dt.date.today(), defaults_prefix="")
    numbers = {key: resolved[key] for key in ("audit_interval_minutes", "retention_seconds")}
    return {**checked, **resolved["defaults"], **numbers, "warnings": resolved["warnings"], "config": config}
