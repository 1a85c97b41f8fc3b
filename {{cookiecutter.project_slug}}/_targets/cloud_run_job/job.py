"""The scheduled work: start one execution of the Cloud Run job, with the run id as its idempotency token.

The RunJob API ignores Cloud Scheduler's headers and takes no idempotency token, so the handler is the
idempotent proxy: the claim (ledger.py) lets one delivery per run get here, and the run id travels in
the execution's environment (DEDUP_RUN_ID), where the job keys every output by it (cloud_run_job/).
The run is recorded `started` with the execution's name; executions.py follows it until it ends
(execution_end) and records it `completed` or `failed`. The job's own retries happen inside it.
"""

import datetime as dt
import functools
import logging
import os
import re

from google.cloud import run_v2

import config
from executions import Ended, ExecutionEnd
from ledger import RunLedger
from run_context import RunContext, Started

logger = logging.getLogger(__name__)

JOB_NAME = re.compile(r"projects/[^/]+/locations/[^/]+/jobs/[^/]+")
# RunJob starts a new execution on every call, so the client never retries it blind: a failure
# releases the run, Cloud Scheduler retries the delivery, and the job dedups by run id anyway.
CALL_TIMEOUT_SECONDS = 30.0


@functools.cache
def jobs_client() -> run_v2.JobsClient:
    """One client per process, made on first use (never at import: no network before a request)."""
    return run_v2.JobsClient()


@functools.cache
def executions_client() -> run_v2.ExecutionsClient:
    """One client per process, made on first use (never at import: no network before a request)."""
    return run_v2.ExecutionsClient()


def job_name() -> str:
    """A bad setting is retryable, not terminal: a deploy fixes it, and the run must still happen then."""
    value = os.environ.get("PROXY_JOB_NAME", "")
    if not JOB_NAME.fullmatch(value):
        raise ValueError(f"PROXY_JOB_NAME={value!r}: must be projects/PROJECT/locations/REGION/jobs/JOB")
    return value


def run(context: RunContext) -> Started:
    """Starts one execution (does not wait for it) and returns its name."""
    env = [
        run_v2.EnvVar(name="DEDUP_RUN_ID", value=context.run_id),
        run_v2.EnvVar(name="DEDUP_SCHEDULE_TIME", value=context.schedule_time.isoformat().replace("+00:00", "Z")),
    ]
    overrides = run_v2.RunJobRequest.Overrides
    request = run_v2.RunJobRequest(
        name=job_name(),
        overrides=overrides(container_overrides=[overrides.ContainerOverride(env=env)]),
    )
    operation = jobs_client().run_job(request=request, retry=None, timeout=CALL_TIMEOUT_SECONDS)
    execution = operation.metadata.name if operation.metadata else operation.operation.name
    logger.info("started Cloud Run job execution %s", execution, extra={"json_fields": {"execution": execution}})
    return Started(execution)


def find_execution(run_id: str, since: dt.datetime) -> str | None:
    """The execution of run `run_id` (its DEDUP_RUN_ID) created since `since`, or None (Executions.ListExecutions, a
    read: "sorted by creation time, descending", cloud.google.com/run/docs/reference/rest/v2/projects.locations.
    jobs.executions/list, so only the executions since then are read). An execution's template holds the
    environment it was started with: RunJob's overrides "will be applied to update the execution or task spec", and a
    container override's env "will be merged with existing env" (run/docs/reference/rest/v2/projects.locations.jobs/
    run, Overrides and ContainerOverride)."""
    for execution in executions_client().list_executions(parent=job_name(), timeout=CALL_TIMEOUT_SECONDS):
        if execution.create_time and execution.create_time < since:
            return None
        env = {var.name: var.value for container in execution.template.containers for var in container.env}
        if env.get("DEDUP_RUN_ID") == run_id:
            return execution.name
    return None


def execution_end(name: str) -> Ended | None:
    """How the execution ended, or None while it runs (Executions.GetExecution, a read: the client's own retry).

    Run v2's Execution has no state field: it has ended once completionTime is set, and its task counts
    (cancelledCount, failedCount, succeededCount of taskCount) say how; the `Completed` condition's message
    says why it failed (cloud.google.com/run/docs/reference/rest/v2/projects.locations.jobs.executions).
    """
    execution = executions_client().get_execution(name=name, timeout=CALL_TIMEOUT_SECONDS)
    if not execution.completion_time:
        return None
    why = next((c.message for c in execution.conditions if c.type_ == "Completed" and c.message), "")
    if execution.cancelled_count:
        return Ended(ExecutionEnd.CANCELLED, why or f"{execution.cancelled_count} task(s) cancelled")
    if execution.failed_count or execution.succeeded_count < execution.task_count:
        counts = f"{execution.failed_count} of {execution.task_count} task(s) failed"
        return Ended(ExecutionEnd.FAILED, f"{counts}: {why}" if why else counts)
    return Ended(ExecutionEnd.SUCCEEDED)


def dead_letters(run_id: str) -> int:
    """How many items of run `run_id` the job's tasks dead-lettered: a task exits 0 once each of its items is done or
    dead-lettered (cloud_run_job/task.py), so a succeeded execution may still have failed items
    (executions.with_dead_letters records the run failed)."""
    return RunLedger(config.current()).dead_letters(run_id)
