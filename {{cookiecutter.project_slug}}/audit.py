"""The audit: every run each job's cron should have made (schedules.py, as the handler keys them), against the
run records (one batched read, RunLedger.read_runs), each judged one of `State`.

`run` is the audit job's work. It is incremental: each run is judged once, by the first audit after it settled,
and once a day a full sweep judges the whole lookback again (so alerts of runs still missing or stuck stay open).
The bookmark (ledger.AUDIT_CURSOR_ID) moves with the function's clock; a job added since the last audit is judged
from it, its times before the first audit that saw it only by their records, so a new job is never reported missed.
The bookmark also keeps each job's schedule history (`eras`): each fire time is judged by the schedule (cron, zone,
dst_gap, paused) in force at it (expected_runs), so a change never makes a past run missing nor a never-scheduled
time due; a change is dated by the apply that made it where the audit's delivery says so (Deployed, dated). A fire
time of a paused era is `paused`; a `catch_up` job's missing runs are queued for delivery (task_queue.py) while
within its max_lateness_seconds.
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

# How far back each audit run looks (never beyond the retention, past which records may be gone); rules.py checks
# that the audit interval plus settle fit in it, so that every run is judged by at least one audit.
AUDIT_LOOKBACK = dt.timedelta(seconds=rules.AUDIT_LOOKBACK_SECONDS)
# How often an audit re-judges the whole lookback instead of only the newly settled runs.
FULL_SWEEP_EVERY = dt.timedelta(days=1)
# The most schedule changes a job's history keeps (besides those older than the retention, which judge nothing):
# about 100 bytes each in the bookmark's 1 MiB document.
MAX_ERAS = 50
# What an era of a job's schedule history holds of its Job (the schedule's fields, and paused).
ERA_FIELDS = ("cron", "time_zone", "dst_gap", "paused")
# The audit's Scheduler job sends when the last apply changed the schedules, and which (the module's history.tf).
DEPLOYED_HEADER = "X-Schedules-Deployed"


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


# The states that need a person (or `scheduled_dedup_tools.runs backfill`): logged by the audit, listed by `missed`.
NEEDS_DELIVERY = (State.MISSING, State.STUCK)


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    """One fire time of a job's cron, the run key a delivery for it is keyed by, and (once judged) its state."""

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
    """When the last `terraform apply` that changed a schedule changed the function and the Scheduler jobs: at some
    instant in [start, seen]; `digest`: which schedules it deployed (schedules_digest)."""

    start: dt.datetime
    seen: dt.datetime
    digest: str

    @classmethod
    def of(cls, header: str | None) -> Deployed | None:
        """DEPLOYED_HEADER's "<start> <seen> <digest>" (RFC 3339, sha256 hex); None if it is not that (then the audit
        dates a change by its own interval, as without it)."""
        try:
            start, seen, digest = (header or "").split()
            start, seen = dt.datetime.fromisoformat(start), dt.datetime.fromisoformat(seen)
        except ValueError:
            return None
        return cls(start, seen, digest) if start.tzinfo and seen.tzinfo and start <= seen else None


def schedules_digest(jobs: Mapping[str, Job]) -> str:
    """The digest of the schedules of `jobs` as history.tf computes it from config.yaml: one line per Scheduler job,
    by name, "<name>|<cron>|<zone>|<dst_gap>|paused or enabled"."""
    lines = (
        "|".join((name, job.schedule, job.time_zone, job.dst_gap, "paused" if job.paused else "enabled"))
        for name, job in sorted(jobs.items())
    )
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def era(job: Job | None, start: dt.datetime, seen: dt.datetime | None = None) -> dict[str, object]:
    """An era of a job's schedule history: `job`'s schedule and pause (None: the job was not in config.yaml, it
    names no fire time), in force from `seen` (default: `start`) on; between `start` and `seen` it or the era before
    may be (the audits before and at the change: when the deploy happened in between is not known)."""
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
    """The runs job `name` should have had with a schedule time in [since, until), in time order: each fire time
    by the era in force at it. `history`: a Job (one schedule for all time) or the job's eras (era(), oldest
    first; the first one reaches back without limit). Between an era's `from` and `seen` (one audit interval at most)
    a time only one of both eras names is `maybe`, and a time is paused if either says paused: a change never makes
    a past run missing nor a never-scheduled time due. A run due before that window is judged by its own era."""
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
    """Every expected run of `jobs` in [since, until) (within a job's own window [start, end) in `windows`, by its
    schedule history in `eras`; else its schedule as it is now), judged (a `maybe` one only by its record); one read
    per ledger.READ_BATCH run ids."""
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
    """What one audit judges: per job its window [start, end) (each job's end by its own settle time), the next
    bookmark (with each job's schedule history), and its overall bounds."""

    windows: dict[str, tuple[dt.datetime, dt.datetime]]
    since: dt.datetime
    until: dt.datetime
    full: bool
    cursor: AuditCursor

    @property
    def eras(self) -> dict[str, list[Mapping[str, object]]]:
        """Each job's schedule history, as the next bookmark keeps it."""
        return {name: entry["eras"] for name, entry in self.cursor.jobs.items()}


def plan(
    cursor: AuditCursor,
    jobs: Mapping[str, Job],
    now: dt.datetime,
    config: Config,
    deployed: Deployed | None = None,
) -> Sweep:
    """The windows of the audit at `now` (the function's clock): each job from where the last audit stopped
    (a full sweep: from the start of the lookback) to the instant before which every run of it has settled (its
    own lease and retry window, config.yaml). A job's schedule or pause unlike its last era starts a new era: from
    the last audit that saw the old one (`audited`), seen now; or by the apply that deployed `jobs` (dated)."""
    deployed = deployed if deployed and deployed.digest == schedules_digest(jobs) else None
    since = now - lookback(config)
    full = cursor.last_full_sweep is None or now - cursor.last_full_sweep >= FULL_SWEEP_EVERY
    windows, entries = {}, {}
    # A job added since the last audit is judged from it, its times before the deploy `maybe` (an absent era
    # first); at the first audit ever, from now. A removed job keeps its history (an absent era) while it judges.
    last = max((entry["audited"] for entry in cursor.jobs.values() if "audited" in entry), default=now)
    added = {"since": last, "judged_until": last, "audited": last, "eras": [era(None, last)]} if last < now else {}
    for name in {**cursor.jobs, **jobs}:
        job, entry = jobs.get(name), cursor.jobs.get(name) or added or {"since": now, "judged_until": now}
        current = era(job, entry.get("audited", now), now)
        eras = list(entry.get("eras") or [current])
        if any(eras[-1][field] != current[field] for field in ERA_FIELDS):  # a deploy changed it since
            eras.append(dated(current, eras[-1], deployed))
        # An era whose successor was in force before the retention judges nothing (`runs missed` judges that far):
        # dropped, as are the oldest beyond MAX_ERAS (the first kept one reaches back).
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
    """The era `change`, dated by the apply that deployed the function's schedules (plan: its digest is theirs):
    the change happened between its `start` and `seen` (seconds), not somewhere between the two audits around it.
    Never before the era it follows began, never after now."""
    if deployed is None:
        return change
    start = max(deployed.start, before["from"])
    return change | {"from": start, "seen": min(max(deployed.seen, start), change["seen"])}


def run(context: RunContext, deployed: str | None = None) -> str:
    """The audit job's work; it moves the bookmark after its lines: a crash in between re-reports, never skips.
    `deployed`: the delivery's DEPLOYED_HEADER (main.py passes it)."""
    config = configuration.current()
    ledger = RunLedger(config)
    cursor = ledger.read_audit_cursor()
    now = dedup.utcnow()  # one instant for the bookmark's windows and the judging
    sweep = plan(cursor, config.jobs, now, config, Deployed.of(deployed))
    runs = audit_runs(ledger, config.jobs, sweep.since, sweep.until, now, windows=sweep.windows, eras=sweep.eras)
    catch_up(config, runs, now)
    for found in needing_delivery(runs):
        # The audited run's fields (job, schedule_time, run_id, trigger) override the audit run's own on this line.
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
    """Queue a delivery of each missing run of a catch_up job still within its max_lateness_seconds (no limit: any
    the audit sees), one line each. A task per run id (task_queue.enqueue_run), so the daily full sweep, which sees
    a run missing until it ran, queues it once. A failure to queue is logged, not raised, and ends the catch-up: the
    queue is unreachable or refuses the function, the rest would fail alike (each after its timeout); the next full
    sweep tries again those still within their limit."""
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
