"""A deterministic discrete-event model of a herd: every job of one minute fired at once at a function of a given
capacity (instances x concurrency), Cloud Run's 429s and Cloud Scheduler's retry waves modelled.

What is modelled, from Google's documentation:
- Cloud Scheduler sends each job's first attempt at the fire time; a non-2xx answer fails the attempt, and the next
  comes rules.retry_wait_seconds later while the retry policy allows (schedule_rules.SchedulerRetries, as
  tests/scheduler_sim.py uses it);
- the function serves at most max_instance_count x max_instance_request_concurrency requests at once; a request past
  that waits for a free one at most 10 s, then fails with 429 ("If no instances become available ... the request
  fails with a 429 error code", the longer of 3.5 x the average start-up time and 10 s:
  https://cloud.google.com/run/docs/about-instance-autoscaling, "Exceeding maximum instances"); instances start at
  once (no cold start is modelled: it only delays, never refuses);
- a served request is the handler's protocol: ledger.RunLedger's claim (the template's dedup.py and ledger.py, on
  scheduler_sim's in-memory Firestore), the work for `work_seconds`, then complete (2xx); `duplicate` answers 2xx,
  a run in progress 409.
An execution is a work that ran; a run is missing when no work completed it, a duplicate when two works ran it.

`python benchmarks/herd.py --jobs 1000` prints its table: the capacity from the rules, and the module's default.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import itertools
import sys
from collections.abc import Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "{{cookiecutter.project_slug}}"))  # rules.py

import rules  # noqa: E402
import scheduler_sim  # noqa: E402
from scheduled_dedup_tools import schedule_rules  # noqa: E402

FIRE_TIME = dt.datetime(2026, 12, 3, 3, 0, tzinfo=dt.UTC)
# Cloud Run holds a request past the capacity this long before its 429 (the page above: at least 10 s).
PENDING_SECONDS = 10
AUDIT = "audit"  # the audit's own run, which fires on the hour with the herd (schedule_rules.schedule_herd counts it)


@dataclasses.dataclass
class HerdOutcome:
    jobs: int
    capacity: int
    executions: int = 0  # the jobs' works that ran
    missing: int = 0  # the jobs' runs no work completed
    duplicates: int = 0  # runs worked more than once (the audit's included)
    audit: str = "missing"  # whether the audit's run completed
    too_many: int = 0  # 429s
    attempts: int = 0
    waves: list[int] = dataclasses.field(default_factory=list)  # per second a run started at: how many
    last_start: int = 0  # when the last work started (s after the fire time)

    def row(self, label: str) -> str:
        return (
            f"  {label:<26} {self.capacity:>8} {self.executions:>10} {self.missing:>7} {self.duplicates:>10} "
            f"{self.audit:>7} {self.too_many:>6} {self.attempts:>8} {len(self.waves):>6} {self.last_start:>8} s"
        )


HEADER = (
    f"  {'capacity from':<26} {'capacity':>8} {'executions':>10} {'missing':>7} {'duplicates':>10} "
    f"{'audit':>7} {'429s':>6} {'attempts':>8} {'waves':>6} {'last start':>10}"
)


def simulate(jobs: int, capacity: int, timing: Mapping[str, int], work_seconds: int) -> HerdOutcome:
    """`jobs` runs and the audit's, all fired at FIRE_TIME, against `capacity` requests at once."""
    protocol = scheduler_sim.protocol()
    keys, outcomes = protocol.keys, protocol.outcomes
    retries = schedule_rules.SchedulerRetries.of(timing)
    loop = scheduler_sim.Events(FIRE_TIME)  # at one second: a work's end (0), an arrival (1), a 429 (2)
    at, now, order = loop.at, loop.now, itertools.count()
    ledger = scheduler_sim.memory_ledger(timing, now)
    names = [f"job-{n:04}" for n in range(jobs)] + [AUDIT]
    run_keys = {name: keys.RunKey(ledger.config.project, ledger.config.location, name, FIRE_TIME) for name in names}
    outcome = HerdOutcome(jobs, capacity)
    busy = [0]  # requests being served
    pending: list[tuple[int, int, str, int]] = []  # (arrival, order, run, attempt): waiting for a free slot
    worked: dict[str, int] = {}
    completed: set[str] = set()
    starts: dict[int, int] = {}

    def failed(name: str, attempt: int) -> None:
        retry_at = loop.clock + retries.wait(attempt)
        if retries.allowed(attempt + 1, retry_at):
            at(retry_at, 1, lambda: arrive(name, attempt + 1))

    def arrive(name: str, attempt: int) -> None:
        outcome.attempts += 1
        if busy[0] < capacity:
            serve(name, attempt)
        else:
            entry = (loop.clock, next(order), name, attempt)
            pending.append(entry)
            at(loop.clock + PENDING_SECONDS, 2, lambda: give_up(entry))

    def give_up(entry: tuple[int, int, str, int]) -> None:
        if entry in pending:  # no instance freed within the wait: 429
            pending.remove(entry)
            outcome.too_many += 1
            failed(entry[2], entry[3])

    def serve(name: str, attempt: int) -> None:
        busy[0] += 1
        try:
            claim = ledger.claim(run_keys[name], now())
        except (outcomes.Duplicate, outcomes.InProgress) as answer:  # answered at once: 2xx, or 409 and a retry
            free()
            if isinstance(answer, outcomes.InProgress):
                failed(name, attempt)
            return
        worked[name] = worked.get(name, 0) + 1
        starts[loop.clock] = starts.get(loop.clock, 0) + 1
        outcome.last_start = max(outcome.last_start, loop.clock)
        at(loop.clock + work_seconds, 0, lambda: finish(name, claim))

    def finish(name: str, claim: object) -> None:
        ledger.complete(claim, now())
        completed.add(name)
        free()

    def free() -> None:
        busy[0] -= 1
        if pending:  # the longest-waiting request takes the slot
            _arrival, _order, name, attempt = pending.pop(0)
            serve(name, attempt)

    for name in names:
        at(0, 1, lambda name=name: arrive(name, 0))
    loop.run()
    outcome.executions = sum(count for name, count in worked.items() if name != AUDIT)
    outcome.missing = len(set(names) - completed - {AUDIT})
    outcome.audit = "ran" if AUDIT in completed else "missing"
    outcome.duplicates = sum(1 for count in worked.values() if count > 1)
    outcome.waves = sorted(starts)
    return outcome


def herd_config(jobs: int) -> dict[str, object]:
    """A default bake's config.yaml (the hook's) with `jobs` jobs on FIRE_TIME's minute, checked without the gap
    rules (one schedule for all); its `function:` block left to the module's defaults."""
    import questions  # the hook's (tests/conftest puts hooks/ on the path; main does the same)
    from conftest import rendered_answers

    config = questions.config_from_answers(rendered_answers())
    config.pop("function", None)
    minute = {"schedule": f"{FIRE_TIME:%M %H} * * *", "time_zone": "Etc/UTC"}
    config["jobs"] = {f"job-{n:04}": dict(minute) for n in range(jobs)}
    return rules.check_config(config, FIRE_TIME.date(), schedules=False)


def herd_table(jobs: int, work_seconds: int) -> tuple[str, list[HerdOutcome], str]:
    """The herd against the capacity the rules derive for it (schedule_rules.schedule_herd and instances_for of a config
    with `jobs` on one minute) and against the module's default; the table, the outcomes, and the rules' refusal
    of the default (check_capacity)."""
    checked = herd_config(jobs)
    timing, herd = checked["defaults"], schedule_rules.schedule_herd(checked, FIRE_TIME.date())
    derived = schedule_rules.instances_for(herd, 1)
    default = rules.FUNCTION_DEFAULTS["max_instance_count"]
    results = [simulate(jobs, derived, timing, work_seconds), simulate(jobs, default, timing, work_seconds)]
    try:
        schedule_rules.check_capacity(rules.FUNCTION_DEFAULTS, herd, timing["retry_count"])
        refusal = "(no refusal)"
    except rules.RuleError as error:
        refusal = f"ERROR: config.yaml: {error}"
    waits = rules.retry_intervals_seconds(
        timing["retry_count"], timing["min_backoff_seconds"], timing["max_backoff_seconds"], timing["max_doublings"]
    )
    title = (
        f"herd: {jobs} jobs and the audit fired at {FIRE_TIME:%Y-%m-%dT%H:%MZ}, each run's work {work_seconds} s; "
        f"retry_count {timing['retry_count']}, waits {'/'.join(map(str, waits))} s; a request past the capacity "
        f"waits {PENDING_SECONDS} s, then 429"
    )
    rows = [results[0].row("the rules (instances_for)"), results[1].row("the module's default")]
    return "\n".join([title, HEADER, *rows]), results, refusal
