"""The scheduled work: start one Workflows execution, with the run id as its idempotency token.

The CreateExecution API ignores Cloud Scheduler's headers and takes no idempotency token, so the
handler is the idempotent proxy: the claim (ledger.py) lets one delivery per run get here, and the run id
travels in the execution's argument, where the workflow guards its side effect by it (workflow/workflow.yaml).
The run is recorded `started` with the execution's name; executions.py follows it until it ends
(execution_end) and records it `completed` or `failed`.
"""

import datetime as dt
import functools
import json
import logging
import os
import re

from google.cloud.workflows import executions_v1

from executions import Ended, ExecutionEnd
from run_context import RunContext, Started

logger = logging.getLogger(__name__)

WORKFLOW_NAME = re.compile(r"projects/[^/]+/locations/[^/]+/workflows/[^/]+")
# Each call starts a new execution, so the client never retries it blind: a failure releases the
# run, Cloud Scheduler retries the delivery, and the workflow dedups by run id anyway.
CALL_TIMEOUT_SECONDS = 30.0


@functools.cache
def executions_client() -> executions_v1.ExecutionsClient:
    """One client per process, made on first use (never at import: no network before a request)."""
    return executions_v1.ExecutionsClient()


def workflow_name() -> str:
    """A bad setting is retryable, not terminal: a deploy fixes it, and the run must still happen then."""
    value = os.environ.get("PROXY_WORKFLOW_NAME", "")
    if not WORKFLOW_NAME.fullmatch(value):
        raise ValueError(f"PROXY_WORKFLOW_NAME={value!r}: must be projects/PROJECT/locations/REGION/workflows/WORKFLOW")
    return value


def run(context: RunContext) -> Started:
    """Starts one execution (does not wait for it) and returns its name."""
    argument = {
        "run_id": context.run_id,
        "job_name": context.job_name,
        "schedule_time": context.schedule_time.isoformat().replace("+00:00", "Z"),
    }
    parent = workflow_name()  # checked before any client is made: nothing starts on a bad setting
    execution = executions_client().create_execution(
        parent=parent,
        execution=executions_v1.Execution(argument=json.dumps(argument)),
        retry=None,
        timeout=CALL_TIMEOUT_SECONDS,
    )
    logger.info("started workflow execution %s", execution.name, extra={"json_fields": {"execution": execution.name}})
    return Started(execution.name)


def find_execution(run_id: str, since: dt.datetime) -> str | None:
    """The execution of run `run_id` (its argument's run_id) started since `since`, or None (Executions.
    ListExecutions, a read, in the FULL view that holds the argument: "ordered by their start time (newest first)",
    cloud.google.com/workflows/docs/reference/executions/rest/v1/projects.locations.workflows.executions/list, so
    only the executions since then are read; a queued one has no start time yet)."""
    request = executions_v1.ListExecutionsRequest(parent=workflow_name(), view=executions_v1.ExecutionView.FULL)
    for execution in executions_client().list_executions(request=request, timeout=CALL_TIMEOUT_SECONDS):
        if execution.start_time and execution.start_time < since:
            return None
        if json.loads(execution.argument or "{}").get("run_id") == run_id:
            return execution.name
    return None


def execution_end(name: str) -> Ended | None:
    """How the execution ended, or None while it runs (Executions.GetExecution, a read: the client's own retry).

    Execution.State (google.cloud.workflows.executions.v1, "More states might be added in the future"):
    ACTIVE and QUEUED run on; SUCCEEDED, FAILED (`error` says why) and CANCELLED have ended; UNAVAILABLE
    ("Execution data is unavailable. See the state_error field") is reported as failed, so that a person
    looks; STATE_UNSPECIFIED or a newer state is followed on.
    """
    execution = executions_client().get_execution(name=name, timeout=CALL_TIMEOUT_SECONDS)
    state = executions_v1.Execution.State
    if execution.state == state.SUCCEEDED:
        return Ended(ExecutionEnd.SUCCEEDED)
    if execution.state == state.FAILED:
        return Ended(ExecutionEnd.FAILED, execution.error.payload.splitlines()[0] if execution.error.payload else "")
    if execution.state == state.CANCELLED:
        return Ended(ExecutionEnd.CANCELLED)
    if execution.state == state.UNAVAILABLE:
        return Ended(ExecutionEnd.FAILED, f"execution data unavailable: {execution.state_error.details}")
    return None
