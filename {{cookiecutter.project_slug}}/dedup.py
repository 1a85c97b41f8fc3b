"""Each Cloud Scheduler run exactly once: the claim protocol's state machine.

A delivery flows one way (main.py): request -> run key (keys.py) -> claim -> work -> finish (ledger.py, the only
module that touches Firestore) -> answer (outcomes.py names it). A run's record moves through these statuses,
and `decide` is the one choice a delivery makes on a record it finds:

    absent ──create──▶ in_progress ──complete──▶ completed    replays: duplicate, the work does not run
                          │ ├──fail (terminal)──▶ failed       replays: duplicate, the work does not run
                          │ ├──skip (too late)──▶ skipped      delivered past the job's max_lateness_seconds
                          │ ├──start (a proxy)──▶ started ──execution ended──▶ completed | failed
                          │                  (a proxy bake follows it: the job's next delivery, the audit;
                          │                   a re-run of it is answered in_progress until then)
                          │ └──release (retryable)──▶ absent   the next retry runs at once
                          └──lease expired──▶ taken over by the next delivery (new attempt_id)
    A record past expire_at counts as absent: Firestore's TTL deletes it lazily, often a day later.
    A re-run (an X-Rerun-Id the record does not hold) takes a finished run over once; its release restores the
    record as it was before it. A Force run's release ends its lease and keeps it in_progress: its retry, even
    one delivered after its schedule time, takes the manual run over (awaits_retry).

Every write is conditional, so no transaction is needed: the claim is a create (fails if the run exists), a
takeover and every finish are guarded by the update time the claim last wrote, so an attempt whose lease was taken
over cannot overwrite or delete its successor's record. Cost: a fresh run is 2 RPCs (create, finish), a replay 2
(create, one read of the run and of its time's Force run), a takeover 4."""

from __future__ import annotations

import datetime as dt
import enum
from collections.abc import Mapping

from outcomes import Outcome

# Re-runs one record keeps (`reruns`: some 4 KB, far below Firestore's 1 MiB document limit); one more is refused.
MAX_RERUNS = 100


class Status(enum.StrEnum):
    IN_PROGRESS = "in_progress"
    COMPLETED = "completed"
    FAILED = "failed"
    SKIPPED = "skipped"  # delivered past max_lateness_seconds, or while the job's execution ran (overlap: skip)
    STARTED = "started"  # a proxy target started the run's execution; how it ends is not known yet


# The statuses in which the work does not run again: a duplicate, unless a new re-run reopens it (decide).
DONE = (Status.COMPLETED, Status.FAILED, Status.SKIPPED, Status.STARTED)


class Decision(enum.Enum):
    """What a delivery may do with the record it found; the last two end as the outcome of their name."""

    TAKE_OVER = "take_over"
    DUPLICATE = Outcome.DUPLICATE.value
    IN_PROGRESS = Outcome.IN_PROGRESS.value


def decide(record: Mapping[str, object], now: dt.datetime, rerun_id: str | None = None) -> Decision:
    """What a delivery (of re-run `rerun_id`, if one) may do with the run's existing record."""
    if expired(record, now):
        return Decision.TAKE_OVER
    if record["status"] == Status.STARTED and is_new_rerun(record, rerun_id):
        return Decision.IN_PROGRESS  # its execution may still run: a re-run waits until it is seen to end
    if record["status"] in DONE:
        return Decision.TAKE_OVER if is_new_rerun(record, rerun_id) else Decision.DUPLICATE
    if not lease_over(record, now):
        return Decision.IN_PROGRESS
    return Decision.TAKE_OVER


def expired(record: Mapping[str, object], now: dt.datetime) -> bool:
    """TTL deletes lazily: a record counts as absent from its expire_at on."""
    return record["expire_at"] <= now


def lease_over(record: Mapping[str, object], now: dt.datetime) -> bool:
    """An in_progress record's attempt holds the run until lease_expires; then another delivery may take it over."""
    return record["lease_expires"] <= now


def is_new_rerun(record: Mapping[str, object], rerun_id: str | None) -> bool:
    """A re-run whose id the record's `reruns` does not hold: it reopens a finished run. A late retry of one it holds
    is a replay (the work runs once per re-run id), unless that id was released: its retry is owed the run."""
    return rerun_id is not None and rerun_id not in {
        entry["rerun_id"] for entry in record.get("reruns", ()) if "released_at" not in entry
    }


def awaits_retry(record: Mapping[str, object], now: dt.datetime) -> bool:
    """A Force run's record left in_progress with its lease over (released after a retryable failure, or its
    attempt died): a delivery of its schedule time takes it over as the manual run, or Scheduler's retry of the
    Force run, dated its (now past) schedule time, would be the scheduled run: one execution where two are due."""
    return record["status"] == Status.IN_PROGRESS and lease_over(record, now) and not expired(record, now)


def utcnow() -> dt.datetime:
    """The protocol's clock: the handler's, the audit's and the followers' (a test moves it here)."""
    return dt.datetime.now(dt.UTC)
