"""HTTP adapter for Cloud Scheduler deliveries, the flow dedup.py draws: job.py's work (audit.py's for the audit job)
in a process stopped at the job's deadline (stop.py). One log line per delivery (plus a `takeover` line)."""

import functools
import logging
import time
from collections.abc import Callable, Mapping
from traceback import format_exc
from types import MappingProxyType

import flask
import functions_framework

import audit
import config as configuration
import dedup
import job
import stop
from job import run
from keys import read_rerun, read_run_key
from ledger import Claim, RunLedger
from outcomes import MethodNotAllowed, Outcome, RunNotProcessed, SkippedOverlap, SkippedPaused
from run_context import RunContext
from run_log import RUN_FIELDS, configure_logging

logger = logging.getLogger("scheduled_run")

# What Cloud Scheduler is answered for each outcome, and the log line's severity. Scheduler stops on a
# 2xx and retries anything else (operations.md, "What each HTTP status means to Cloud Scheduler").
ANSWERS: Mapping[Outcome, tuple[int, str]] = MappingProxyType({
    Outcome.PROCESSED: (200, "INFO"),
    Outcome.DUPLICATE: (200, "INFO"),
    Outcome.IN_PROGRESS: (409, "WARNING"),  # 409, never 503: keeps Scheduler's retries counting
    Outcome.INVALID_DELIVERY: (400, "WARNING"),
    Outcome.TERMINAL_FAILURE: (200, "ERROR"),  # 2xx so Scheduler stops retrying
    Outcome.RETRYABLE_FAILURE: (500, "ERROR"),
    Outcome.SUPERSEDED: (409, "WARNING"),
    Outcome.STORE_UNAVAILABLE: (500, "ERROR"),
    Outcome.MISCONFIGURED: (500, "ERROR"),  # retried until a deploy fixes it; then the run happens
    Outcome.SKIPPED_LATE: (200, "WARNING"),  # recorded `skipped`: 2xx so Scheduler stops
    Outcome.SKIPPED_DST_GAP: (200, "INFO"),  # the job's own rule (dst_gap: skip): 2xx so Scheduler stops
    Outcome.METHOD_NOT_ALLOWED: (405, "WARNING"),
    Outcome.SKIPPED_OVERLAP: (200, "WARNING"),  # recorded `skipped`: 2xx so Scheduler stops
    Outcome.SKIPPED_PAUSED: (200, "WARNING"),  # recorded `skipped`: 2xx so Scheduler stops
    Outcome.INTERNAL_ERROR: (500, "ERROR"),  # retried: the run's record, if any, was left to its lease
})  # fmt: skip

configure_logging()


@functions_framework.http
def handle_scheduled_job(request: flask.Request) -> tuple[str, int]:
    """Runs the scheduled work once per scheduled run, however often the run is delivered."""
    token = RUN_FIELDS.set({})
    try:
        outcome, detail = handle_delivery(request.headers, request.method)
    finally:
        RUN_FIELDS.reset(token)
    return f"{outcome}: {detail}\n", ANSWERS[outcome][0]


def handle_delivery(headers, method: str = "POST") -> tuple[Outcome, str]:
    now = dedup.utcnow()
    arrived = time.monotonic()
    try:
        if method != "POST":  # Cloud Scheduler's HTTP jobs send POST (scheduler.tf): anything else is not a delivery
            raise MethodNotAllowed(f"method {method!r}: only POST runs a job; nothing ran")
        config = configuration.current()
        key = read_run_key(headers, config, now)
        RUN_FIELDS.set(key.log_fields)
        rerun = read_rerun(headers)
        ledger = RunLedger(config)
        claim = ledger.claim(key, now, rerun)
        rerun_field = {"rerun_id": claim.rerun_id} if claim.rerun_id else {}
        # The claim's key: a scheduled delivery may be its time's Force run's retry (ledger.claim).
        RUN_FIELDS.set(claim.key.log_fields | {"attempt_id": claim.attempt_id, "attempt": claim.attempt} | rerun_field)
        if claim.taken_over_from:
            line = f"took the run over from attempt {claim.taken_over_from}, whose lease expired"
            logger.warning(line, extra={"json_fields": {"outcome": "takeover"}})
        paused = key.job_name in config.jobs and config.jobs[key.job_name].paused
        if paused and claim.rerun_id is None:  # a retry, a queued catch-up or backfill, a Force run: not the work
            ledger.skip(claim, now, SkippedPaused("the job is paused (config.yaml); the work does not run"))
        ledger.skip_if_late(claim, now)
        work = audit.run if key.job_name == config.audit_job else run
        if work is audit.run and (deployed := headers.get(audit.DEPLOYED_HEADER)):  # when the last apply changed
            work = functools.partial(audit.run, deployed=deployed)  # the schedules: its Scheduler job's header
        stop_at = arrived + config.stop_after(key.job_name).total_seconds()
        first = None
        if config.target != "function":  # a proxy target's job.py starts executions, which are followed
            import executions  # only a proxy target's bake has it

            # Here, with the ledger's client (only the start goes to the work's process): earlier executions, the
            # run's own, the intent, the overlap rule. A test's stand-in work starts nothing, so needs no look-up.
            find = job.find_execution if work is job.run else None
            letters = job.dead_letters if config.target == "cloud_run_job" else None  # items that failed for good
            first = executions.Handover(ledger, claim, config, job.execution_end, find, letters)
        outcome, detail, traceback = work_then_finish(ledger, claim, work, config.job_id(key.job_name), stop_at, first)
    except RunNotProcessed as refusal:
        outcome, detail, traceback = refusal.outcome, str(refusal), ""
    except Exception as error:  # the last resort: one outcome line, never a bare 500 (BaseException goes on)
        outcome, detail, traceback = Outcome.INTERNAL_ERROR, f"internal error: {error!r}", format_exc()
    http_status, severity = ANSWERS[outcome]
    logger.log(
        logging.getLevelNamesMapping()[severity],
        f"{detail}\n{traceback}".rstrip("\n"),
        extra={"json_fields": {"outcome": outcome.value, "http_status": http_status}},
    )
    return outcome, detail


# Runs the work until its deadline (stop.py); the in-process suites put stop.ending_of in its place.
run_until_stopped = stop.run_until_stopped


def work_then_finish(
    ledger: RunLedger, claim: Claim, work: Callable[[RunContext], object], job_id: str | None, stop_at: float, first
) -> tuple[Outcome, str, str]:
    """Runs `first` here (a proxy's executions.Handover: its `claim` is the claim from then on; it may name the run's
    execution, started already), then the work in its own process until `stop_at` (time.monotonic()), then records
    how it ended: the outcome, its one-line detail, and the work's traceback ("" if none)."""
    started = time.monotonic()
    context = claim.context(job_id)
    try:
        execution = first(context) if first is not None else None
        if execution:  # an earlier attempt of this run started it: it is recorded, nothing else starts
            ending = stop.Ending(stop.Ended.STARTED, execution=execution)
        else:
            preload = (audit.__name__, run.__module__)
            ending = run_until_stopped(work, context, RUN_FIELDS.get(), stop_at, preload=preload)
    except SkippedOverlap:  # from `first`: the overlap rule (the run is recorded `skipped` already)
        raise
    except RunNotProcessed:  # from `first`: a store error while following; release the claim for the retry
        ledger.release(getattr(first, "claim", claim))
        raise
    except Exception as error:  # from `first`: an API error while following; the run is released for a retry
        ending = stop.ending_after(error)
    finally:
        # How long the work took (not the finish), on the outcome line: the dashboard's distribution reads it.
        RUN_FIELDS.set(RUN_FIELDS.get() | {"duration_ms": round((time.monotonic() - started) * 1000)})
    claim = getattr(first, "claim", claim)  # as `first` last wrote it (its intent)
    record, outcome, detail = FINISHES[ending.how]
    record(ledger, claim, ending)
    traceback = ending.traceback if outcome is Outcome.RETRYABLE_FAILURE else ""
    return outcome, detail.format(ending=ending, ran=stop_at - started), traceback


def release(ledger: RunLedger, claim: Claim, ending: stop.Ending) -> None:
    ledger.release(claim)


RETRIED = "retryable failure, run released for a retry: "
# How each ending is recorded (the ledger's write), answered (ANSWERS) and told (formatted with the ending and `ran`,
# the work's time until its deadline). An unknown job's run is released: a deploy gives it work, the retry runs.
FINISHES: Mapping[stop.Ended, tuple[Callable[[RunLedger, Claim, stop.Ending], None], Outcome, str]] = MappingProxyType({
    stop.Ended.RETURNED: (lambda ledger, claim, ending: ledger.complete(claim, dedup.utcnow(), ending.result),
                          Outcome.PROCESSED, "run processed"),
    stop.Ended.STARTED: (lambda ledger, claim, ending: ledger.start(claim, dedup.utcnow(), ending.execution),
                         Outcome.PROCESSED, "run processed: started execution {ending.execution}"),
    stop.Ended.TERMINAL: (lambda ledger, claim, ending: ledger.fail(claim, ending.message, dedup.utcnow()),
                          Outcome.TERMINAL_FAILURE, "terminal failure, not retried: {ending.message}"),
    stop.Ended.UNKNOWN_JOB: (release, Outcome.MISCONFIGURED,
                             "no work for this job, run released for a retry: {ending.message}"),
    stop.Ended.RAISED: (release, Outcome.RETRYABLE_FAILURE, RETRIED + "{ending.error}"),
    stop.Ended.DIED: (release, Outcome.RETRYABLE_FAILURE,
                      RETRIED + "the work's process ended without an answer (exit code {ending.exit_code})"),
    stop.Ended.STOPPED: (release, Outcome.RETRYABLE_FAILURE,
                         RETRIED + "stopped at the job's deadline, {ran:.1f} s into the work"),
    stop.Ended.NOT_STARTED: (release, Outcome.RETRYABLE_FAILURE,
                             RETRIED + "the work's process could not start: {ending.error}"),
})  # fmt: skip
