"""A deterministic discrete-event model of Cloud Scheduler delivering one scheduled run, one fault injected.

What is modelled, from Cloud Scheduler's documentation (sources in docs/choosing-the-numbers.md):
- the first attempt arrives at the fire time; each attempt fails when the handler answers non-2xx, when its
  connection breaks (the instance was SIGKILLed) or at the attempt deadline without an answer;
- after attempt i fails, the next comes rules.retry_wait_seconds(i) later (min_backoff doubling max_doublings
  times, then linear, capped at max_backoff), while retry_count or max_retry_duration allows
  (schedule_rules.SchedulerRetries.allowed: both limits must be reached to stop);
- the next fire time, under both documented readings: A "retries ... until the next scheduled execution time,
  whichever comes first" (a retry due then or later is dropped) and B "the next scheduled execution time might
  be skipped if the retries continue through that time" (retries go on; the next run is lost if this one's
  attempts or its work are still going at the next fire time).
What runs is the protocol's own code: every delivery calls the template's ledger.RunLedger (claim, which
uses dedup.decide; complete; release) on an in-memory Firestore with Firestore's preconditions (a create
fails if the document exists; an update or delete guarded by last_update_time fails if it changed). The
handler's branches are main.py's: a claimed run works, then completes (2xx); an exception releases the run
(500); Duplicate answers 2xx, InProgress 409. Work that hangs is stopped and the run released at
function_timeout_seconds: the baked handler kills it sooner, at the attempt deadline less 10 s (its stop.py,
config.Config.stop_after), so the simulation's hang lasts as long as one possibly could.

`python tests/scheduler_sim.py --table` prints the fault -> outcome table of each matrix bake.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import functools
import heapq
import importlib.util
import itertools
import sys
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from types import SimpleNamespace

from google.api_core import exceptions as api_exceptions
from google.cloud import firestore

ROOT = Path(__file__).resolve().parent.parent
TEMPLATE_PROJECT = ROOT / "{{cookiecutter.project_slug}}"
sys.path.insert(0, str(ROOT / "{{cookiecutter.project_slug}}"))

from scheduled_dedup_tools import schedule_rules  # noqa: E402

FIRE_TIME = dt.datetime(2026, 3, 29, 0, 0, tzinfo=dt.UTC)
# Safety stop for retries driven by max_retry_duration alone (their number is not bounded otherwise).
MAX_ATTEMPTS = 10_000


@functools.cache
def protocol() -> SimpleNamespace:
    """The template's protocol modules (dedup.py, ledger.py and what they import), rendered by cookiecutter's own
    Jinja environment with the default answers (they hold no Jinja, and the simulator passes its own config.Config),
    imported under private names so that no module of a bake on sys.path is shadowed."""
    from cookiecutter.environment import StrictEnvironment
    from cookiecutter.generate import generate_context
    from cookiecutter.prompt import prompt_for_config

    answers = prompt_for_config(generate_context(context_file=str(ROOT / "cookiecutter.json")), no_input=True)
    environment = StrictEnvironment(context={"cookiecutter": answers}, keep_trailing_newline=True)
    rendered = Path(tempfile.mkdtemp(prefix="scheduler-sim-"))
    modules = {}
    # In import order: each imports the ones before it by these names.
    dependencies = ("run_context", "rules", "schedules", "outcomes", "config", "keys", "dedup", "ledger")
    for name in dependencies:
        source = (TEMPLATE_PROJECT / f"{name}.py").read_text(encoding="utf-8")
        (rendered / f"{name}.py").write_text(environment.from_string(source).render(cookiecutter=answers))
        spec = importlib.util.spec_from_file_location(f"scheduler_sim_{name}", rendered / f"{name}.py")
        modules[name] = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
        previous = {dependency: sys.modules.get(dependency) for dependency in dependencies}
        sys.modules.update({dependency: modules[dependency] for dependency in dependencies if dependency in modules})
        try:
            spec.loader.exec_module(modules[name])
        finally:
            for dependency, module in previous.items():
                if module is None:
                    sys.modules.pop(dependency, None)
                else:
                    sys.modules[dependency] = module
    return SimpleNamespace(**modules)


# ---------------------------------------------------------------- an in-memory Firestore


@dataclasses.dataclass(frozen=True)
class Written:
    update_time: dt.datetime


@dataclasses.dataclass(frozen=True)
class Snapshot:
    exists: bool
    data: dict | None
    update_time: dt.datetime | None
    id: str = ""

    def to_dict(self) -> dict | None:
        return dict(self.data) if self.data is not None else None


@dataclasses.dataclass(frozen=True)
class LastUpdateTime:
    value: dt.datetime


class MemoryDocument:
    def __init__(self, store: MemoryFirestore, doc_id: str) -> None:
        self.store, self.id = store, doc_id

    def _check(self, option: LastUpdateTime | None) -> None:
        current = self.store.documents.get(self.id)
        if current is None:
            raise api_exceptions.NotFound(f"{self.id} not found")
        if option is not None and current[1] != option.value:
            raise api_exceptions.FailedPrecondition("the document changed since last_update_time")

    def create(self, data: dict, **_rpc) -> Written:
        if self.id in self.store.documents:
            raise api_exceptions.AlreadyExists(f"{self.id} exists")
        return self.store.write(self.id, dict(data))

    def get(self, **_rpc) -> Snapshot:
        current = self.store.documents.get(self.id)
        return Snapshot(current is not None, current and current[0], current and current[1], self.id)

    def update(self, fields: dict, option: LastUpdateTime | None = None, **_rpc) -> Written:
        self._check(option)
        data = dict(self.store.documents[self.id][0])
        for name, value in fields.items():
            if value is firestore.DELETE_FIELD:
                data.pop(name, None)
            else:
                data[name] = value
        return self.store.write(self.id, data)

    def delete(self, option: LastUpdateTime | None = None, **_rpc) -> None:
        self._check(option)
        del self.store.documents[self.id]


class MemoryCollection:
    def __init__(self, store: MemoryFirestore) -> None:
        self.store = store

    def document(self, doc_id: str) -> MemoryDocument:
        return MemoryDocument(self.store, doc_id)


class MemoryFirestore:
    """The few client calls ledger.RunLedger makes, with Firestore's preconditions; every write gets a new
    update time (the simulated clock plus a sequence, so two writes in one instant still differ)."""

    def __init__(self, clock: Callable[[], dt.datetime]) -> None:
        self.clock = clock
        self.documents: dict[str, tuple[dict, dt.datetime]] = {}
        self.writes = 0

    def collection(self, _name: str) -> MemoryCollection:
        return MemoryCollection(self)

    def get_all(self, refs: list[MemoryDocument], **_rpc) -> list[Snapshot]:
        return [ref.get() for ref in refs]

    def write_option(self, last_update_time: dt.datetime) -> LastUpdateTime:
        return LastUpdateTime(last_update_time)

    def write(self, doc_id: str, data: dict) -> Written:
        self.writes += 1
        stamp = self.clock() + dt.timedelta(microseconds=self.writes)
        self.documents[doc_id] = (data, stamp)
        return Written(stamp)


# ---------------------------------------------------------------- the model


# The faults one run may meet (schedule_rules.busy_after_one_fault's, in its order), as the tables show them.
FAULTS = (
    "none",
    "sigkill before the claim",
    "sigkill after the claim",  # at any second from the claim to the end of the work, before its finish
    "retryable error",  # at any second of the work
    "hang",
    "lost 2xx",
)


@dataclasses.dataclass(frozen=True)
class Fault:
    kind: str  # one of FAULTS
    at: int = 0  # seconds after the claim (sigkill after the claim, retryable error)

    def __str__(self) -> str:
        return (
            f"{self.kind} at {self.at} s" if self.kind in ("sigkill after the claim", "retryable error") else self.kind
        )


@dataclasses.dataclass
class Outcome:
    completed_at: int | None = None  # when the record became completed
    work_runs: list[tuple[int, int]] = dataclasses.field(default_factory=list)  # (start, end) of each work
    attempts: list[tuple[int, str]] = dataclasses.field(default_factory=list)  # (arrival, answer) per attempt
    scheduler_done_at: int | None = None  # the 2xx, or the failure after which no retry comes
    retry_dropped_at: int | None = None  # reading A: a retry due at or after the next fire time
    double_work: bool = False  # two attempts of this run working at once

    @property
    def busy_until(self) -> int:
        return max([end for _, end in self.work_runs] + [self.scheduler_done_at or 0])

    def verdict(self, gap: int) -> str:
        """'ok', or why one fault cost a run (this one, or the next one's slot); one of VERDICTS."""
        if self.double_work:
            return DOUBLE_WORK
        if self.completed_at is None:
            return LOST
        if self.scheduler_done_at is not None and self.scheduler_done_at >= gap:
            return LOST_NEXT
        if max(end for _, end in self.work_runs) >= gap:
            return OVERLAP
        return OK


# From worst to best: a table row shows the worst a fault can do.
DOUBLE_WORK = "DOUBLE WORK: two attempts worked at once"
LOST = "LOST: never completed"
LOST_NEXT = "LOST NEXT: Scheduler still on this run at the next fire time"
OVERLAP = "OVERLAP: still working at the next fire time"
OK = "ok"
VERDICTS = (DOUBLE_WORK, LOST, LOST_NEXT, OVERLAP, OK)


class Events:
    """A discrete-event clock from `start`: each action at a whole second; at one second, the lower priority first,
    then in the order they were set."""

    def __init__(self, start: dt.datetime) -> None:
        self.start, self.clock = start, 0
        self._queue: list[tuple[int, int, int, Callable[[], None]]] = []
        self._order = itertools.count()

    def at(self, seconds: int, priority: int, action: Callable[[], None]) -> None:
        heapq.heappush(self._queue, (seconds, priority, next(self._order), action))

    def now(self) -> dt.datetime:
        return self.start + dt.timedelta(seconds=self.clock)

    def run(self) -> None:
        while self._queue:
            self.clock, _, _, action = heapq.heappop(self._queue)
            action()


def memory_ledger(timing: Mapping[str, int], now: Callable[[], dt.datetime]) -> object:
    """The template's ledger.RunLedger with a job's numbers, on an in-memory Firestore whose clock is `now`."""
    protocol_modules = protocol()
    configuration = protocol_modules.config
    numbers = configuration.Job(  # the job's (sim-job is none of config.yaml's: the audit's numbers are any job's)
        job_id="sim_audit",
        schedule="0 * * * *",
        time_zone="Etc/UTC",
        attempt_deadline=dt.timedelta(seconds=timing["attempt_deadline_seconds"]),
        lease=dt.timedelta(seconds=timing["lease_seconds"]),
        retry_window=dt.timedelta(0),  # the audit's and max_lateness' settings: neither is simulated
        max_execution=dt.timedelta(days=1),
    )
    config = configuration.Config(
        slug="sim",
        project="sim-project",
        location="europe-west1",
        target="function",
        database="(default)",
        collection="runs",
        retention=dt.timedelta(seconds=timing["retention_seconds"]),
        audit_interval_minutes=60,
        jobs={},
        audit=numbers,
        defaults={},
    )
    return protocol_modules.ledger.RunLedger(config, client=MemoryFirestore(now))


def simulate(timing: Mapping[str, int], fault: Fault, gap: int, reading: str) -> Outcome:
    """One run, fired at 0 (FIRE_TIME), the next fire time `gap` s later, under reading "A" or "B"."""
    protocol_modules = protocol()
    keys, outcomes = protocol_modules.keys, protocol_modules.outcomes
    deadline, timeout = timing["attempt_deadline_seconds"], timing["function_timeout_seconds"]
    retries = schedule_rules.SchedulerRetries.of(timing)
    # At one instant the handler's own events (its work ending, its timeout, a kill: priority 0) come before
    # Scheduler's: a delivery at the very second a run is released or completed sees it so.
    loop = Events(FIRE_TIME)
    at, now = loop.at, loop.now
    ledger = memory_ledger(timing, now)
    key = keys.RunKey(ledger.config.project, ledger.config.location, "sim-job", FIRE_TIME)
    outcome = Outcome()
    working: dict[int, list] = {}  # attempt number -> [start, claim]; removed when its work stops
    answered: set[int] = set()  # attempts Scheduler has an answer for (or gave up on)

    def scheduler_failed(attempt: int) -> None:
        if attempt in answered:
            return
        answered.add(attempt)
        retry_at = loop.clock + retries.wait(attempt)
        if not retries.allowed(attempt + 1, retry_at) or attempt + 1 >= MAX_ATTEMPTS:
            outcome.scheduler_done_at = loop.clock
        elif reading == "A" and retry_at >= gap:
            outcome.retry_dropped_at = retry_at
            outcome.scheduler_done_at = loop.clock
        else:
            at(retry_at, 1, lambda: deliver(attempt + 1))

    def answer(attempt: int, status: int) -> None:
        if attempt in answered:  # past its deadline: Scheduler no longer listens
            return
        outcome.attempts.append((loop.clock, str(status)))
        if 200 <= status < 300:
            answered.add(attempt)
            outcome.scheduler_done_at = loop.clock
        else:
            scheduler_failed(attempt)

    def stop_work(attempt: int) -> None:
        start, _claim = working.pop(attempt)
        outcome.work_runs.append((start, loop.clock))

    def deliver(attempt: int) -> None:
        arrival = loop.clock
        at(arrival + deadline, 2, lambda: scheduler_failed(attempt))  # no answer by then: failed
        injected = fault if attempt == 0 else Fault("none")
        if injected.kind == "sigkill before the claim":
            outcome.attempts.append((arrival, "connection broken"))
            scheduler_failed(attempt)
            return
        try:
            claim = ledger.claim(key, now())
        except outcomes.Duplicate:
            return answer(attempt, 200)
        except outcomes.InProgress:
            return answer(attempt, 409)
        if working:
            outcome.double_work = True
        working[attempt] = [arrival, claim]
        work_ends = arrival + timeout + (1 if injected.kind == "hang" else 0)
        if injected.kind == "sigkill after the claim":
            at(arrival + injected.at, 0, lambda: killed(attempt))
        elif injected.kind == "retryable error":
            at(arrival + injected.at, 0, lambda: failed_work(attempt))
        if work_ends <= arrival + timeout:
            at(work_ends, 0, lambda: finished_work(attempt, lost=injected.kind == "lost 2xx"))
        else:  # the function's timeout stops the work and its exception releases the run
            at(arrival + timeout, 0, lambda: failed_work(attempt))

    def killed(attempt: int) -> None:
        if attempt in working:
            stop_work(attempt)
            outcome.attempts.append((loop.clock, "connection broken"))
            scheduler_failed(attempt)

    def failed_work(attempt: int) -> None:
        if attempt not in working:
            return
        claim = working[attempt][1]
        stop_work(attempt)
        try:
            ledger.release(claim)
            status = 500
        except outcomes.Superseded:  # superseded (main.py answers its outcome, 409)
            status = 409
        answer(attempt, status)

    def finished_work(attempt: int, lost: bool) -> None:
        if attempt not in working:
            return
        claim = working[attempt][1]
        stop_work(attempt)
        try:
            ledger.complete(claim, now())
            outcome.completed_at = loop.clock
            status = 200
        except outcomes.Superseded:
            status = 409
        if not lost:
            answer(attempt, status)

    at(0, 1, lambda: deliver(0))
    loop.run()
    return outcome


def faults(timing: Mapping[str, int]) -> dict[str, list[Fault]]:
    """Every fault of FAULTS, at every whole second it can strike (the healthy work lasts the whole
    function timeout, the longest there is)."""
    timeout = timing["function_timeout_seconds"]
    points = {kind: [Fault(kind)] for kind in FAULTS}
    points["sigkill after the claim"] = [Fault("sigkill after the claim", at) for at in range(timeout + 1)]
    points["retryable error"] = [Fault("retryable error", at) for at in range(timeout + 1)]
    return points


@dataclasses.dataclass(frozen=True)
class Row:
    fault: str
    verdict: str  # the worst over when it strikes and both readings
    busy_until: int  # the latest second the run kept busy
    example: str  # the fault and reading that were worst


def table(timing: Mapping[str, int], gap: int) -> list[Row]:
    """Per fault: the worst outcome over every moment it can strike, under both readings."""
    rows = []
    for kind, points in faults(timing).items():
        worst = None
        for fault in points:
            for reading in ("A", "B"):
                outcome = simulate(timing, fault, gap, reading)
                verdict = outcome.verdict(gap)
                rank = (-VERDICTS.index(verdict), outcome.busy_until)
                if worst is None or rank > worst[0]:
                    worst = (rank, Row(kind, verdict, outcome.busy_until, f"{fault}, reading {reading}"))
        rows.append(worst[1])
    return rows


def format_table(title: str, rows: list[Row]) -> str:
    lines = [title, f"  {'fault':<26} {'outcome':<60} {'busy until':>10}  worst case"]
    lines += [f"  {r.fault:<26} {r.verdict:<60} {r.busy_until:>8} s  {r.example}" for r in rows]
    return "\n".join(lines)


def matrix_answers() -> dict[str, dict[str, object]]:
    """Each matrix bake's answers as the hook checks them (cookiecutter renders the defaults around each bake's)."""
    import questions  # the hook's check of the answers (conftest puts hooks/ on the path)
    from conftest import MATRIX, rendered_answers

    return {name: questions.validate(rendered_answers(overrides)) for name, overrides in MATRIX.items()}


def bake_tables(name: str, checked: Mapping[str, object]) -> list[tuple[str, int, list[Row]]]:
    """(job, its smallest gap, its table) for each job of one bake."""
    tables = []
    for job_id, job in checked["jobs"].items():
        gap = schedule_rules.smallest_gap(job["schedule"], job["time_zone"], FIRE_TIME.date()).seconds
        tables.append(
            (f"{name} / {job_id} ({job['schedule']}, {job['time_zone']}, gap {gap} s)", gap, table(checked, gap))
        )
    return tables


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", action="store_true", help="print each matrix bake's fault -> outcome table")
    if not parser.parse_args().table:
        parser.print_help()
        return
    sys.path.insert(0, str(ROOT / "tests"))
    for name, checked in matrix_answers().items():
        for title, _gap, rows in bake_tables(name, checked):
            print(format_table(title, rows) + "\n")


if __name__ == "__main__":
    main()
