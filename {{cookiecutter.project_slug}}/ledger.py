"""The run ledger: the only code that touches Firestore; each write is one guarded move of dedup.py's state machine."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from typing import TypedDict

import google.auth.exceptions
from google.api_core import exceptions as api_exceptions
from google.api_core import retry as api_retry
from google.cloud import firestore
from google.cloud.firestore_v1.base_query import FieldFilter

import dedup
from config import Config
from keys import RERUN_ID_HEADER, Rerun, RunKey
from outcomes import (
    Duplicate,
    InProgress,
    InvalidDelivery,
    Misconfigured,
    SkippedLate,
    SkippedOverlap,
    StoreUnavailable,
    Superseded,
    quoted,
)
from run_context import RunContext

# Bounded time per Firestore call. Writes are never retried blind by the client: the delivery answers 5xx instead.
RPC_TIMEOUT_SECONDS = 5.0
READ_RETRY = api_retry.Retry(initial=0.1, maximum=1.0, multiplier=2.0, timeout=RPC_TIMEOUT_SECONDS)
# The audit's bookmark (AuditCursor), one document in the runs collection (the 1 MiB limit holds some 3,000 jobs):
# never a run id (not 64 hex characters), found by no status query (no status), kept (no expire_at).
AUDIT_CURSOR_ID = "audit-cursor"

# A guarded write's refusal (RecordChanged). Unexpected, the database is missing (googleapis/nodejs-firestore#2216,
# firebase/firebase-admin-node#2732) or in Datastore mode (quarkiverse/quarkus-google-cloud-services#422).
GUARD_FAILED = (api_exceptions.FailedPrecondition, api_exceptions.NotFound)
TEXT_LIMIT = 1500  # Firestore indexes a text's first 1,500 bytes: an error or a result is cut there (ended)
# The runs this instance saw done, newest last (RunLedger._done_key): a replay of one (often on the same instance)
# reads the record first instead of trying the create. It only orders the calls: the record read decides.
DONE_HERE_LIMIT = 4096
_done_here: dict[str, None] = {}
_done_here_lock = threading.Lock()


def remember_done(key: str) -> None:
    with _done_here_lock:
        _done_here.pop(key, None)  # moved to the newest
        _done_here[key] = None
        if len(_done_here) > DONE_HERE_LIMIT:
            del _done_here[next(iter(_done_here))]


def forget_done(key: str) -> bool:
    """True if it was remembered."""
    with _done_here_lock:
        return _done_here.pop(key, False) is None


class RunRecord(TypedDict, total=False):
    """A run's document in the runs collection, its id the run id: every field any write gives it."""

    status: str  # dedup.Status's value
    attempt_id: str  # the attempt that holds the lease
    attempts: int
    lease_expires: dt.datetime
    expire_at: dt.datetime  # the collection's TTL field: the record is deleted after it
    claimed_at: dt.datetime
    job_name: str  # the Scheduler job's name
    schedule_time: dt.datetime
    project: str
    location: str
    trigger: str  # keys.RunKey.trigger
    finished_at: dt.datetime  # completed, failed, skipped: when
    last_error: str  # failed, skipped: why
    result: str  # completed: what the work reported
    started_at: dt.datetime  # started (a proxy target): when its execution was started
    execution: str  # started: the execution's resource name
    starting_at: dt.datetime  # a proxy's intent (RunLedger.intend)
    released_at: dt.datetime  # a run with an intent, released for its retry
    rerun_id: str  # the re-run that holds or last held it
    reruns: list[dict[str, object]]  # one entry per re-run (_rerun_entry)
    dead_letters: int  # a Cloud Run job target's items that failed for good


def ended(status: dedup.Status, now: dt.datetime, last_error: str | None = None, result: object = None) -> RunRecord:
    """A run's end as its record says it: the status, when, and why (failed, skipped) or what it gave (completed)."""
    record = RunRecord(status=status.value, finished_at=now)
    if last_error is not None:
        record["last_error"] = last_error[:TEXT_LIMIT]
    if result is not None:
        record["result"] = str(result)[:TEXT_LIMIT]
    return record


@dataclasses.dataclass(frozen=True)
class Claim:
    """This attempt owns the run while the record's update time is still `write_time`."""

    key: RunKey
    attempt_id: str
    attempt: int
    write_time: dt.datetime
    taken_over_from: str | None = None  # the expired attempt's id, on a takeover
    rerun_id: str | None = None  # the re-run this claim runs, if it is one
    before_rerun: Mapping[str, object] | None = None
    starting_at: dt.datetime | None = None  # a proxy's intent (intend), inherited by takeovers

    def context(self, job_id: str | None) -> RunContext:
        return RunContext(
            run_id=self.key.run_id,
            job_id=job_id,
            job_name=self.key.job_name,
            schedule_time=self.key.schedule_time,
            attempt_id=self.attempt_id,
            attempt=self.attempt,
            project=self.key.project,
            location=self.key.location,
            trigger=self.key.trigger,
            rerun_id=self.rerun_id,
        )


@dataclasses.dataclass(frozen=True)
class StartedRun:
    """A run recorded `started`: a proxy target started its execution, whose end is not known yet."""

    run_id: str
    job_name: str
    schedule_time: dt.datetime
    execution: str  # the execution's full resource name
    write_time: dt.datetime  # the record's update time when read: ending it is guarded by it
    started_at: dt.datetime | None = None  # when the run was recorded started (None: a record older than the field)

    @classmethod
    def of(cls, snapshot) -> StartedRun:
        record = snapshot.to_dict()
        fields = (record["job_name"], record["schedule_time"], record["execution"], snapshot.update_time)
        return cls(snapshot.id, *fields, record.get("started_at"))

    def overdue(self, config: Config, now: dt.datetime) -> bool:
        """Its execution has run longer than its job's max_execution_seconds."""
        return self.started_at is not None and now - self.started_at > config.max_execution_for(self.job_name)


@functools.cache
def firestore_client(project: str, database: str) -> firestore.Client:
    """One client per process, made on first use (never at import: no network before a request)."""
    return firestore.Client(project=project, database=database)


@dataclasses.dataclass(frozen=True)
class AuditCursor:
    """The audit's bookmark (AUDIT_CURSOR_ID): job name -> {"since", "judged_until", "audited", "eras"} (audit.plan)."""

    jobs: Mapping[str, Mapping[str, dt.datetime]]
    last_full_sweep: dt.datetime | None = None
    update_time: dt.datetime | None = None  # None: not stored yet


class RecordChanged(Exception):
    """A guarded write's refusal: another writer changed or removed the record since the caller last saw it."""


class GuardedRecords:
    """The one way the protocol's records are written; guarded writes need no transaction."""

    def __init__(self, client: firestore.Client, call) -> None:
        self.client = client
        self._call = call  # firestore_call on the client's database

    def create(self, ref: firestore.DocumentReference, record: Mapping[str, object]) -> dt.datetime | None:
        """The new record's update time, or None if the record exists already."""
        try:
            return self._call(ref.create, record, retry=None, answers=(api_exceptions.AlreadyExists,)).update_time
        except api_exceptions.AlreadyExists:
            return None

    def update_if_unchanged(
        self, ref: firestore.DocumentReference, fields: Mapping[str, object], since: dt.datetime
    ) -> dt.datetime:
        """The record's new update time; RecordChanged if it changed or vanished since `since`."""
        option = self.client.write_option(last_update_time=since)
        try:
            return self._call(ref.update, fields, option=option, retry=None, answers=GUARD_FAILED).update_time
        except GUARD_FAILED:
            raise RecordChanged(ref.id) from None

    def delete_if_unchanged(self, ref: firestore.DocumentReference, since: dt.datetime) -> None:
        """RecordChanged if the record changed or vanished since `since`."""
        option = self.client.write_option(last_update_time=since)
        try:
            self._call(ref.delete, option=option, retry=None, answers=GUARD_FAILED)
        except GUARD_FAILED:
            raise RecordChanged(ref.id) from None


class RunLedger:
    """The run records in one Firestore collection, changed only through the protocol's transitions."""

    # Ids per BatchGetDocuments: a bounded request (~100 KB of document names) and a bounded answer.
    READ_BATCH = 1000

    def __init__(self, config: Config, client: firestore.Client | None = None) -> None:
        self.config = config
        try:
            self.client = client or firestore_client(config.project, config.database)
        except google.auth.exceptions.GoogleAuthError as error:  # no credentials: nothing can be claimed
            raise StoreUnavailable(f"no Firestore client: {type(error).__name__}: {_first_line(error)}") from error
        self.collection = self.client.collection(config.collection)
        self._call = functools.partial(firestore_call, database=config.database_name)
        self.records = GuardedRecords(self.client, self._call)

    def claim(self, key: RunKey, now: dt.datetime, rerun: Rerun | None = None) -> Claim:
        """Own the run (a scheduled replay: its time's Force run awaiting its retry), or raise the protocol's answer."""
        ref = self.collection.document(key.run_id)
        attempt_id = uuid.uuid4().hex
        done = self._done_key(key.run_id)  # the delivered run's
        read_first = done in _done_here  # DONE_HERE_LIMIT says why
        if not read_first:
            record = self._claim_record(key, attempt_id, attempt=1, now=now)
            if rerun is not None:
                record |= {"rerun_id": rerun.rerun_id, "reruns": [_rerun_entry(rerun, now, None)]}
            write_time = self.records.create(ref, record)
            if write_time is not None:
                return Claim(key, attempt_id, 1, write_time, rerun_id=rerun and rerun.rerun_id)
        forced = dataclasses.replace(key, manual=True)
        forced_ref = self.collection.document(forced.run_id)
        refs = [ref] if key.manual or rerun else [ref, forced_ref]
        snapshots = {s.id: s for s in self._call(self._get_all, refs, retry=READ_RETRY)}
        snapshot = snapshots[ref.id]
        manual = snapshots.get(forced.run_id)
        if manual is not None and manual.exists and dedup.awaits_retry(manual.to_dict(), now):
            key, ref, snapshot = forced, forced_ref, manual  # this delivery is the Force run's retry
        if not snapshot.exists and read_first and forget_done(done):
            return self.claim(key, now, rerun)  # gone since it ended here (its TTL, a person): the create claims it
        if not snapshot.exists:  # released between our create and our read: let the next retry claim it
            raise InProgress("the run was released while this delivery claimed it; retry")
        current = snapshot.to_dict()
        decision = dedup.decide(current, now, rerun and rerun.rerun_id)
        if decision is dedup.Decision.DUPLICATE:
            remember_done(done)
            if key.manual:
                raise Duplicate(
                    f"a manual run for {key.schedule_time.isoformat()} is already {current['status']}: a Force run "
                    "before a schedule time runs the work once; the scheduled run at that time still runs"
                )
            raise Duplicate(f"run already {current['status']}; the work does not run again")
        if decision is dedup.Decision.IN_PROGRESS and current["status"] == dedup.Status.STARTED:
            raise InProgress(
                f"the run's execution {current['execution']} still runs: a re-run waits until it is seen to end"
            )
        if decision is dedup.Decision.IN_PROGRESS:
            raise InProgress(f"attempt {current['attempt_id']} holds the lease until {current['lease_expires']}")
        attempt = int(current.get("attempts", 1)) + 1
        takeover = self._claim_record(key, attempt_id, attempt=attempt, now=now) | {
            "finished_at": firestore.DELETE_FIELD,
            "last_error": firestore.DELETE_FIELD,
            "result": firestore.DELETE_FIELD,
        }
        # An in_progress record's intent is inherited: its execution may have started (a proxy looks for it first).
        starting_at = current.get("starting_at") if current["status"] == dedup.Status.IN_PROGRESS else None
        if "starting_at" in current and starting_at is None:  # a finished run's: this attempt's start is its own
            takeover["starting_at"] = firestore.DELETE_FIELD
        reruns = current.get("reruns", [])
        fresh_rerun = rerun is not None and dedup.is_new_rerun(current, rerun.rerun_id)
        if fresh_rerun:
            reruns = [entry for entry in reruns if entry["rerun_id"] != rerun.rerun_id]  # a released one's retry
            if len(reruns) >= dedup.MAX_RERUNS:
                raise InvalidDelivery(
                    f"{RERUN_ID_HEADER}={quoted(rerun.rerun_id)}: run {key.run_id} was re-run {len(reruns)} times, "
                    f"the most its record keeps (dedup.MAX_RERUNS={dedup.MAX_RERUNS}); nothing ran"
                )
            replaced = {field: current.get(field) for field in [*takeover, "rerun_id"]}  # None: absent
            reruns = [*reruns, _rerun_entry(rerun, now, replaced)]
            takeover |= {"rerun_id": rerun.rerun_id, "reruns": reruns}
        try:
            write_time = self.records.update_if_unchanged(ref, takeover, since=snapshot.update_time)
        except RecordChanged:
            raise InProgress("another delivery took the run over first") from None
        rerun_id = rerun.rerun_id if fresh_rerun else current.get("rerun_id")
        return Claim(
            key,
            attempt_id,
            attempt,
            write_time,
            current["attempt_id"],
            rerun_id,
            _before_rerun(reruns, rerun_id),
            starting_at,
        )

    def complete(self, claim: Claim, now: dt.datetime, result: str | None = None) -> None:
        """Success; `result` is what the work reported (a proxy: the execution it started)."""
        self._finish(claim, ended(dedup.Status.COMPLETED, now, result=result))

    def fail(self, claim: Claim, reason: str, now: dt.datetime) -> None:
        """Terminal failure: record it, so replays stop; the work does not run again."""
        self._finish(claim, ended(dedup.Status.FAILED, now, reason))

    def skip_if_late(self, claim: Claim, now: dt.datetime) -> None:
        """Past max_lateness_seconds: record it `skipped`, raise SkippedLate (not a takeover nor a re-run)."""
        job = self.config.jobs.get(claim.key.job_name)
        limit = job.max_lateness if job else None
        late = now - claim.key.schedule_time
        if claim.rerun_id is not None or claim.taken_over_from is not None or limit is None or late <= limit:
            return
        second = dt.timedelta(seconds=1)
        reason = f"delivered {late // second} s after its schedule time, past max_lateness_seconds={limit // second}"
        self.skip(claim, now, SkippedLate(f"{reason}; the work does not run"))

    def intend(self, claim: Claim, now: dt.datetime) -> Claim:
        """A proxy's intent before its start call: the next attempt looks for its execution (executions.Handover)."""
        if claim.starting_at is not None:
            return claim
        write_time = self._finish(claim, RunRecord(starting_at=now))
        return dataclasses.replace(claim, write_time=write_time, starting_at=now)

    def start(self, claim: Claim, now: dt.datetime, execution: str) -> None:
        """A proxy target started `execution`: the run is `started` until it is seen to end (end_execution)."""
        started = RunRecord(status=dedup.Status.STARTED.value, started_at=now, execution=execution[:TEXT_LIMIT])
        self._finish(claim, started)

    def started_runs(self, now: dt.datetime, job_name: str | None = None) -> list[StartedRun]:
        """The unexpired `started` runs (few: the expiry is compared here), of one Scheduler job or of all."""
        found = self._with_status(dedup.Status.STARTED, job_name)
        return [StartedRun.of(s) for s in found if not dedup.expired(s.to_dict(), now)]

    def starting_runs(self, now: dt.datetime, job_name: str) -> list[tuple[str, dt.datetime]]:
        """(run id, update time: the order of the starts) of the job's in_progress runs with an intent, lease live."""
        return [
            (s.id, s.update_time)
            for s in self._with_status(dedup.Status.IN_PROGRESS, job_name)
            if "starting_at" in (record := s.to_dict()) and not dedup.lease_over(record, now)
        ]

    def stuck_runs(self, now: dt.datetime) -> list[tuple[str, dict[str, object]]]:
        """(run id, record) of the runs still `in_progress` after their lease expired (compared here: they are few)."""
        return [
            (s.id, record)
            for s in self._with_status(dedup.Status.IN_PROGRESS)
            if dedup.lease_over(record := s.to_dict(), now)
        ]

    def _with_status(self, status: dedup.Status, job_name: str | None = None) -> list:
        """Equality filters only: no composite index (firebase.google.com/docs/firestore/query-data/index-overview)."""
        query = self.collection.where(filter=FieldFilter("status", "==", status.value))
        if job_name is not None:
            query = query.where(filter=FieldFilter("job_name", "==", job_name))
        return self._call(lambda **kwargs: list(query.stream(**kwargs)), retry=READ_RETRY)  # as _get_all

    def end_execution(
        self,
        run: StartedRun,
        status: dedup.Status,
        now: dt.datetime,
        reason: str | None = None,
        details: Mapping[str, object] | None = None,
    ) -> bool:
        """Record how a started run's execution ended; False if another follower recorded it first."""
        fields = ended(status, now, reason) | (details or {})
        try:
            self.records.update_if_unchanged(self.collection.document(run.run_id), fields, since=run.write_time)
        except RecordChanged:
            return False
        return True

    def keep(self, run: StartedRun, now: dt.datetime) -> bool:
        """Keep a started run whose execution still runs from its TTL; False if it changed since it was read."""
        ref = self.collection.document(run.run_id)
        try:
            kept = RunRecord(expire_at=now + self.config.retention)
            self.records.update_if_unchanged(ref, kept, since=run.write_time)
        except RecordChanged:
            return False
        return True

    def dead_letters(self, run_id: str, at_most: int = 1000) -> int:
        """How many items of run `run_id` a Cloud Run job target's tasks dead-lettered (up to `at_most`)."""
        query = self.client.collection(self.config.dead_letters_collection)
        query = query.where(filter=FieldFilter("run_id", "==", run_id)).select([]).limit(at_most)
        return len(self._call(lambda **kwargs: list(query.stream(**kwargs)), retry=READ_RETRY))

    def skip(self, claim: Claim, now: dt.datetime, stop: SkippedLate | SkippedOverlap) -> None:
        """Record the run `skipped` with the stop's reason, then raise the stop: the work does not run."""
        self._finish(claim, ended(dedup.Status.SKIPPED, now, str(stop)))
        raise stop

    def release(self, claim: Claim) -> None:
        """Retryable failure: the next retry runs at once (a Force run or an intent keeps its record, lease ended)."""
        now = dedup.utcnow()
        if claim.starting_at is not None:
            self._finish(claim, RunRecord(lease_expires=now, released_at=now))
        elif claim.before_rerun is not None:
            reruns = [
                entry | {"released_at": now} if entry["rerun_id"] == claim.rerun_id else entry
                for entry in claim.before_rerun["reruns"]
            ]
            self._finish(claim, {**claim.before_rerun, "reruns": reruns})
        elif claim.key.manual:
            self._finish(claim, RunRecord(lease_expires=now))
        else:
            self._finish(claim, None)

    def read_runs(
        self, run_ids: Iterable[str], progress: Callable[[int, int], None] | None = None
    ) -> dict[str, dict[str, object]]:
        """The records of many runs by id, absent ones left out; progress(ids read, ids) after each batch."""
        ids = list(dict.fromkeys(run_ids))
        found: dict[str, dict[str, object]] = {}
        for start in range(0, len(ids), self.READ_BATCH):
            refs = [self.collection.document(run_id) for run_id in ids[start : start + self.READ_BATCH]]
            snapshots = self._call(self._get_all, refs, retry=READ_RETRY)
            found.update({snapshot.id: snapshot.to_dict() for snapshot in snapshots if snapshot.exists})
            if progress:
                progress(min(start + self.READ_BATCH, len(ids)), len(ids))
        return found

    def read_audit_cursor(self) -> AuditCursor:
        """The audit's bookmark (one read); before its first write, an empty one."""
        snapshot = self._call(self.collection.document(AUDIT_CURSOR_ID).get, retry=READ_RETRY)
        if not snapshot.exists:
            return AuditCursor({})
        stored = snapshot.to_dict()
        return AuditCursor(stored.get("jobs", {}), stored.get("last_full_sweep"), snapshot.update_time)

    def write_audit_cursor(self, cursor: AuditCursor) -> None:
        """Store the bookmark; RecordChanged if another audit moved it since `cursor` was read."""
        ref = self.collection.document(AUDIT_CURSOR_ID)
        fields = {"jobs": dict(cursor.jobs), "last_full_sweep": cursor.last_full_sweep}
        if cursor.update_time is None:
            if self.records.create(ref, fields) is None:
                raise RecordChanged(ref.id)
        else:
            self.records.update_if_unchanged(ref, fields, since=cursor.update_time)

    # get_all's stream is read inside the call, so that its errors are the call's.
    def _get_all(self, refs, **kwargs) -> list:
        return list(self.client.get_all(refs, **kwargs))

    def _done_key(self, run_id: str) -> str:
        """A run's name in the memory of runs done here (_done_here): its database, collection and id."""
        return f"{self.config.database}/{self.config.collection}/{run_id}"

    def _claim_record(self, key: RunKey, attempt_id: str, attempt: int, now: dt.datetime) -> RunRecord:
        return RunRecord(
            status=dedup.Status.IN_PROGRESS.value,
            attempt_id=attempt_id,
            lease_expires=now + self.config.lease_for(key.job_name),
            # From the later of now and the schedule time: a forced run keys a future time.
            expire_at=max(now, key.schedule_time) + self.config.retention,
            attempts=attempt,
            claimed_at=now,
            job_name=key.job_name,
            schedule_time=key.schedule_time,
            project=key.project,
            location=key.location,
            trigger=key.trigger,
        )

    def _finish(self, claim: Claim, fields: RunRecord | None) -> dt.datetime | None:
        """The claim's write (None: delete) and its update time; Superseded if another attempt took the run over."""
        ref = self.collection.document(claim.key.run_id)
        try:
            if fields is None:
                return self.records.delete_if_unchanged(ref, since=claim.write_time)
            write_time = self.records.update_if_unchanged(ref, fields, since=claim.write_time)
            if fields.get("status") in dedup.DONE:
                remember_done(self._done_key(claim.key.run_id))
            return write_time
        except RecordChanged:
            raise Superseded(
                f"attempt {claim.attempt_id} lost its lease to a newer attempt; its result is not recorded"
            ) from None


def firestore_call(method, *args, database: str, answers: tuple[type[Exception], ...] = (), **kwargs):
    """A Firestore call with a bounded time: its result, `answers`, Misconfigured or StoreUnavailable."""
    try:
        return method(*args, timeout=RPC_TIMEOUT_SECONDS, **kwargs)
    except answers:
        raise
    except GUARD_FAILED as error:  # not the call's answer: the database is missing or in Datastore mode
        raise Misconfigured(
            f"Firestore database {database} cannot hold the run records ({type(error).__name__}: "
            f"{_first_line(error)}): it does not exist or is in Datastore mode; see config.yaml's project and database"
        ) from error
    except api_exceptions.GoogleAPIError as error:
        raise StoreUnavailable(f"Firestore call failed: {type(error).__name__}: {_first_line(error)}") from error


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else ""


def _rerun_entry(rerun: Rerun, now: dt.datetime, replaced: Mapping[str, object] | None) -> dict[str, object]:
    """A re-run's entry in `reruns`: who, why, when, and the fields its takeover replaced (its release restores)."""
    entry: dict[str, object] = {"rerun_id": rerun.rerun_id, "by": rerun.by, "reason": rerun.reason, "at": now}
    if replaced is not None:
        entry |= {"previous_status": replaced["status"], "previous": dict(replaced)}
    return entry


def _before_rerun(reruns: list[Mapping[str, object]], rerun_id: str | None) -> dict[str, object] | None:
    """What the release of re-run `rerun_id` writes back; None if it created the record (its release deletes it)."""
    entry = next((entry for entry in reruns if entry["rerun_id"] == rerun_id and "previous" in entry), None)
    if entry is None:
        return None
    restored = {field: firestore.DELETE_FIELD if value is None else value for field, value in entry["previous"].items()}
    return restored | {"reruns": list(reruns)}
