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

An execution the API no longer has (NOT_FOUND: deleted, pruned) records its run `failed` like a failed one
(the line and the alert): it never blocks the job. Any other API error is raised once every other started run
has been followed: the delivery is released and retried.

The handover (Handover): before its start call a delivery writes its intent (RunLedger.intend), so whatever fails
between the start call and the `started` record (the answer lost, the record's write failed, the instance killed),
the record keeps it, and the next attempt of the run (a takeover, the retry after a release) first looks for an
execution of the run id started since then (job.find_execution) and records that one `started`: one scheduled
run, at most one execution.

Accounted for even when they do not end as they should:
- an execution that runs longer than its job's max_execution_seconds (rules.max_execution_seconds) is `overdue`:
  every audit logs one line for it (jsonPayload.audit_state "overdue": the `<slug>-run-overdue` metric and its
  alert, terraform/modules/scheduled-dedup/audit.tf) and keeps its record past the retention while it runs, so that
  its end is still recorded; `runs stuck` lists it; `overlap: skip` names it when it skips behind it;
- a Cloud Run job execution that succeeded although its tasks dead-lettered items (the target's `dead_letters`:
  a task exits 0 once each of its items is done or dead-lettered) is recorded `failed` with `dead_letters`, its
  line's execution_outcome `dead_lettered` (counted by the execution-failed metric, alerted the same).

The overlap rule (per job, config.Job.overlap): while an execution the job started earlier still
runs, or another run's start is in flight (its intent written before this one's), "skip" records the new run
`skipped` (outcome skipped_overlap, 2xx: Scheduler does not retry it) and starts nothing; "start" starts it anyway.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import logging
from collections.abc import Callable

from google.api_core import exceptions as api_exceptions

import dedup
from config import Config
from ledger import Claim, RunLedger, StartedRun
from outcomes import SkippedOverlap
from run_context import RunContext

logger = logging.getLogger(__name__)


class ExecutionEnd(enum.StrEnum):
    """How an execution ended: the `execution_outcome` of its log line."""

    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    DEAD_LETTERED = "dead_lettered"  # succeeded, yet items failed for good (a Cloud Run job target's dead letters)


@dataclasses.dataclass(frozen=True)
class Ended:
    how: ExecutionEnd
    detail: str = ""  # why it did not succeed, as the API says it
    dead_letters: int = 0  # the items its tasks dead-lettered


# An execution's end by its full resource name, or None while it runs (job.execution_end).
Poll = Callable[[str], Ended | None]
# The execution of a run id started since a time, or None (job.find_execution).
Find = Callable[[str, dt.datetime], str | None]
# How many items run `run_id`'s execution dead-lettered (job.dead_letters), or None: the target has no dead letters.
Letters = Callable[[str], int]
# How far an execution's create time, the API's clock, may be earlier than the intent's, the handler's.
CLOCK_SKEW = dt.timedelta(minutes=1)


def follow(
    ledger: RunLedger, now: dt.datetime, poll: Poll, job_name: str | None = None, letters: Letters | None = None
) -> list[StartedRun]:
    """Records every started run (of Scheduler job `job_name`, or of all) whose execution has ended; returns
    the ones still running. An execution the API no longer has is recorded failed; any other API error is raised
    after the others were followed: the delivery is released and retried."""
    running, errors = follow_each(ledger, now, poll, job_name, letters)
    if errors:
        raise errors[0]
    return running


def follow_each(
    ledger: RunLedger, now: dt.datetime, poll: Poll, job_name: str | None, letters: Letters | None
) -> tuple[list[StartedRun], list[Exception]]:
    """follow's work: the runs still running, and the errors of those whose state could not be read."""
    running, errors = [], []
    for started in ledger.started_runs(now, job_name):
        try:
            ended = poll(started.execution)
            if ended is not None and ended.how is ExecutionEnd.SUCCEEDED and letters is not None:
                ended = with_dead_letters(ledger, started, ended, letters(started.run_id))
        except api_exceptions.NotFound as error:  # deleted or pruned: its end is unknown, and never will be
            ended = Ended(ExecutionEnd.FAILED, f"the execution is gone (NOT_FOUND: deleted or pruned): {error.message}")
        except Exception as error:  # noqa: BLE001 - transient or not, it must not stop the others being followed
            errors.append(error)
            continue
        if ended is None:
            running.append(started)
            continue
        if ended.how is ExecutionEnd.SUCCEEDED:
            recorded = ledger.end_execution(started, dedup.Status.COMPLETED, now)
        else:
            reason = f"execution {started.execution} {ended.how.value}: {ended.detail or 'no detail given'}"
            details = {"dead_letters": ended.dead_letters} if ended.dead_letters else None
            recorded = ledger.end_execution(started, dedup.Status.FAILED, now, reason, details)
        if recorded:  # else another delivery recorded (and logged) it first
            log_end(started, ended)
    return running, errors


def with_dead_letters(ledger: RunLedger, started: StartedRun, ended: Ended, count: int) -> Ended:
    """A succeeded execution whose tasks dead-lettered `count` items: not done, though every task exited 0."""
    if not count:
        return ended
    where = f"{ledger.config.dead_letters_collection}, run_id {started.run_id}"
    detail = f"{count} item(s) dead-lettered ({where}); `python -m cloud_run_job verify {started.run_id}` names them"
    return Ended(ExecutionEnd.DEAD_LETTERED, detail, count)


def overdue_note(config: Config, run: StartedRun) -> str:
    bound = config.max_execution_for(run.job_name) // dt.timedelta(seconds=1)
    return f"running since {run.started_at.isoformat()}, past its max_execution_seconds {bound}: overdue"


def report_overdue(ledger: RunLedger, running: list[StartedRun], now: dt.datetime, audit_run_id: str) -> None:
    """The audit's line for each overdue run (its metric and alert), and its record kept while the execution runs."""
    for run in running:
        if not run.overdue(ledger.config, now):
            continue
        when = run.schedule_time.isoformat()
        line = f"scheduled run overdue: {run.job_name} at {when} (run_id {run.run_id}): execution {run.execution} "
        fields = {"job": run.job_name, "schedule_time": when, "run_id": run.run_id, "execution": run.execution}
        fields |= {"audit_state": "overdue", "audit_run_id": audit_run_id, "started_at": run.started_at.isoformat()}
        logger.warning(line + overdue_note(ledger.config, run), extra={"json_fields": fields})
        ledger.keep(run, now)


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


class Handover:
    """What a proxy's delivery does before its work, in the handler's process (it writes through `ledger`; only the
    start runs in a process of its own, stop.py): follows the executions started earlier, all of them for the audit
    job; for the job's own run, finds an execution an earlier attempt started (its intent inherited), else writes
    the intent and applies the overlap rule (SkippedOverlap, the run recorded `skipped`). `claim` is the claim as
    last written: its release and its `started` record are guarded by it."""

    def __init__(
        self,
        ledger: RunLedger,
        claim: Claim,
        config: Config,
        poll: Poll,
        find: Find | None,
        letters: Letters | None = None,
    ) -> None:
        self.ledger, self.claim, self.config, self.poll, self.find = ledger, claim, config, poll, find
        self.letters = letters

    def __call__(self, context: RunContext) -> str | None:
        """The run's execution if an earlier attempt started it (record it `started`, start nothing); else None."""
        now = dedup.utcnow()
        if context.job_name == self.config.audit_job:
            running, errors = follow_each(self.ledger, now, self.poll, None, self.letters)
            report_overdue(self.ledger, running, now, context.run_id)  # also when another could not be read
            if errors:
                raise errors[0]
            return None
        follow(self.ledger, now, self.poll, context.job_name, self.letters)
        if self.find is not None:  # None: the work starts no execution (a test's stand-in)
            if self.claim.starting_at is not None:
                found = self.find(context.run_id, self.claim.starting_at - CLOCK_SKEW)
                if found:
                    return found
            self.claim = self.ledger.intend(self.claim, now)
        job = self.config.jobs.get(context.job_name)
        if (job.overlap if job else "skip") == "skip":
            # Read after the intent, ordered by when each took effect (Firestore's commit times): of two runs starting
            # together, the later one's read sees the earlier one's intent and skips; the earlier one starts.
            mine = (self.claim.write_time, context.run_id)
            started = self.ledger.started_runs(now, context.job_name)
            notes = [f" ({overdue_note(self.config, run)})" if run.overdue(self.config, now) else "" for run in started]
            running = [run.execution + note for run, note in zip(started, notes, strict=True)]
            starting = [f"run {run_id} starting" for run_id, at in self.ledger.starting_runs(now, context.job_name)
                        if run_id != context.run_id and (at, run_id) < mine]  # fmt: skip
            if running or starting:
                names = ", ".join(running + starting)
                self.ledger.skip(
                    self.claim, now, SkippedOverlap(f"the job's previous execution still runs ({names}); overlap: skip")
                )
        return None
