"""Has the execution that holds an item's lease ended? (Run v2 Executions.GetExecution, on this job.)

Two executions of one run id can meet at an item (a re-run after a cancelled or failed execution whose task was
killed holding it; an execution started beside the recorded one): the item's lease names the other's Cloud Run
execution (CLOUD_RUN_EXECUTION). Ended, or gone (NOT_FOUND), its lease is dead at once and the item is taken over;
running, it is waited for. The job's full name comes from PROXY_JOB_NAME (the name the handler starts it by,
set on the job by Terraform); the job's account reads its executions by roles/run.viewer on the job.
"""

from __future__ import annotations

import dataclasses
import enum
import functools
import os
import re

from google.api_core import exceptions as api_exceptions
from google.cloud import run_v2

JOB_NAME = re.compile(r"projects/[^/]+/locations/[^/]+/jobs/[^/]+")
CALL_TIMEOUT_SECONDS = 30.0


class HolderState(enum.StrEnum):
    ENDED = "ended"
    RUNNING = "running"
    UNKNOWN = "unknown"  # cannot be read: its lease is trusted until it expires


@dataclasses.dataclass(frozen=True)
class Holder:
    state: HolderState
    detail: str  # what the answer was, for the line that says why the item is waited for or taken over


@functools.cache
def executions_client() -> run_v2.ExecutionsClient:
    """One client per process, made on first use."""
    return run_v2.ExecutionsClient()


def holder(execution: str) -> Holder:
    """The state of this job's execution `execution` (a CLOUD_RUN_EXECUTION). Run v2's Execution has no state
    field: it has ended once completionTime is set (cloud.google.com/run/docs/reference/rest/v2/projects.locations.
    jobs.executions)."""
    job = os.environ.get("PROXY_JOB_NAME", "")
    if not JOB_NAME.fullmatch(job):
        return Holder(HolderState.UNKNOWN, f"PROXY_JOB_NAME={job!r} is not projects/P/locations/R/jobs/J")
    name = f"{job}/executions/{execution}"
    try:
        found = executions_client().get_execution(name=name, timeout=CALL_TIMEOUT_SECONDS)
    except api_exceptions.NotFound:
        return Holder(HolderState.ENDED, f"{name} is gone (NOT_FOUND: deleted or pruned)")
    except api_exceptions.GoogleAPIError as error:
        return Holder(HolderState.UNKNOWN, f"{name} cannot be read: {type(error).__name__}: {error}")
    if found.completion_time:
        return Holder(HolderState.ENDED, f"{name} ended at {found.completion_time.isoformat()}")
    return Holder(HolderState.RUNNING, f"{name} still runs")
