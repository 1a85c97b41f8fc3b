"""HTTP adapter for Cloud Scheduler deliveries: request -> run key -> claim -> work -> finish -> answer.

The protocol lives in dedup.py and the work in job.py (audit.py for the audit job's deliveries); this
file translates between HTTP and them, and writes one structured log line per delivery (plus a
`takeover` line when a lease is taken over), which carries the work's duration_ms when the work ran.
"""

import contextvars
import logging
import os
import sys
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType

import flask
import functions_framework
from functions_framework.exceptions import RequestTimeoutException
from google.cloud.logging.handlers import StructuredLogHandler

import audit
import dedup
{%- if cookiecutter.target != "function" %}
import executions
{%- endif %}
from job import {% if cookiecutter.target != "function" %}execution_end, {% endif %}run
from run_context import RunContext, Started, TerminalJobError, UnknownJob

logger = logging.getLogger("scheduled_run")

# What Cloud Scheduler is answered for each outcome, and the log line's severity. Scheduler stops on a
# 2xx and retries anything else (operations.md, "What each HTTP status means to Cloud Scheduler").
ANSWERS: Mapping[dedup.Outcome, tuple[int, str]] = MappingProxyType({
    dedup.Outcome.PROCESSED: (200, "INFO"),
    dedup.Outcome.DUPLICATE: (200, "INFO"),
    dedup.Outcome.IN_PROGRESS: (409, "WARNING"),  # 409, never 503: keeps Scheduler's retries counting
    dedup.Outcome.INVALID_DELIVERY: (400, "WARNING"),
    dedup.Outcome.TERMINAL_FAILURE: (200, "ERROR"),  # 2xx so Scheduler stops retrying
    dedup.Outcome.RETRYABLE_FAILURE: (500, "ERROR"),
    dedup.Outcome.SUPERSEDED: (409, "WARNING"),
    dedup.Outcome.STORE_UNAVAILABLE: (500, "ERROR"),
    dedup.Outcome.MISCONFIGURED: (500, "ERROR"),  # retried until a deploy fixes it; then the run happens
    dedup.Outcome.SKIPPED_LATE: (200, "WARNING"),  # recorded `skipped`: 2xx so Scheduler stops
    dedup.Outcome.SKIPPED_OVERLAP: (200, "WARNING"),  # recorded `skipped`: 2xx so Scheduler stops
})  # fmt: skip

# The run's identity, stamped on every line logged while a delivery is handled (the job's too).
RUN_FIELDS: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "run_fields", default=MappingProxyType({})
)


class RunFieldsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.json_fields = {**RUN_FIELDS.get(), **getattr(record, "json_fields", {})}
        return True


def configure_logging() -> None:
    """One JSON line on stdout per record, which Cloud Run turns into a structured entry: no Logging API
    call per line. Ours is the root logger's only handler: functions-framework (3.10.2, create_app)
    adds its own before it loads this file (with LOG_EXECUTION_ID, which the function gets, a handler
    on the WSGI error stream; with ENTRY_POINT, two more), and each would print every record again,
    without severity or outcome: twice the log volume and its cost."""
    handler = StructuredLogHandler(stream=sys.stdout)
    handler.addFilter(RunFieldsFilter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)


configure_logging()


@functions_framework.http
def handle_scheduled_job(request: flask.Request) -> tuple[str, int]:
    """Runs the scheduled work once per scheduled run, however often the run is delivered."""
    token = RUN_FIELDS.set({})
    try:
        outcome, detail = handle_delivery(request.headers)
    finally:
        RUN_FIELDS.reset(token)
    return f"{outcome}: {detail}\n", ANSWERS[outcome][0]


def handle_delivery(headers) -> tuple[dedup.Outcome, str]:
    now = dedup.utcnow()
    try:
        config = dedup.DedupConfig.from_env()
        key = dedup.read_run_key(headers, config, now)
        RUN_FIELDS.set({"run_id": key.run_id, "job": key.job_name, "schedule_time": key.schedule_time.isoformat()})
        rerun = dedup.read_rerun(headers)
        ledger = dedup.RunLedger(config)
        claim = ledger.claim(key, now, rerun)
        RUN_FIELDS.set(RUN_FIELDS.get() | {"attempt_id": claim.attempt_id, "attempt": claim.attempt})
        if claim.rerun_id:
            RUN_FIELDS.set(RUN_FIELDS.get() | {"rerun_id": claim.rerun_id})
        if claim.taken_over_from:
            logger.warning(
                "took the run over from attempt %s, whose lease expired",
                claim.taken_over_from,
                extra={"json_fields": {"outcome": "takeover"}},
            )
        ledger.skip_if_late(claim, now)
        work = audit.run if key.job_name == config.audit_job else run
{%- if cookiecutter.target != "function" %}
        # First the executions started earlier: recorded once ended; the job's overlap rule if one still runs.
        work = executions.following(ledger, claim, config, work, execution_end)
{%- endif %}
        outcome, detail, error = work_then_finish(ledger, claim, work, config.job_id(key.job_name))
    except dedup.RunNotProcessed as stop:
        outcome, detail, error = stop.outcome, str(stop), None
    except RequestTimeoutException:  # the stop landed in a claim or finish call (see work_then_finish)
        outcome = dedup.Outcome.RETRYABLE_FAILURE
        detail = f"{stopped_at_the_timeout()} during a Firestore call; a claim it made waits for its lease"
        error = None
    http_status, severity = ANSWERS[outcome]
    logger.log(
        logging.getLevelNamesMapping()[severity],
        detail,
        exc_info=error,
        extra={"json_fields": {"outcome": outcome.value, "http_status": http_status}},
    )
    return outcome, detail


def work_then_finish(
    ledger: dedup.RunLedger, claim: dedup.Claim, work: Callable[[RunContext], object], job_id: str | None
) -> tuple[dedup.Outcome, str, BaseException | None]:
    """Runs the work, then records how it ended; the raised error, if any, goes into the log line."""
    started = time.monotonic()
    try:
        try:
            result = work(claim.context(job_id))
        finally:
            # How long the work took (not the finish), on the outcome line: the dashboard's distribution reads it.
            RUN_FIELDS.set(RUN_FIELDS.get() | {"duration_ms": round((time.monotonic() - started) * 1000)})
    except dedup.SkippedOverlap:  # a proxy's overlap rule, recorded `skipped` already: the delivery's outcome
        raise
    except TerminalJobError as error:
        ledger.fail(claim, str(error), dedup.utcnow())
        return dedup.Outcome.TERMINAL_FAILURE, f"terminal failure, not retried: {error}", None
    except UnknownJob as error:  # a deploy gives the job its work: keep the run for the retry after it
        ledger.release(claim)
        return dedup.Outcome.MISCONFIGURED, f"no work for this job, run released for a retry: {error}", None
    except RequestTimeoutException as error:  # raised into the work by functions-framework: see below
        ledger.release(claim)
        return (
            dedup.Outcome.RETRYABLE_FAILURE,
            f"{stopped_at_the_timeout()} in the work; run released for a retry",
            error,
        )
    except Exception as error:
        ledger.release(claim)
        detail = f"retryable failure, run released for a retry: {type(error).__name__}: {error}"
        return dedup.Outcome.RETRYABLE_FAILURE, detail, error
    if isinstance(result, Started):  # a proxy target: followed until the execution ends
        ledger.start(claim, dedup.utcnow(), result.execution)
        return dedup.Outcome.PROCESSED, f"run processed: started execution {result.execution}", None
    ledger.complete(claim, dedup.utcnow(), result)
    return dedup.Outcome.PROCESSED, "run processed", None


def stopped_at_the_timeout() -> str:
    """functions-framework (3.10.2, functions_framework/request_timeout.py) stops a request that outlives
    CLOUD_RUN_TIMEOUT_SECONDS by raising RequestTimeoutException in its thread, at the next Python
    instruction: a call blocked in C code (a socket read, time.sleep) is stopped only once it returns.
    The Terraform sets the variables that switch this on (function.tf, environment_variables)."""
    return f"stopped at the request timeout (CLOUD_RUN_TIMEOUT_SECONDS={os.environ.get('CLOUD_RUN_TIMEOUT_SECONDS')})"
