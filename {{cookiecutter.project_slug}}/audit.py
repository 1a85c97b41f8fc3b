"""The audit: every run each job's cron should have made (schedules.py, as the handler keys them), against the
run records (one batched read, RunLedger.read_runs), each judged one of `State`.

`run` is the audit job's work. It is incremental: each run is judged once, by the first audit after it settled,
and once a day a full sweep judges the whole lookback again (so alerts of runs still missing or stuck stay open).
The bookmark (ledger.AUDIT_CURSOR_ID) moves with the function's clock, and a job is judged only from the first
audit that saw it (or saw it paused or resumed: the audit cannot see when the deploy did it), so a new job or a
pause is never reported missed. A `paused` job's fire times are `paused`; a `catch_up` job's missing runs are
queued for delivery (task_queue.py) while within its max_lateness_seconds.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import enum
import logging
from collections.abc import Callable, Iterator, Mapping

import dedup
import rules
import schedules
import task_queue
from keys import RunKey, rfc3339
from ledger import AuditCursor, RunLedger
from run_context import RunContext
from settings import DedupConfig, JobSpec

logger = logging.getLogger(__name__)

# How far back each audit run looks (never beyond the retention, past which records may be gone); rules.py checks
# that the audit interval plus settle fit in it, so that every run is judged by at least one audit.
AUDIT_LOOKBACK = dt.timedelta(seconds=rules.AUDIT_LOOKBACK_SECONDS)
# How often an audit re-judges the whole lookback instead of only the newly settled runs.
FULL_SWEEP_EVERY = dt.timedelta(days=1)


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


# The states that need a person (or `tools/runs.py backfill`): logged by the audit, listed by `missed`.
NEEDS_DELIVERY = (State.MISSING, State.STUCK)


@dataclasses.dataclass(frozen=True)
class AuditedRun:
    """One fire time of a job's cron, the run key a delivery for it is keyed by, and (once judged) its state."""

    job: str
    wall_time: dt.datetime  # naive: the time on the zone's wall clock, as the cron means it
    key: RunKey
    dst: schedules.Dst | None = None
    state: State | None = None  # None: expected, not judged yet

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


def expected_runs(
    name: str, job: JobSpec, since: dt.datetime, until: dt.datetime, project: str, location: str
) -> list[AuditedRun]:
    """The runs `job` should have had with a schedule time in [since, until), in time order."""
    return [
        AuditedRun(name, fire.wall, RunKey(project, location, name, fire.instant), fire.dst)
        for fire in schedules.runs(job.fire_rule, since, until)
    ]


def judge(
    run: AuditedRun, records: Mapping[str, Mapping[str, object]], now: dt.datetime, settle: dt.timedelta, paused: bool
) -> AuditedRun:
    """The expected run, judged from its record; without one, paused for a paused job."""
    record = records.get(run.key.run_id)
    if record is None and paused:
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
    jobs: Mapping[str, JobSpec],
    since: dt.datetime,
    until: dt.datetime,
    now: dt.datetime,
    progress: Callable[[int, int], None] | None = None,
    starts: Mapping[str, dt.datetime] | None = None,
) -> list[AuditedRun]:
    """Every expected run of `jobs` in [since, until) (for a job in `starts`, from its start on), judged;
    one read per ledger.READ_BATCH run ids."""
    config = ledger.config
    starts = starts or {}
    place = (config.project, config.location)  # what the function's own Scheduler jobs key their runs under
    expected = [
        run
        for name, job in jobs.items()
        for run in expected_runs(name, job, max(since, starts.get(name, since)), until, *place)
    ]
    records = ledger.read_runs((run.key.run_id for run in expected), progress)
    return [judge(run, records, now, config.settle_for(run.job), jobs[run.job].paused) for run in expected]


def lookback(config: DedupConfig) -> dt.timedelta:
    return min(AUDIT_LOOKBACK, config.retention)


@dataclasses.dataclass(frozen=True)
class Sweep:
    """What one audit judges: per job the start of its window (all windows end at `until`), and the next bookmark."""

    starts: dict[str, dt.datetime]
    since: dt.datetime
    until: dt.datetime
    full: bool
    cursor: AuditCursor


def plan(cursor: AuditCursor, job_names, now: dt.datetime, config: DedupConfig) -> Sweep:
    """The windows of the audit at `now` (the function's clock): each job from where the last audit stopped
    (a full sweep: from the start of the lookback) to the instant before which every run has settled: each job
    settles after its own lease and retry window (config.yaml), so the slowest job's decides."""
    until = now - max((config.settle_for(name) for name in job_names), default=config.settle)
    since = now - lookback(config)
    full = cursor.last_full_sweep is None or now - cursor.last_full_sweep >= FULL_SWEEP_EVERY
    # `paused` is kept in a job's entry while it is paused: a new, paused or resumed job starts from now.
    starts, jobs = {}, {}
    for name in job_names:
        pause = {"paused": True} if name in config.jobs and config.jobs[name].paused else {}
        entry = cursor.jobs.get(name)
        if entry is None or bool(entry.get("paused", False)) != bool(pause):
            entry = {"since": now, "judged_until": now}
        starts[name] = entry["since"] if full else max(entry["since"], entry["judged_until"])
        jobs[name] = {"since": entry["since"], "judged_until": max(entry["judged_until"], until)} | pause
    last_full = now if full else cursor.last_full_sweep
    return Sweep(starts, since, until, full, AuditCursor(jobs, last_full, cursor.update_time))


def run(context: RunContext) -> str:
    """The audit job's work; it moves the bookmark after its lines: a crash in between re-reports, never skips."""
    config = DedupConfig.from_env()
    ledger = RunLedger(config)
    cursor = ledger.read_audit_cursor()
    now = dedup.utcnow()  # one instant for the bookmark's windows and the judging
    sweep = plan(cursor, config.jobs, now, config)
    runs = audit_runs(ledger, config.jobs, sweep.since, sweep.until, now, starts=sweep.starts)
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


def starts(ledger: RunLedger, job_names) -> dict[str, dt.datetime]:
    """When the audit first saw each job (jobs it never saw are left out): nothing before is judged."""
    return {name: entry["since"] for name, entry in ledger.read_audit_cursor().jobs.items() if name in job_names}


def needing_delivery(runs: list[AuditedRun]) -> Iterator[AuditedRun]:
    return (found for found in runs if found.state in NEEDS_DELIVERY)


def catch_up(config: DedupConfig, runs: list[AuditedRun], now: dt.datetime) -> None:
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
