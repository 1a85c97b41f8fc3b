"""The contract between the dedup protocol and the scheduled work: what a run is, and how work says "stop retrying"."""

from __future__ import annotations

import dataclasses
import datetime as dt


@dataclasses.dataclass(frozen=True)
class RunContext:
    """One claimed scheduled run, as the work sees it."""

    run_id: str  # 64-hex dedup key; pass it downstream as the idempotency token
    job_id: str | None  # as written in the answers (`nightly`); None for a Scheduler job config.yaml does not list
    job_name: str  # the Scheduler job name the run is keyed by, as Scheduler sends it: "<slug>-<job id>"
    schedule_time: dt.datetime  # the scheduled instant, in UTC; the same on every retry
    attempt_id: str  # this delivery's claim; differs on every attempt
    attempt: int  # 1 for a first claim, +1 per takeover of an expired lease (a released run starts at 1 again)
    project: str  # project and location the run is keyed under
    location: str
    trigger: str = "scheduled"  # or "manual": a Force run before its schedule time, keyed apart from the scheduled run
    # Set when a person asked this finished run to run once more (scheduled_dedup_tools.runs rerun): key side
    # effects by (run_id, rerun_id) to redo them, by run_id alone to keep them once.
    rerun_id: str | None = None


class TerminalJobError(Exception):
    """Raise from the work when retrying cannot help (bad input, a missing permission): the run is recorded `failed`
    and answered 2xx, so Scheduler stops; any other exception releases the run and answers 5xx, so Scheduler retries."""


class UnknownJob(Exception):
    """Raise from the work for a job it has no work for (job.py's WORK lacks its job id): the claim is released and
    the delivery answers `misconfigured` (5xx), so Scheduler retries until a deploy gives the job its work."""


@dataclasses.dataclass(frozen=True)
class Started:
    """Return from the work when it started something that runs on without it (a proxy target's execution): the run
    is recorded `started`, and later deliveries follow the execution and record `completed` or `failed` once it ends."""

    execution: str  # the execution's full resource name
