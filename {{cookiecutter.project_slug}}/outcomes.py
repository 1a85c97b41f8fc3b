"""What happened to one delivery: each outcome's name, one name from the decision to the log line, and the exception
that ends a delivery with it (main.py gives each outcome its HTTP status and log severity)."""

from __future__ import annotations

import enum


class Outcome(enum.StrEnum):
    PROCESSED = "processed"
    DUPLICATE = "duplicate"  # the run is finished already; the work does not run again
    IN_PROGRESS = "in_progress"  # another attempt holds a live lease
    INVALID_DELIVERY = "invalid_delivery"
    TERMINAL_FAILURE = "terminal_failure"
    RETRYABLE_FAILURE = "retryable_failure"
    SUPERSEDED = "superseded"  # this attempt's lease expired and another took the run over
    STORE_UNAVAILABLE = "store_unavailable"
    MISCONFIGURED = "misconfigured"  # a setting of config.yaml, its database or the work for a job: a deploy fixes it
    SKIPPED_LATE = "skipped_late"  # past max_lateness_seconds: recorded `skipped`, the work does not run
    SKIPPED_DST_GAP = "skipped_dst_gap"  # a time the clocks skip, of a job with dst_gap: skip; nothing written
    METHOD_NOT_ALLOWED = "method_not_allowed"  # not a POST: Cloud Scheduler's HTTP jobs send POST (terraform/)
    SKIPPED_OVERLAP = "skipped_overlap"  # the job's previous execution still runs (overlap: skip): recorded `skipped`
    SKIPPED_PAUSED = "skipped_paused"  # the job is paused (config.yaml) and this is no re-run: recorded `skipped`
    INTERNAL_ERROR = "internal_error"  # the last resort: an exception no rule foresaw (main.py); a retry may pass


class RunNotProcessed(Exception):
    """The delivery ends without this attempt finishing the work; one subclass per outcome, named after it."""

    outcome: Outcome


class InvalidDelivery(RunNotProcessed):
    outcome = Outcome.INVALID_DELIVERY


class Duplicate(RunNotProcessed):
    outcome = Outcome.DUPLICATE


class InProgress(RunNotProcessed):
    outcome = Outcome.IN_PROGRESS


class Superseded(RunNotProcessed):
    outcome = Outcome.SUPERSEDED


class StoreUnavailable(RunNotProcessed):
    outcome = Outcome.STORE_UNAVAILABLE


class Misconfigured(RunNotProcessed, ValueError):
    outcome = Outcome.MISCONFIGURED


class SkippedLate(RunNotProcessed):
    outcome = Outcome.SKIPPED_LATE


class SkippedDstGap(RunNotProcessed):
    outcome = Outcome.SKIPPED_DST_GAP


class MethodNotAllowed(RunNotProcessed):
    outcome = Outcome.METHOD_NOT_ALLOWED


class SkippedOverlap(RunNotProcessed):
    outcome = Outcome.SKIPPED_OVERLAP


class SkippedPaused(RunNotProcessed):
    outcome = Outcome.SKIPPED_PAUSED


def quoted(value: str) -> str:
    """A value fit for a one-line reason: escaped, and cut short (a header reaches 80 KB)."""
    return repr(value[:80] + ("..." if len(value) > 80 else ""))
