"""What a bake costs a month on Google Cloud, from its configuration and Google's list prices.

    python benchmarks/cost.py BAKE                       # that bake's jobs (its config.yaml), line by line
    python benchmarks/cost.py BAKE --work-seconds 30     # how long one run's work takes (default 1 s)
    python benchmarks/cost.py --table                    # docs/cost.md's table (_targets/function/_parts/cost-table.md)
    python benchmarks/cost.py --table --proxy            # a proxy bake's (it also alerts on executions)

One formula (`monthly_cost`), fed by the usage the configuration implies (`usage`). Prices in USD,
Tier 1 regions, read on 2026-12-01 from the pages named in PRICES; a healthy month (every run
succeeds at its first attempt) with this project alone in its billing account (the per-account free
tiers of Scheduler, Cloud Run, Cloud Build and Artifact Registry are all its own). docs/cost-model.md
explains each line. Fire times come from the bake's schedules.py (the one cron expansion); a bake's bill reads
its configuration through its own config.py and audit.py.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import importlib
import sys
import zoneinfo
from collections.abc import Mapping
from pathlib import Path

from cronsim import CronSimError

# schedules.py is the same in the template and in every bake (tests/test_bake.py): appended, so that a bake
# given on the command line (put first on the path by `main`) supplies the modules that read its configuration.
sys.path.append(str(Path(__file__).resolve().parents[1] / "{{cookiecutter.project_slug}}"))

import schedules  # noqa: E402

DAYS = 30  # a month, for every per-month figure
MONTH_START = dt.datetime(2026, 1, 1)  # fire times are counted over DAYS from here, in each job's zone

# List prices and free tiers (USD). Each: the page it was read from on 2026-12-01.
PRICES = {
    # https://cloud.google.com/scheduler/pricing: "$0.10/job/31 days"; "Each Google billing account
    # gets 3 jobs per month free" (a paused job counts).
    "scheduler_job": 0.10,
    "scheduler_free_jobs": 3,
    # https://cloud.google.com/run/pricing, request-based billing, Tier 1 (gen2 functions are Cloud Run
    # services): $0.00002400/vCPU-second, $0.00000250/GiB-second, $0.40 per million requests; free
    # per billing account and month: 180,000 vCPU-seconds, 360,000 GiB-seconds, 2 million requests.
    "run_vcpu_second": 0.000024,
    "run_gib_second": 0.0000025,
    "run_request": 0.40 / 1e6,
    "run_free_vcpu_seconds": 180_000,
    "run_free_gib_seconds": 360_000,
    "run_free_requests": 2_000_000,
    # https://cloud.google.com/firestore/pricing (Standard edition, regional US location): $0.03 per
    # 100,000 reads, $0.09 per 100,000 writes, $0.01 per 100,000 deletes. Free a day, for the
    # (default) database only: 50,000 reads, 20,000 writes, 20,000 deletes; TTL deletes are never free.
    "firestore_read": 0.03 / 1e5,
    "firestore_write": 0.09 / 1e5,
    "firestore_delete": 0.01 / 1e5,
    "firestore_free_reads_per_day": 50_000,
    "firestore_free_writes_per_day": 20_000,
    # https://cloud.google.com/stackdriver/pricing: Logging storage $0.50/GiB, first 50 GiB per project
    # and month free.
    "logging_gib": 0.50,
    "logging_free_gib": 50,
    # https://cloud.google.com/monitoring/alerts/cost-control ("Pricing for alerting"): $1.50 per
    # condition and month, $0.35 per million time series returned; its examples evaluate every 30 s.
    "alert_condition": 1.50,
    "alert_series": 0.35 / 1e6,
    "alert_evaluations": DAYS * 86_400 / 30,
    # https://cloud.google.com/build/pricing: e2-standard-2 $0.006 per build-minute, first 2,500
    # build-minutes per billing account and month free.
    "build_minute": 0.006,
    "build_free_minutes": 2_500,
    # https://cloud.google.com/artifact-registry/pricing: Docker storage $0.10 per GB and month over 0.5 GB.
    "registry_gb": 0.10,
    "registry_free_gb": 0.5,
}

# What the module creates (terraform/modules/scheduled-dedup): one condition per alert policy, the same whatever
# the jobs, by its var.follows_executions: a function bake's 8 (4 outcomes, Scheduler attempts, missed and stuck
# runs, the audit stopping); a proxy bake's module follows executions and adds two, its failed executions
# (executions.tf) and its overdue ones (audit.tf). Checked against the module's plans (test_monitoring).
ALERT_CONDITIONS = {False: 8, True: 10}


# The vCPU a Cloud Run function gets with each memory size (MiB) when it sets none
# (https://cloud.google.com/functions/docs/configuring/memory, "Configure memory and vCPU limits"): billed by it.
VCPU_BY_MEMORY_MIB = {128: 0.083, 256: 0.167, 512: 0.333, 1024: 0.583, 2048: 1, 4096: 2, 8192: 2, 16384: 4, 32768: 8}


def vcpu_of(memory_mib: int, concurrency: int = 1) -> float:
    """The vCPU a function of `memory_mib` really gets: its memory's tier, a whole one at the least when it takes
    more than one request at a time (the module sets available_cpu "1" then: function.tf)."""
    tier = VCPU_BY_MEMORY_MIB[memory_mib]
    return max(tier, 1) if concurrency > 1 else tier


def herd_retries(runs: int, capacity: int) -> int:
    """Requests of the busiest minute that Cloud Run answers 429 (each is retried by Scheduler at least once:
    tests/herd_sim.py counts the waves): none when the capacity follows the schedule, as schedule_rules.check_capacity
    makes it (`python config.py` refuses less)."""
    return max(0, runs - capacity)


@dataclasses.dataclass(frozen=True)
class Assumptions:
    work_seconds: float = 1.0  # one run's work; the handler adds about 0.1 s
    vcpu: float = vcpu_of(256)  # var.function.available_memory's default (256M) and concurrency 1
    memory_gib: float = 0.25  # var.function.available_memory, 256M
    log_bytes_per_delivery: int = 4096  # the outcome line, Cloud Run's request line, Scheduler's two
    deploys: int = 10  # a month
    build_minutes: float = 2.0  # a build of the function
    image_gb: float = 0.2  # one build's image in Artifact Registry
    images_kept: int = 2  # the image repository's cleanup policy: images_kept's default (modules/image-repository)


@dataclasses.dataclass(frozen=True)
class Usage:
    """A month of this project: what each bill line counts."""

    scheduler_jobs: int
    requests: float
    firestore_reads: float
    firestore_writes: float
    firestore_deletes: float
    default_database: bool
    alert_conditions: int


def fires_per_month(schedule: str, time_zone: str) -> int:
    """The runs of a 5-field cron in DAYS days from MONTH_START on its zone's wall clock (schedules.runs)."""
    job = schedules.Schedule(schedule, time_zone)
    start = MONTH_START.replace(tzinfo=zoneinfo.ZoneInfo(time_zone))
    try:
        return len(schedules.runs(job, start, start + dt.timedelta(days=DAYS)))
    except CronSimError as error:
        raise ValueError(f"schedule={schedule!r}: {error}") from None


def usage(
    fires: Mapping[str, int],
    audit_interval_minutes: int,
    lookback: dt.timedelta,
    database: str,
    follows_executions: bool = False,
) -> Usage:
    """The month's usage of `fires` ({job: fire times a month}) with an audit every audit_interval_minutes, of a
    function bake or (follows_executions) of a proxy bake."""
    if audit_interval_minutes <= 0:
        raise ValueError(f"audit_interval_minutes={audit_interval_minutes}: must be a positive number of minutes")
    audits = DAYS * 24 * 60 / audit_interval_minutes
    runs = sum(fires.values()) + audits
    # docs/audit.md, "RPC cost": each audit reads and writes its bookmark and reads each run once, when
    # it settles; once a day a full sweep reads every fire time of the lookback again.
    sweeps = sum(fires.values()) * (lookback / dt.timedelta(days=1))
    return Usage(
        scheduler_jobs=len(fires) + 1,  # the audit is a Scheduler job too
        requests=runs,
        firestore_reads=audits + sum(fires.values()) + sweeps,
        # A fresh run: the claim (a create) and its finish (an update) (docs/how-it-works.md); its TTL delete.
        firestore_writes=2 * runs + audits,
        firestore_deletes=runs,
        default_database=database == "(default)",
        alert_conditions=ALERT_CONDITIONS[follows_executions],
    )


def over(amount: float, free: float) -> float:
    return max(0.0, amount - free)


def monthly_cost(use: Usage, assume: Assumptions = Assumptions()) -> dict[str, float]:
    """USD a month, by bill line."""
    p = PRICES
    seconds = use.requests * (assume.work_seconds + 0.1)
    free_reads = p["firestore_free_reads_per_day"] * DAYS if use.default_database else 0
    free_writes = p["firestore_free_writes_per_day"] * DAYS if use.default_database else 0
    log_gib = use.requests * assume.log_bytes_per_delivery / 2**30
    return {
        "Cloud Scheduler": over(use.scheduler_jobs, p["scheduler_free_jobs"]) * p["scheduler_job"],
        "Cloud Run": over(seconds * assume.vcpu, p["run_free_vcpu_seconds"]) * p["run_vcpu_second"]
        + over(seconds * assume.memory_gib, p["run_free_gib_seconds"]) * p["run_gib_second"]
        + over(use.requests, p["run_free_requests"]) * p["run_request"],
        "Firestore reads": over(use.firestore_reads, free_reads) * p["firestore_read"],
        "Firestore writes and TTL deletes": over(use.firestore_writes, free_writes) * p["firestore_write"]
        + use.firestore_deletes * p["firestore_delete"],
        "Cloud Logging": over(log_gib, p["logging_free_gib"]) * p["logging_gib"],
        # A healthy month: only the audit-stopped condition returns a series at each evaluation.
        "Cloud Monitoring (alerting)": use.alert_conditions * p["alert_condition"]
        + p["alert_evaluations"] * p["alert_series"],
        "Cloud Build": over(assume.deploys * assume.build_minutes, p["build_free_minutes"]) * p["build_minute"],
        "Artifact Registry": over(assume.images_kept * assume.image_gb, p["registry_free_gb"]) * p["registry_gb"],
    }


def reference_usage(jobs: int, database: str, follows_executions: bool = False) -> Usage:
    """`jobs` hourly jobs, an hourly audit looking back a day: docs/cost.md's table."""
    fires = {f"job-{index}": fires_per_month("0 * * * *", "Etc/UTC") for index in range(jobs)}
    return usage(fires, 60, dt.timedelta(days=1), database, follows_executions)


def table(follows_executions: bool = False) -> str:
    """docs/cost.md's table, in Markdown: a function bake's, or (follows_executions) a proxy bake's."""
    sizes = [1, 10, 100]
    named = [monthly_cost(reference_usage(jobs, "named-db", follows_executions)) for jobs in sizes]
    default = [monthly_cost(reference_usage(jobs, "(default)", follows_executions)) for jobs in sizes]
    lines = ["| USD a month | " + " | ".join(f"{jobs} job{'s' * (jobs > 1)}" for jobs in sizes) + " |"]
    lines.append("| --- |" + " ---: |" * len(sizes))
    for item in named[0]:
        lines.append(f"| {item} | " + " | ".join(f"{cost[item]:.2f}" for cost in named) + " |")
    lines.append("| **total, a named database** | " + " | ".join(f"**{sum(c.values()):.2f}**" for c in named) + " |")
    lines.append(
        "| **total, the (default) database** | " + " | ".join(f"**{sum(c.values()):.2f}**" for c in default) + " |"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("bake", nargs="?", type=Path, help="a baked project: the directory with config.yaml")
    parser.add_argument("--table", action="store_true", help="print docs/cost.md's table (1, 10, 100 hourly jobs)")
    parser.add_argument("--proxy", action="store_true", help="with --table: a proxy bake's (it follows executions)")
    parser.add_argument("--audit-interval-minutes", type=int, help="default: config.yaml's audit_interval_minutes")
    parser.add_argument("--work-seconds", type=float, default=Assumptions.work_seconds)
    args = parser.parse_args(argv)
    if args.table:
        print(table(args.proxy))
        return 0
    if args.bake is None or not (args.bake / "config.yaml").is_file():
        print(f"error: bake={args.bake}: must be a baked project's directory (it has config.yaml)", file=sys.stderr)
        return 2
    sys.path.insert(0, str(args.bake.resolve()))
    modules = ("audit", "outcomes", "config")
    audit, outcomes, project_config = (importlib.import_module(name) for name in modules)
    try:
        config = project_config.current()
        interval = args.audit_interval_minutes
        if interval is None:
            interval = project_config.load().audit_interval_minutes
        fires = {name: fires_per_month(job.schedule, job.time_zone) for name, job in config.jobs.items()}
        # Only a proxy bake has executions.py (hooks/baking.py, TARGET_ONLY_PATHS): its module follows executions.
        proxy = (args.bake / "executions.py").is_file()
        use = usage(fires, interval, audit.lookback(config), config.database, proxy)
        if args.work_seconds < 0:
            raise ValueError(f"--work-seconds={args.work_seconds}: must be at least 0")
    except (outcomes.Misconfigured, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    costs = monthly_cost(use, Assumptions(work_seconds=args.work_seconds))
    for item, cost in costs.items():
        print(f"{item:34} {cost:8.2f}")
    print(f"{'total (USD a month)':34} {sum(costs.values()):8.2f}")
    try:
        checked = project_config.load(schedules=True)
    except project_config.ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    instances, concurrency = checked.function.values()
    retries = herd_retries(checked.herd.runs, instances * concurrency)
    vcpu = vcpu_of(round(Assumptions.memory_gib * 1024), concurrency)
    print(
        f"the busiest minute, {checked.herd.where()}: {checked.herd.runs} runs at once, capacity "
        f"{instances} x {concurrency}: {retries} retried after a 429; {vcpu} vCPU an instance"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
