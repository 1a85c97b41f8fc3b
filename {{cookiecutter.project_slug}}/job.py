{%- if cookiecutter.target == "function" -%}
"""The scheduled work: your room. Each job of your answers has its function below; replace its body.
It touches nothing but what the work needs.

Rules of the room:
- The work may be called again for the same scheduled run if an earlier attempt died after doing its
  effect but before recording it. Key every side effect by
  `context.run_id` (put-if-absent, or an idempotency token downstream) and a repeat is harmless.
- Raise `TerminalJobError` when retrying cannot help; raise anything else to get a retry.
- The work runs in a worker process apart from the handler's, killed at the job's attempt deadline less
  10 s (stop.py): no cleanup code runs then, so a repeat after a kill must be harmless too. A worker serves
  run after run, so a client you make at the first run (and keep in a module variable) serves the next ones.
  A run that leaves a process or a thread running, or changes the cwd, environment, a signal handler or the
  umask, gets its worker killed with all it started: wait for what you start, and the next run stays fast.
  Make no client and call no API at import: this module is imported once into the fork server.
- `WORK` gives each job id its function: `context.job_id` is the id as you wrote it, the same under
  `make fire` and deployed. A job WORK lacks is refused `misconfigured` and retried, so its runs still
  happen once a deploy gives it its work. Adding a job: its entry in config.yaml, a function, a line in WORK.
"""

import logging
from collections.abc import Callable

from run_context import RunContext, TerminalJobError, UnknownJob  # noqa: F401  (TerminalJobError: raise it from the work)

logger = logging.getLogger(__name__)
{#- A job's work function: its id as a Python name (a job id may start with a digit). #}
{%- macro work_function(job_id) %}{{ "job_" if job_id[0] in "0123456789" }}{{ job_id | replace("-", "_") }}_work{% endmacro %}
{%- for job_id in cookiecutter.jobs | sort %}


def {{ work_function(job_id) }}(context: RunContext) -> None:
    """The work of job {{ job_id }}, once per scheduled run."""
    logger.info("scheduled work for %s at %s", context.job_id, context.schedule_time.isoformat())
{%- endfor %}


# Job id -> its work.
WORK: dict[str, Callable[[RunContext], object]] = {
{%- for job_id in cookiecutter.jobs | sort %}
    {{ job_id | tojson }}: {{ work_function(job_id) }},
{%- endfor %}
}


def run(context: RunContext) -> object:
    """The work of the delivery's job."""
    work = WORK.get(context.job_id)
    if work is None:
        known = ", ".join(sorted(WORK))
        raise UnknownJob(f"job id {context.job_id!r} (Scheduler job {context.job_name!r}): not in job.WORK ({known})")
    return work(context)
{%- elif cookiecutter.target == "cloud_run_job" -%}
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

from executions import Ended, ExecutionEnd
from ledger import RunLedger
from run_context import RunContext, Started
from settings import DedupConfig

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
    return RunLedger(DedupConfig.from_env()).dead_letters(run_id)
{%- else -%}
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
{%- endif %}
