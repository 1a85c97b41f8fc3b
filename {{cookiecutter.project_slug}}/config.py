"""The project's schedule configuration: config.yaml, the one file you edit to add, change or remove a job.

Read once per process (`load` is cached): the function, the tools and the tests read it here, Terraform's root
with yamldecode. Checked by rules.py (the same rules the bake ran): shape and timing at every load, and the
schedule rules (each job's smallest gap against how long one fault keeps a run busy) by `python config.py`,
which `make deploy` runs before Terraform and tests/test_config.py runs with the suite.

    python config.py [FILE]     check FILE (default: config.yaml), print each job's numbers; exit 1 with one line
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import yaml

import rules

CONFIG_FILE = Path(__file__).with_name("config.yaml")


class ConfigError(ValueError):
    """config.yaml cannot be used; the message is one line naming the file, the key, the value and the rule."""


@dataclasses.dataclass(frozen=True)
class Job:
    """One job of config.yaml, its numbers resolved (its own, else `defaults:`, its lease from its deadline)."""

    job_id: str
    schedule: str
    time_zone: str
    timing: Mapping[str, int]
    max_lateness_seconds: int | None = None
    paused: bool = False
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)  # issue 18's per-job choices, as written

    @property
    def retry_window_seconds(self) -> int:
        """The longest time from the run's first delivery to the end of its last retry (rules.retry_window_seconds)."""
        t = self.timing
        return rules.retry_window_seconds(
            t["attempt_deadline_seconds"], t["retry_count"], t["max_backoff_seconds"], t["max_retry_duration_seconds"]
        )


@dataclasses.dataclass(frozen=True)
class Config:
    slug: str
    project: str
    region: str
    database: str
    collection: str
    retention_seconds: int
    audit_interval_minutes: int
    serve: tuple[tuple[str, str], ...]  # (project, location) pairs the function takes deliveries for
    defaults: Mapping[str, int]  # the audit job's numbers, and every job's where it says nothing
    jobs: Mapping[str, Job]  # by job id
    warnings: tuple[str, ...] = ()

    def scheduler_job_name(self, job_id: str) -> str:
        """The Cloud Scheduler job of a job id (terraform/modules/scheduled-dedup/scheduler.tf)."""
        return f"{self.slug}-{job_id}"

    @property
    def task_queue(self) -> str:
        """The deliveries queue of re-runs, backfills and catch-ups (terraform/modules/scheduled-dedup/tasks.tf)."""
        return f"projects/{self.project}/locations/{self.region}/queues/{self.slug}-deliveries"

    @property
    def audit_job_name(self) -> str:
        """The audit's Scheduler job: '_' is no job id's character (rules.JOB_ID), so no job's name takes it."""
        return f"{self.slug}_audit"


def parse(text: str, name: str = "config.yaml", schedules: bool = False) -> Config:
    """The file's text, checked (with the schedule rules when `schedules`), or ConfigError."""
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise ConfigError(f"{name}: is not YAML ({' '.join(str(error).split())})") from None
    try:
        checked = rules.check_config(raw, schedules=schedules)
    except rules.RuleError as error:
        raise ConfigError(f"{name}: {error}") from None
    jobs = {
        job_id: Job(
            job_id=job_id,
            schedule=job["schedule"],
            time_zone=job["time_zone"],
            timing=MappingProxyType(job["timing"]),
            max_lateness_seconds=job.get("max_lateness_seconds"),
            paused=bool(job.get("paused", False)),
            options=MappingProxyType({key: job[key] for key in rules.JOB_CHOICES if key in job}),
        )
        for job_id, job in checked["jobs"].items()
    }
    return Config(
        slug=checked["slug"],
        project=checked["project"],
        region=checked["region"],
        database=checked["database"],
        collection=checked["collection"],
        retention_seconds=checked["retention_seconds"],
        audit_interval_minutes=checked["audit_interval_minutes"],
        serve=tuple((entry["project"], entry["location"]) for entry in checked["serve"]),
        defaults=MappingProxyType(checked["defaults"]),
        jobs=MappingProxyType(jobs),
        warnings=tuple(checked["warnings"]),
    )


def load(path: Path | None = None, schedules: bool = False) -> Config:
    """The configuration (CONFIG_FILE unless `path`), read and checked once per process and path."""
    return _load(path or CONFIG_FILE, schedules)


@functools.cache
def _load(path: Path, schedules: bool) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path.name}: cannot be read ({error.strerror or error})") from None
    return parse(text, path.name, schedules)


# ---------------------------------------------------------------- the bake's first version of the file

HEADER = """\
# The schedule configuration of this project: the only place its jobs and their timing live.
# The function reads it from its source, Terraform's root with yamldecode, the tools and the tests with config.py.
# Change it, then `python config.py` (or `make deploy`, which runs it first) checks it with the rules of rules.py.
# Adding or removing a job: here, and its work in job.py's WORK (tests/test_config.py fails when they disagree).
"""

TIMING_COMMENT = """\
# Timing, in seconds, for every job that does not set its own (any of these keys may sit under a job):
#   attempt_deadline_seconds  how long Scheduler waits for an answer (15-1800); the work is stopped then,
#                             and the function's timeout is the largest deadline of all jobs
#   lease_seconds             how long a claimed run stays locked (default: the job's deadline + 60)
#   retry_count, min_backoff_seconds, max_backoff_seconds, max_doublings, max_retry_duration_seconds:
#                             Cloud Scheduler's retry_config, given to Terraform as written
"""

JOBS_COMMENT = """\
# job id => schedule (5-field unix-cron), time_zone (IANA, default Etc/UTC), optional timing keys as above,
# max_lateness_seconds (a later delivery is recorded skipped and does not run the work), paused (true/false).
# Each job is the Cloud Scheduler job "<slug>-<job id>".
"""


def _scalar(value: object) -> str:
    """A YAML scalar: JSON's spelling of strings, numbers and booleans is YAML too."""
    return json.dumps(value)


def _number(value: object) -> object:
    """cookiecutter hands numbers over as text (rules.config_from_answers keeps them so): write them as numbers."""
    return int(value) if isinstance(value, str) and re.fullmatch(r"[0-9]+", value) else value


def render(config: Mapping[str, object]) -> str:
    """The text of config.yaml for a checked config (rules.config_from_answers), with its comments."""
    lines = [HEADER]
    for key in ("slug", "project", "region", "database", "collection", "retention_seconds"):
        lines.append(f"{key}: {_scalar(_number(config[key]))}")
    lines.append("# How often the audit checks every job's expected runs against the records (minutes).")
    lines.append(f"audit_interval_minutes: {_scalar(_number(config['audit_interval_minutes']))}")
    lines.append("# The (project, location) pairs whose deliveries the function takes; default: only its own.")
    own = f"project: {_scalar(config['project'])}, location: {_scalar(config['region'])}"
    lines.append("# serve:\n#   - {" + own + "}")
    lines.append("")
    lines.append(TIMING_COMMENT.rstrip("\n"))
    lines.append("defaults:")
    lines.extend(f"  {key}: {_scalar(_number(value))}" for key, value in config["defaults"].items())
    lines.append("")
    lines.append(JOBS_COMMENT.rstrip("\n"))
    lines.append("jobs:")
    for job_id, job in sorted(config["jobs"].items()):
        lines.append(f"  {job_id}:")
        first = [key for key in ("schedule", "time_zone") if key in job]
        ordered = first + [key for key in job if key not in first]
        lines.extend(f"    {key}: {_scalar(_number(job[key]))}" for key in ordered)
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    try:
        config = load(Path(argv[0]) if argv else None, schedules=True)
    except ConfigError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    for warning in config.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    for job in config.jobs.values():
        numbers = ", ".join(f"{key} {value}" for key, value in job.timing.items() if key != "function_timeout_seconds")
        print(f"{config.scheduler_job_name(job.job_id)}: {job.schedule!r} in {job.time_zone}; {numbers}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
