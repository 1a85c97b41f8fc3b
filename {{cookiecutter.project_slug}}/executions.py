"""Proxy targets: follow the executions the handler started, and apply each job's overlap rule.

The handler records a proxy's run `started` with its execution's full resource name (job.run starts it,
RunLedger.start records it) and does not wait for it. Two kinds of delivery follow it:
- every later delivery of the same job, before it starts anything: the overlap rule needs to know;
- every delivery of the audit job, for all jobs: a failure is reported within one audit interval even
  when the job's next run is days away.
Following reads the execution's state (job.execution_end: the Run v2 or Workflows Executions API) and,
once it has ended, records the run `completed` or `failed` (RunLedger.end_execution) and logs one
line with `execution_outcome`. The log-based metric `<slug>-execution-failed` counts the failed and the
cancelled ones by job, and its alert tells a person (terraform/modules/scheduled-dedup/executions.tf).
A failed run is re-run like any finished run (docs/schedules-and-manual-runs.md).

The overlap rule (per job, settings.JobSpec.overlap): while an execution the job started earlier still
runs, "skip" records the new run `skipped` (outcome skipped_overlap, 2xx: Scheduler does not retry it)
and starts nothing; "start" starts it anyway.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import logging
from collections.abc import Callable

import dedup
from ledger import Claim, RunLedger, StartedRun
from outcomes import SkippedOverlap
from run_context import RunContext
from settings import DedupConfig

logger = logging.getLogger(__name__)


class ExecutionEnd(enum.StrEnum):
    """How an execution ended: the `execution_outcome` of its log line."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


@dataclasses.dataclass(frozen=True)
class Ended:
    how: ExecutionEnd
    detail: str = ""  # why it did not succeed, as the API says it


# An execution's end by its full resource name, or None while it runs (job.execution_end).
Poll = Callable[[str], Ended | None]


def follow(ledger: RunLedger, now: dt.datetime, poll: Poll, job_name: str | None = None) -> list[StartedRun]:
    """Records every started run (of Scheduler job `job_name`, or of all) whose execution has ended; returns
    the ones still running. An API error is raised: the delivery is released and retried."""
    running = []
    for started in ledger.started_runs(now, job_name):
        ended = poll(started.execution)
        if ended is None:
            running.append(started)
            continue
        if ended.how is ExecutionEnd.SUCCEEDED:
            recorded = ledger.end_execution(started, dedup.Status.COMPLETED, now)
        else:
            reason = f"execution {started.execution} {ended.how.value}: {ended.detail or 'no detail given'}"
            recorded = ledger.end_execution(started, dedup.Status.FAILED, now, reason)
        if recorded:  # else another delivery recorded (and logged) it first
            log_end(started, ended)
    return running


def log_end(started: StartedRun, ended: Ended) -> None:
    """One line per ended execution, with the followed run's own job, run_id and schedule_time."""
    failed = ended.how is not ExecutionEnd.SUCCEEDED
    logger.log(
        logging.ERROR if failed else logging.INFO,
        "execution %s of %s at %s %s%s",
        started.execution,
        started.job_name,
        started.schedule_time.isoformat(),
        ended.how.value,
        f": {ended.detail}" if ended.detail else "",
        extra={
            "json_fields": {
                "execution_outcome": ended.how.value,
                "execution": started.execution,
                "job": started.job_name,
                "run_id": started.run_id,
                "schedule_time": started.schedule_time.isoformat(),
            }
        },
    )


def following(
    ledger: RunLedger,
    claim: Claim,
    config: DedupConfig,
    poll: Poll,
) -> Callable[[RunContext], None]:
    """What a delivery does before its work, in the handler's process (it writes through `ledger`; only the work
    runs in a process of its own, stop.py): follows the executions started earlier, all of them for the audit job;
    the job's own otherwise, then its overlap rule (SkippedOverlap, the run recorded `skipped`)."""

    def follow_first(context: RunContext) -> None:
        now = dedup.utcnow()
        if context.job_name == config.audit_job:
            follow(ledger, now, poll)
            return
        running = follow(ledger, now, poll, context.job_name)
        job = config.jobs.get(context.job_name)
        if running and (job.overlap if job else "skip") == "skip":
            names = ", ".join(started.execution for started in running)
            ledger.skip(claim, now, SkippedOverlap(f"the job's previous execution still runs ({names}); overlap: skip"))

    return follow_first
