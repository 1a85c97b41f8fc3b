"""config.yaml, the one file you edit to add, change or remove a job, read once per process into Config, checked by
rules.py; the deploy-time schedule rules too by `python config.py`, which `make deploy` runs before Terraform.

    python config.py [FILE]     check FILE (default: config.yaml), print each job's numbers; exit 1 with one line
"""

from __future__ import annotations

import ast
import dataclasses
import datetime as dt
import functools
import os
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType

import yaml

import rules
import schedules
from outcomes import Misconfigured

CONFIG_FILE = Path(__file__).with_name("config.yaml")


class ConfigError(Misconfigured):
    """config.yaml cannot be used (one line: file, key, value, rule); a delivery is answered `misconfigured`."""


# A "Force run" sends the next scheduled time, up to a schedule period ahead; anything further out is refused.
MAX_FUTURE = dt.timedelta(days=32)
# A run's work is killed this long before its attempt deadline (stop.py), so that the release (one Firestore write,
# RPC_TIMEOUT_SECONDS at most) and the answer reach Scheduler in time. Below rules' least deadline (15 s).
RELEASE_MARGIN = dt.timedelta(seconds=10)


@dataclasses.dataclass(frozen=True)
class Job:
    """One job of config.yaml (or the audit job), its numbers resolved: its own, else `defaults:`."""

    job_id: str  # as written in config.yaml (`nightly`); Scheduler sends "<slug>-<job id>"
    schedule: str
    time_zone: str
    attempt_deadline: dt.timedelta  # how long Scheduler, and the queue for a task of the job, waits for an answer
    lease: dt.timedelta
    retry_window: dt.timedelta  # from the first attempt to the end of the last one (rules.job_retry_window_seconds)
    max_execution: dt.timedelta  # proxy targets: how long a run may stay `started` before it is `overdue`
    max_lateness: dt.timedelta | None = None  # None: a delivery may come any time after its schedule time
    paused: bool = False  # paused in Scheduler too (terraform): the audit reports its fire times `paused`
    catch_up: bool = False  # the audit delivers a missing run itself (Cloud Tasks) while within max_lateness
    overlap: str = "skip"  # proxy targets: what a new run does while the job's previous execution still runs
    dst_gap: str = schedules.END_OF_GAP  # a wall-clock time the clocks skip: run at the gap's end, or skip
    timing: Mapping[str, int] = dataclasses.field(default_factory=dict)  # seconds, as Scheduler takes them

    @property
    def fire_rule(self) -> schedules.Schedule:
        return schedules.Schedule(self.schedule, self.time_zone, self.dst_gap)

    @property
    def settle(self) -> dt.timedelta:
        return self.lease + self.retry_window  # rules.settle_seconds


@dataclasses.dataclass(frozen=True)
class Config:
    """config.yaml, checked and resolved (`current`)."""

    slug: str
    project: str
    location: str  # config.yaml's region
    target: str  # rules.TARGETS: the function runs the work itself, or starts an execution and follows it
    database: str
    collection: str
    retention: dt.timedelta
    audit_interval_minutes: int
    jobs: Mapping[str, Job]  # by Scheduler job name, "<slug>-<job id>" (scheduler_job_name)
    audit: Job  # the audit job: its cron (Etc/UTC) and the defaults' numbers, which a job that sets none takes
    defaults: Mapping[str, int]  # the defaults block's numbers as Scheduler and Terraform take them
    serve: tuple[tuple[str, str], ...] = ()  # (project, location) a run may be keyed for; empty: the function's own
    tasks_queue: str | None = None  # re-runs, backfills, catch-ups (terraform/modules/scheduled-dedup/tasks.tf)
    max_future: dt.timedelta = MAX_FUTURE
    warnings: tuple[str, ...] = ()
    # The `function:` block, else the module's defaults (Terraform's root passes the block as written).
    function: Mapping[str, int | str] = dataclasses.field(
        default_factory=lambda: MappingProxyType(rules.FUNCTION_DEFAULTS)
    )
    herd: object = None  # with the schedule rules: their Herd, the most runs in flight at once
    source: Mapping[str, object] = dataclasses.field(default_factory=dict, repr=False, compare=False)  # as read

    def scheduler_job_name(self, job_id: str) -> str:
        """As terraform/modules/scheduled-dedup/scheduler.tf names it."""
        return f"{self.slug}-{job_id}"

    @property
    def audit_job(self) -> str:
        """The audit's Scheduler job: '_' is no job id's character (rules.JOB_ID), so no job's name takes it."""
        return f"{self.slug}_audit"

    audit_schedule = property(lambda self: self.audit.schedule)
    lease = property(lambda self: self.audit.lease)
    retry_window = property(lambda self: self.audit.retry_window)
    attempt_deadline = property(lambda self: self.audit.attempt_deadline)
    settle = property(lambda self: self.audit.settle)
    served = property(lambda self: self.serve or ((self.project, self.location),))

    def spec_of(self, job_name: str) -> Job | None:
        """The job a delivery names: one of config.yaml's, the audit job, or None (a job none lists)."""
        return self.audit if job_name == self.audit_job and job_name not in self.jobs else self.jobs.get(job_name)

    def _of(self, job_name: str) -> Job:
        """The job, else the audit's (the defaults' numbers)."""
        return self.jobs.get(job_name, self.audit)

    def lease_for(self, job_name: str) -> dt.timedelta:
        return self._of(job_name).lease

    def settle_for(self, job_name: str) -> dt.timedelta:
        return self._of(job_name).settle

    def attempt_deadline_for(self, job_name: str) -> dt.timedelta:
        return self._of(job_name).attempt_deadline

    def max_execution_for(self, job_name: str) -> dt.timedelta:
        return self._of(job_name).max_execution

    def stop_after(self, job_name: str) -> dt.timedelta:
        """How long after a delivery arrives its work is stopped (stop.py). The one place that says it."""
        return self.attempt_deadline_for(job_name) - RELEASE_MARGIN

    def job_id(self, job_name: str) -> str | None:
        job = self.jobs.get(job_name)
        return job.job_id if job else None

    # Where a Cloud Run job target's tasks write the items that failed for good (its store module).
    dead_letters_collection = property(lambda self: f"{self.collection}_job_dead_letters")
    # The database's resource name, as Firestore spells it in its own errors.
    database_name = property(lambda self: f"projects/{self.project}/databases/{self.database}")

    def with_jobs(self, jobs: Mapping[str, Mapping[str, object]]) -> Config:
        """With these jobs (by Scheduler job name; `job_id`, else the name) in place of config.yaml's, as at load."""
        ids = {name: job.get("job_id", name) for name, job in jobs.items()}
        raw = {ids[name]: {key: value for key, value in job.items() if key != "job_id"} for name, job in jobs.items()}
        resolved = from_raw({**self.source, "jobs": raw}).jobs
        by_id = {job.job_id: job for job in resolved.values()}
        return dataclasses.replace(self, jobs=MappingProxyType({name: by_id[ids[name]] for name in jobs}))

    def everywhere(self, **numbers: dt.timedelta) -> Config:
        """With `numbers` (attempt_deadline, lease...) for every job and the audit."""
        jobs = {name: dataclasses.replace(job, **numbers) for name, job in self.jobs.items()}
        return dataclasses.replace(self, jobs=MappingProxyType(jobs), audit=dataclasses.replace(self.audit, **numbers))


# Plain scalars YAML 1.1 (PyYAML) and YAML 1.2 (Terraform's yamldecode) read differently, refused so that the function
# and Terraform never run by two numbers: (PyYAML's tag, the text's shape, the rule).
TWO_READINGS = (
    ("int", re.compile(r"[-+]?0[0-9]+"), "a leading zero is octal to YAML 1.1, decimal to YAML 1.2: drop it"),
    ("int|float", re.compile(r".*_.*"), "a number to YAML 1.1, text to YAML 1.2: write it without '_'"),
    ("int|float", re.compile(r".*:.*"), "sexagesimal to YAML 1.1 (5:00 is 300), text to YAML 1.2"),
    ("int", re.compile(r"[-+]?0b.*|[-+]0x.*"), "0b and signed 0x: numbers to YAML 1.1, text to YAML 1.2"),
    ("str", re.compile(r"[-+]?(0o[0-7]+|[0-9.]+[eE][-+]?[0-9]+)"), "0o17, 1e3: numbers to YAML 1.2, text to YAML 1.1"),
    ("bool|str", re.compile(r"(?i:yes|no|on|off|y|n)"), "booleans to one reader at least: write true or false"),
    ("timestamp", re.compile(r".*"), "a date to YAML 1.1, text to YAML 1.2: quote it"),
    ("float", re.compile(r"[-+]?\.(?i:inf|nan)"), "not a number the function can compute with"),
)


def one_reading(node: yaml.Node, path: str = "") -> None:
    """Every plain scalar of `node` (keys too) means the same to both readers, or ConfigError."""
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            one_reading(key, path)
            one_reading(value, f"{path}{key.value}." if isinstance(key, yaml.ScalarNode) else path)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            one_reading(item, f"{path}{index}.")
    elif isinstance(node, yaml.ScalarNode) and node.style is None:
        tag = node.tag.rsplit(":", 1)[-1]
        for tags, shape, rule in TWO_READINGS:
            if tag in tags.split("|") and shape.fullmatch(node.value):
                raise ConfigError(f"{path.rstrip('.') or node.value}={node.value!r}: {rule}")


def parse(text: str, name: str = "config.yaml", schedules: bool = False) -> Config:
    try:
        raw = yaml.safe_load(text)
        one_reading(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise ConfigError(f"{name}: is not YAML ({' '.join(str(error).split())})") from None
    except ConfigError as error:
        raise ConfigError(f"{name}: {error}") from None
    return from_raw(raw, name, schedules)


def from_raw(raw: object, name: str = "config.yaml", schedules: bool = False) -> Config:
    try:
        checked = rules.check_config(raw, schedules=schedules)
    except rules.RuleError as error:
        raise ConfigError(f"{name}: {error}") from None
    retention, minutes = checked["retention_seconds"], checked["audit_interval_minutes"]
    jobs = {
        f"{checked['slug']}-{job_id}": _job(job_id, job["schedule"], job["time_zone"], job["timing"], job, retention)
        for job_id, job in checked["jobs"].items()
    }
    own = ((checked["project"], checked["region"]),)
    serve = tuple((entry["project"], entry["location"]) for entry in checked["serve"])
    audit_job = f"{checked['slug']}_audit"  # Config.audit_job
    audit = _job(audit_job, rules.audit_cron(minutes), rules.AUDIT_TIME_ZONE, checked["defaults"], {}, retention)
    return Config(
        slug=checked["slug"],
        project=checked["project"],
        location=checked["region"],
        target=checked["target"],
        database=checked["database"],
        collection=checked["collection"],
        retention=dt.timedelta(seconds=retention),
        audit_interval_minutes=minutes,
        jobs=MappingProxyType(jobs),
        audit=audit,
        defaults=MappingProxyType(checked["defaults"]),
        serve=serve if serve != own else (),  # the default, left out: an overridden project stays the one served
        tasks_queue=f"projects/{checked['project']}/locations/{checked['region']}/queues/{checked['slug']}-deliveries",
        warnings=tuple(checked["warnings"]),
        function=MappingProxyType(checked["function"]),
        herd=checked.get("herd"),
        source=MappingProxyType(dict(raw)),
    )


def _job(
    job_id: str, schedule: str, zone: str, timing: Mapping[str, int], job: Mapping[str, object], retention: int
) -> Job:
    given = job.get("max_execution_seconds")  # the audit's: rules' default for the retention
    execution = given if given is not None else rules.max_execution_seconds(job_id, None, retention)
    lateness = job.get("max_lateness_seconds")
    return Job(
        job_id=job_id,
        schedule=schedule,
        time_zone=zone,
        attempt_deadline=dt.timedelta(seconds=timing["attempt_deadline_seconds"]),
        lease=dt.timedelta(seconds=timing["lease_seconds"]),
        retry_window=dt.timedelta(seconds=rules.job_retry_window_seconds(timing)),
        max_execution=dt.timedelta(seconds=execution),
        max_lateness=dt.timedelta(seconds=lateness) if lateness is not None else None,
        timing=MappingProxyType(timing),
        **{key: job[key] for key in rules.JOB_CHOICES if key in job},
    )


USED: Config | None = None  # what the process runs by in place of the file (use): a test's
FILE_VARIABLE = "CONFIG_YAML"  # a file in place of CONFIG_FILE (a test's server, a local run)


def current() -> Config:
    """use()'s configuration, else the file CONFIG_YAML names, else config.yaml; or ConfigError."""
    if USED is not None:
        return USED
    named = os.environ.get(FILE_VARIABLE)
    return load(Path(named) if named else None)


def use(config: Config | None) -> Config | None:
    """Run this process by `config` (None: by the file); the previous one."""
    global USED
    previous, USED = USED, config
    return previous


def load(path: Path | None = None, schedules: bool = False) -> Config:
    """Read and checked once per process and path (default: CONFIG_FILE)."""
    return _load(path or CONFIG_FILE, schedules)


@functools.cache
def _load(path: Path, schedules: bool) -> Config:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as error:
        raise ConfigError(f"{path.name}: cannot be read ({error.strerror or error})") from None
    return parse(text, path.name, schedules)


def undeployed(root: Path = CONFIG_FILE.parent, module: str = "main") -> list[str]:
    """The project's packages `module` imports (followed): the function's source is the root's *.py, config.yaml and
    requirements.txt (terraform/main.tf, `source_files`), so a directory is left out."""
    seen, missing, todo = set(), [], [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if (root / name).is_dir():  # a package: the deployed function would fail at import
            missing.append(name)
        elif (root / f"{name}.py").is_file():
            for node in ast.walk(ast.parse((root / f"{name}.py").read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    todo += [alias.name.split(".")[0] for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    todo.append(node.module.split(".")[0])
    return sorted(missing)


def main(argv: list[str]) -> int:
    try:
        config = load(Path(argv[0]) if argv else None, schedules=True)
        for name in undeployed():
            source = "every *.py of the project's root, config.yaml and requirements.txt (terraform/main.tf)"
            rule = f"the function's source is {source}: the deployed function would fail at import; make it {name}.py"
            raise ConfigError(f"main.py imports {name}, a directory: {rule}")
    except ConfigError as error:
        print(f"ERROR: {error}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as error:  # the schedule rules are the tools package's, a pin of requirements-dev.txt
        if error.name != rules.TOOLS:
            raise
        fix = "`make venv` (pip install -r requirements-dev.txt)"
        print(f"ERROR: {rules.TOOLS} is not installed: {fix}", file=sys.stderr)
        return 1
    for warning in config.warnings:
        print(f"WARNING: {warning}", file=sys.stderr)
    instances, concurrency = config.function.values()
    print(
        f"capacity: {instances} instances x concurrency {concurrency} = {instances * concurrency} runs at once; "
        f"the busiest minute, {config.herd.where()}, has {config.herd.runs} in flight"
    )
    for job in config.jobs.values():
        numbers = ", ".join(f"{key} {value}" for key, value in job.timing.items() if key != "function_timeout_seconds")
        print(f"{config.scheduler_job_name(job.job_id)}: {job.schedule!r} in {job.time_zone}; {numbers}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
