"""The audit: every run each job's cron should have made (schedules.py), against the run records, judged one of `State`.

Each run is judged once, after it settled (a daily full sweep: again), by the schedule in force at its time (`eras`).
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import hashlib
import logging
from collections.abc import Callable, Iterator, Mapping, Sequence

import config as configuration
import dedup
import rules
import schedules
import task_queue
from config import Config, Job
from keys import RunKey, rfc3339
from ledger import AuditCursor, RunLedger
from run_context import RunContext

logger = logging.getLogger(__name__)

# How far back an audit looks (never beyond the retention: `lookback`); rules.py checks every run is judged once.
AUDIT_LOOKBACK = dt.timedelta(seconds=rules.AUDIT_LOOKBACK_SECONDS)
FULL_SWEEP_EVERY = dt.timedelta(days=1)
MAX_ERAS = 50  # schedule changes a job's history keeps: about 100 bytes each in the bookmark's 1 MiB document
ERA_FIELDS = ("cron", "time_zone", "dst_gap", "paused")
DEPLOYED_HEADER = "X-Schedules-Deployed"  # when the last apply changed schedules, and which (the module's history.tf)


class State(enum.StrEnum):
    """An expected run's state: its record's status (dedup.Status), or what the audit makes of it."""

    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"
    STARTED = "started"
    IN_PROGRESS = "in_progress"
    STUCK = "stuck"  # in_progress, lease expired: the attempt died and no retry took it over (yet)
    MISSING = "missing"  # no record, and settle has passed: no delivery will come by itself
    PENDING = "pending"  # no record yet, but Scheduler may still deliver it
    PAUSED = "paused"  # no record, and the job is paused: Scheduler does not deliver it, nobody needs to act


NEEDS_DELIVERY = (State.MISSING, State.STUCK)  # need a person (or `runs backfill`): logged, listed by `missed`


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    job: str
    wall_time: dt.datetime  # naive: the time on the zone's wall clock, as the cron means it
    key: RunKey
    dst: schedules.Dst | None = None
    state: State | None = None  # None: expected, not judged yet
    paused: bool = False  # the job was paused at this fire time (its era's)
    maybe: bool = False  # in a change's window only one era names it: judged only if it has a record
    time_zone: str = "Etc/UTC"  # the zone of wall_time (its era's)

    def __str__(self) -> str:
        return f"{self.job} at {rfc3339(self.key.schedule_time)}"

    def as_json(self) -> dict[str, object]:
        return {
            "job": self.job,
            "schedule_time": rfc3339(self.key.schedule_time),
            "run_id": self.key.run_id,
            "state": self.state.value,
            "wall_time": self.wall_time.isoformat(),
            "dst": self.dst.value if self.dst else None,
        }


@dataclasses.dataclass(frozen=True)
class Deployed:
    """The last apply that changed a schedule happened in [start, seen]; `digest`: which (schedules_digest)."""

    start: dt.datetime
    seen: dt.datetime
    digest: str

    @classmethod
    def of(cls, header: str | None) -> Deployed | None:
        """DEPLOYED_HEADER's "<start> <seen> <digest>" (RFC 3339, sha256 hex); None if it is not that."""
        try:
            start, seen, digest = (header or "").split()
            start, seen = dt.datetime.fromisoformat(start), dt.datetime.fromisoformat(seen)
        except ValueError:
            return None
        return cls(start, seen, digest) if start.tzinfo and seen.tzinfo and start <= seen else None


def schedules_digest(jobs: Mapping[str, Job]) -> str:
    """The digest of the schedules of `jobs` as history.tf computes it from config.yaml."""
    lines = (
        "|".join((name, job.schedule, job.time_zone, job.dst_gap, "paused" if job.paused else "enabled"))
        for name, job in sorted(jobs.items())
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def era(job: Job | None, start: dt.datetime, seen: dt.datetime | None = None) -> dict[str, object]:
    """An era of a job's schedule history (None: not in config.yaml), in force from `seen`, maybe from `start`."""
    fields = (job.schedule, job.time_zone, job.dst_gap, job.paused) if job else (None,) * len(ERA_FIELDS)
    return {"from": start, "seen": seen or start} | dict(zip(ERA_FIELDS, fields, strict=True))


def expected_runs(
    name: str,
    history: Job | Sequence[Mapping[str, object]],
    since: dt.datetime,
    until: dt.datetime,
    project: str,
    location: str,
) -> list[AuditedRun]:
    """The runs job `name` should have had in [since, until), each by the era (`history`) in force at it. Between an
    era's `from` and `seen`, a time only one era names is `maybe`, and paused if either says paused."""
    eras = [era(history, since)] if isinstance(history, Job) else list(history)
    bounds = [
        (since if i == 0 else max(since, this["from"]), until if i == len(eras) - 1 else min(until, after["seen"]))
        for i, (this, after) in enumerate(zip(eras, [*eras[1:], None], strict=True))
    ]
    named: dict[dt.datetime, list[tuple[schedules.FireTime, bool, str]]] = {}
    for this, (low, high) in zip(eras, bounds, strict=True):
        if this["cron"] is None:  # the job was not in config.yaml
            continue
        schedule = schedules.Schedule(this["cron"], this["time_zone"], this["dst_gap"])
        for fire in schedules.runs(schedule, low, high) if low < high else ():
            named.setdefault(fire.instant, []).append((fire, bool(this["paused"]), schedule.time_zone))
    found = []
    for instant, fires in sorted(named.items()):
        maybe = len(fires) < sum(low <= instant < high for low, high in bounds)  # a change's window: not both
        fire, zone = fires[-1][0], fires[-1][2]
        paused = any(paused for _, paused, _ in fires)
        key = RunKey(project, location, name, instant)
        found.append(AuditedRun(name, fire.wall, key, fire.dst, paused=paused, maybe=maybe, time_zone=zone))
    return found


def judge(
    run: AuditedRun, records: Mapping[str, Mapping[str, object]], now: dt.datetime, settle: dt.timedelta
) -> AuditedRun:
    """The expected run, judged from its record; without one, paused if its job was paused at its fire time."""
    record = records.get(run.key.run_id)
    if record is None and run.paused:
        state = State.PAUSED
    elif record is None:
        state = State.PENDING if now < run.key.schedule_time + settle else State.MISSING
    elif (status := dedup.Status(record["status"])) is dedup.Status.IN_PROGRESS:
        state = State.STUCK if dedup.lease_over(record, now) else State.IN_PROGRESS
    else:
        state = State(status.value)
    return dataclasses.replace(run, state=state)


def audit_runs(
    ledger: RunLedger,
    jobs: Mapping[str, Job],
    since: dt.datetime,
    until: dt.datetime,
    now: dt.datetime,
    progress: Callable[[int, int], None] | None = None,
    windows: Mapping[str, tuple[dt.datetime, dt.datetime]] | None = None,
    eras: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
) -> list[AuditedRun]:
    """Every expected run of `jobs` in [since, until) and its `windows`, judged (a `maybe` one if recorded)."""
    config = ledger.config
    place = (config.project, config.location)  # what the function's own Scheduler jobs key their runs under
    windows, eras = windows or {}, eras or {}
    expected = [
        run
        for name, job in jobs.items()
        for low, high in [windows.get(name, (since, until))]
        for run in expected_runs(name, eras.get(name, job), max(since, low), min(until, high), *place)
    ]
    records = ledger.read_runs((run.key.run_id for run in expected), progress)
    judged = (run for run in expected if not run.maybe or run.key.run_id in records)
    return [judge(run, records, now, config.settle_for(run.job)) for run in judged]


def lookback(config: Config) -> dt.timedelta:
    return min(AUDIT_LOOKBACK, config.retention)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What one audit judges: per job its window [start, end), its overall bounds, and the next bookmark."""

    windows: dict[str, tuple[dt.datetime, dt.datetime]]
    since: dt.datetime
    until: dt.datetime
    full: bool
    cursor: AuditCursor

    @property
    def eras(self) -> dict[str, list[Mapping[str, object]]]:
        return {name: entry["eras"] for name, entry in self.cursor.jobs.items()}


def plan(
    cursor: AuditCursor, jobs: Mapping[str, Job], now: dt.datetime, config: Config, deployed: Deployed | None = None
) -> Sweep:
    """The audit at `now`: each job from where the last audit stopped (or the lookback's start) to when its runs have
    settled; a changed schedule or pause starts a new era."""
    deployed = deployed if deployed and deployed.digest == schedules_digest(jobs) else None
    since = now - lookback(config)
    full = cursor.last_full_sweep is None or now - cursor.last_full_sweep >= FULL_SWEEP_EVERY
    windows, entries = {}, {}
    # A job added since the last audit is judged from it (an absent era first); at the first audit ever, from now.
    last = max((entry["audited"] for entry in cursor.jobs.values() if "audited" in entry), default=now)
    added = {"since": last, "judged_until": last, "audited": last, "eras": [era(None, last)]} if last < now else {}
    for name in {**cursor.jobs, **jobs}:
        job, entry = jobs.get(name), cursor.jobs.get(name) or added or {"since": now, "judged_until": now}
        current = era(job, entry.get("audited", now), now)
        eras = list(entry.get("eras") or [current])
        if any(eras[-1][field] != current[field] for field in ERA_FIELDS):  # a deploy changed it since
            eras.append(dated(current, eras[-1], deployed))
        # An era whose successor was in force before the retention judges nothing: dropped.
        kept = now - config.retention
        eras = [this for this, after in zip(eras, [*eras[1:], None], strict=True) if not after or after["seen"] > kept]
        if job is None:
            if eras[-1]["seen"] > kept:
                entries[name] = entry | {"audited": now, "eras": eras[-MAX_ERAS:]}
            continue
        until = now - config.settle_for(name)
        start = entry["since"] if full else max(entry["since"], entry["judged_until"])
        windows[name] = (start, until)
        judged = {"judged_until": max(entry["judged_until"], until), "audited": now, "eras": eras[-MAX_ERAS:]}
        entries[name] = {"since": entry["since"]} | judged
    until = max((end for _, end in windows.values()), default=now - config.settle)
    last_full = now if full else cursor.last_full_sweep
    return Sweep(windows, since, until, full, AuditCursor(entries, last_full, cursor.update_time))


def dated(change: dict[str, object], before: Mapping[str, object], deployed: Deployed | None) -> dict[str, object]:
    """The era `change`, dated by the apply that deployed it rather than by the two audits around it."""
    if deployed is None:
        return change
    start = max(deployed.start, before["from"])
    return change | {"from": start, "seen": min(max(deployed.seen, start), change["seen"])}


def run(context: RunContext, deployed: str | None = None) -> str:
    """The audit job's work (`deployed`: DEPLOYED_HEADER); the bookmark moves last: a crash re-reports, never skips."""
    config = configuration.current()
    ledger = RunLedger(config)
    cursor = ledger.read_audit_cursor()
    now = dedup.utcnow()  # one instant for the bookmark's windows and the judging
    sweep = plan(cursor, config.jobs, now, config, Deployed.of(deployed))
    runs = audit_runs(ledger, config.jobs, sweep.since, sweep.until, now, windows=sweep.windows, eras=sweep.eras)
    catch_up(config, runs, now)
    for found in needing_delivery(runs):
        fields = found.key.log_fields | {"audit_state": found.state.value, "audit_run_id": context.run_id}
        line = f"scheduled run {found.state}: {found} (run_id {found.key.run_id})"
        logger.warning(line, extra={"json_fields": fields})
    counts = collections.Counter(found.state.value for found in runs)
    summary = ", ".join(f"{count} {state}" for state, count in sorted(counts.items())) or "no runs settled"
    kind, until = "full sweep" if sweep.full else "incremental", rfc3339(sweep.until)
    line = f"audit ({kind}) of {len(config.jobs)} job(s) up to {until}: {summary}"
    logger.info(line, extra={"json_fields": {"audit_summary": dict(counts), "audit_until": until, "audit_kind": kind}})
    ledger.write_audit_cursor(sweep.cursor)
    return summary


def needing_delivery(runs: list[AuditedRun]) -> Iterator[AuditedRun]:
    return (found for found in runs if found.state in NEEDS_DELIVERY)


def catch_up(config: Config, runs: list[AuditedRun], now: dt.datetime) -> None:
    """Queue each missing run of a catch_up job within max_lateness_seconds; a failure ends it (the rest would too)."""
    for found in runs:
        job = config.jobs[found.job]
        within = job.max_lateness is None or now - found.key.schedule_time <= job.max_lateness
        if found.state is not State.MISSING or not job.catch_up or not within:
            continue
        try:
            deadline = config.attempt_deadline_for(found.job)
            queued = task_queue.enqueue_run(config.tasks_queue, found.key, "catch-up", deadline)
        except Exception as error:  # any failure of the queue: this audit's other work goes on
            line = f"catch-up of {found} not queued: {type(error).__name__}: {error}"
            logger.error(line, extra={"json_fields": found.key.log_fields | {"catch_up": "failed"}})
            return
        done = "queued" if queued else "was queued before"
        logger.info(f"catch-up of {found} {done}", extra={"json_fields": found.key.log_fields | {"catch_up": "queued"}})
