"""The project's schedule configuration: config.yaml, the one file you edit to add, change or remove a job.

Read once per process (`load` is cached): the function, the tools and the tests read it here, Terraform's root
with yamldecode. Checked by rules.py (the same rules the bake ran): shape and timing at every load, and the
schedule rules of tools/schedule_rules.py (each job's smallest gap against how long one fault keeps a run busy;
daylight saving; the busiest minute against the function's capacity) by `python config.py`, which `make deploy`
runs before Terraform and tests/test_config.py runs with the suite.

    python config.py [FILE]     check FILE (default: config.yaml), print each job's numbers; exit 1 with one line
"""

from __future__ import annotations

import ast
import dataclasses
import functools
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
    # How long its run may stay `started` before the audit reports it overdue (rules.max_execution_seconds).
    max_execution_seconds: int = rules.DEFAULT_MAX_EXECUTION_SECONDS
    options: Mapping[str, object] = dataclasses.field(default_factory=dict)  # issue 18's per-job choices, as written


@dataclasses.dataclass(frozen=True)
class Config:
    slug: str
    project: str
    region: str
    target: str  # rules.TARGETS: the function runs the work itself, or starts an execution and follows it
    database: str
    collection: str
    retention_seconds: int
    audit_interval_minutes: int
    serve: tuple[tuple[str, str], ...]  # (project, location) pairs the function takes deliveries for
    defaults: Mapping[str, int]  # the audit job's numbers, and every job's where it says nothing
    jobs: Mapping[str, Job]  # by job id
    warnings: tuple[str, ...] = ()
    # The function's instances, concurrency and CPU (the `function:` block, else the module's defaults: Terraform's
    # root passes the block as written), and, with the schedule rules, the most runs in flight at once.
    function: Mapping[str, int | str] = dataclasses.field(
        default_factory=lambda: MappingProxyType(rules.FUNCTION_DEFAULTS)
    )
    herd: object = None  # tools/schedule_rules.py's Herd, with the schedule rules

    def scheduler_job_name(self, job_id: str) -> str:
        """The Cloud Scheduler job of a job id (terraform/modules/scheduled-dedup/scheduler.tf)."""
        return f"{self.slug}-{job_id}"

    @property
    def task_queue(self) -> str:
        """The deliveries queue of re-runs, backfills and catch-ups (terraform/modules/scheduled-dedup/tasks.tf)."""
        return f"projects/{self.project}/locations/{self.region}/queues/{self.slug}-deliveries"

    @property
    def audit_schedule(self) -> str:
        """The audit's cron, in Etc/UTC (rules.audit_cron)."""
        return rules.audit_cron(self.audit_interval_minutes)

    @property
    def audit_job_name(self) -> str:
        """The audit's Scheduler job: '_' is no job id's character (rules.JOB_ID), so no job's name takes it."""
        return f"{self.slug}_audit"


# Plain scalars that YAML 1.1 (PyYAML, here) and YAML 1.2 (Terraform's yamldecode) read differently, as each
# reader resolves them (tried on both: PyYAML's tag, else the text): refused, so the function and Terraform
# never run by two numbers. Each: (PyYAML's tag, the text's shape, the rule).
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
    """Every plain scalar of `node` (keys too) means the same to both readers, or ConfigError's one line."""
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
    """The file's text, checked (with the schedule rules when `schedules`), or ConfigError."""
    try:
        raw = yaml.safe_load(text)
        one_reading(yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.YAMLError as error:
        raise ConfigError(f"{name}: is not YAML ({' '.join(str(error).split())})") from None
    except ConfigError as error:
        raise ConfigError(f"{name}: {error}") from None
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
            max_execution_seconds=job["max_execution_seconds"],
            options=MappingProxyType({key: job[key] for key in rules.JOB_CHOICES if key in job}),
        )
        for job_id, job in checked["jobs"].items()
    }
    return Config(
        slug=checked["slug"],
        project=checked["project"],
        region=checked["region"],
        target=checked["target"],
        database=checked["database"],
        collection=checked["collection"],
        retention_seconds=checked["retention_seconds"],
        audit_interval_minutes=checked["audit_interval_minutes"],
        serve=tuple((entry["project"], entry["location"]) for entry in checked["serve"]),
        defaults=MappingProxyType(checked["defaults"]),
        jobs=MappingProxyType(jobs),
        warnings=tuple(checked["warnings"]),
        function=MappingProxyType(checked["function"]),
        herd=checked.get("herd"),
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


def undeployed(root: Path = CONFIG_FILE.parent, module: str = "main") -> list[str]:
    """The modules of the project that `module` imports, followed, which the function's source would not hold: it
    is every *.py of the project's root, config.yaml and requirements.txt (terraform/main.tf, `source_files`), so
    a package (a directory) is left out. Third-party and standard modules are neither here nor named."""
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
