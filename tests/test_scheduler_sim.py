"""The proof of hooks/rules.py's schedule rule: Cloud Scheduler's documented retries (tests/scheduler_sim.py)
drive the protocol's own ledger.RunLedger with one fault at each point, and the hook's bound is what they show.

- every matrix bake: no fault loses a run when it has retries, and none runs the work twice at once;
- a sample of the answers check_timing accepts: the hook's bound is the simulator's longest busy time to
  the second, the hook accepts the next gap above it and nothing goes wrong there under either reading,
  and it refuses the gap at or below it, where some fault really loses a run or overlaps the next.
`pytest -s` prints each matrix bake's table.
"""

from __future__ import annotations

import random

import pytest
import questions
import rules
import scheduler_sim
from conftest import DEFAULT_ANSWERS, MATRIX
from scheduled_dedup_tools import schedule_rules
from scheduler_sim import LOST, OK, Fault, simulate, table

CHECKED = scheduler_sim.matrix_answers()
START = scheduler_sim.FIRE_TIME.date()
# Schedules in Etc/UTC whose gap is exactly the key (whole minutes up to a day).
SCHEDULE_FOR_GAP = {
    **{60 * minutes: f"*/{minutes} * * * *" for minutes in (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)},
    **{3600 * hours: f"0 */{hours} * * *" for hours in (1, 2, 3, 4, 6, 8, 12)},
    86400: "0 0 * * *",
}
NO_RETRY_LOSSES = set(scheduler_sim.FAULTS) - {"none", "lost 2xx"}


def hook_bound(timing) -> int:
    return max(
        outcome.seconds for outcome in schedule_rules.busy_after_one_fault(timing) if outcome.seconds is not None
    )


@pytest.mark.parametrize("bake", list(MATRIX))
def test_every_matrix_bake_loses_no_run_to_one_fault_and_never_works_twice_at_once(bake):
    checked = CHECKED[bake]
    retries = schedule_rules.SchedulerRetries.of(checked).retries_at_all
    for title, gap, rows in scheduler_sim.bake_tables(bake, checked):
        print("\n" + scheduler_sim.format_table(title, rows))
        verdicts = {row.fault: row.verdict for row in rows}
        assert set(verdicts) == set(scheduler_sim.FAULTS)
        if retries:
            assert verdicts == dict.fromkeys(scheduler_sim.FAULTS, OK), title
        else:  # warned by the hook: nothing retries a crash, an error or a hang
            assert {fault for fault, verdict in verdicts.items() if verdict != OK} == NO_RETRY_LOSSES, title
            assert {verdicts[fault] for fault in NO_RETRY_LOSSES} == {LOST}, title
        assert max(row.busy_until for row in rows) == hook_bound(checked) < gap, title


def default_timing() -> dict[str, int]:
    """A default bake's numbers, as its config.yaml resolves them for a job that sets none of its own."""
    return rules.check_config(questions.config_from_answers(DEFAULT_ANSWERS), schedules=False)["defaults"]


def test_the_issues_counterexample_loses_a_run_to_a_crash_right_after_the_claim():
    """*/5 with every other answer at its default: the lease lives until 360 s, the retries at 30, 90 and
    210 s get 409, and the takeover due at 450 s comes after the next fire time (300 s)."""
    timing = default_timing()
    under_a = simulate(timing, Fault("sigkill after the claim", 0), 300, "A")
    assert under_a.attempts == [(0, "connection broken"), (30, "409"), (90, "409"), (210, "409")]
    assert under_a.retry_dropped_at == 450
    assert under_a.verdict(300) == LOST
    under_b = simulate(timing, Fault("sigkill after the claim", 0), 300, "B")
    assert under_b.completed_at == 750  # taken over at 450 s, worked the 300 s timeout
    assert under_b.verdict(300) != OK
    with pytest.raises(rules.RuleError) as refusal:
        schedule_rules.check_schedule_timing(
            {"every-5": {"schedule": "*/5 * * * *", "time_zone": "Etc/UTC"}}, timing, START
        )
    assert str(refusal.value).startswith("jobs.every-5.schedule='*/5 * * * *': fires only 300 s apart")


def test_a_protocol_that_takes_over_a_live_lease_is_caught_working_twice(monkeypatch):
    """The simulator can fail: with dedup.decide made to take over live leases, a run works twice at once."""
    dedup = scheduler_sim.protocol().dedup
    monkeypatch.setattr(dedup, "decide", lambda record, now, rerun_id=None: dedup.Decision.TAKE_OVER)
    # Work of 300 s past a 60 s deadline: Scheduler's retries come while it runs.
    timing = rules.check_timing({**default_timing(), "attempt_deadline_seconds": 60, "function_timeout_seconds": 300})
    outcome = simulate(timing, Fault("none"), 86400, "B")
    assert outcome.double_work and outcome.verdict(86400) == scheduler_sim.DOUBLE_WORK


def sample_of_timings(count: int = 40) -> list[dict[str, int]]:
    """A fixed pseudo-random sample of the answers check_timing accepts, small enough to simulate every second."""
    grid = [
        {
            "attempt_deadline_seconds": deadline,
            "function_timeout_seconds": deadline + extra,
            "lease_seconds": deadline + extra + margin,
            "retry_count": retry_count,
            "min_backoff_seconds": min_backoff,
            "max_backoff_seconds": max(min_backoff, max_backoff),
            "max_doublings": doublings,
            "max_retry_duration_seconds": duration,
            "retention_seconds": 10**6,
        }
        for deadline in (15, 40)
        for extra in (0, 25)
        for margin in (30, 75)
        for retry_count in (0, 1, 2, 5)
        for min_backoff in (5, 20, 45)
        for max_backoff in (20, 60, 200)
        for doublings in (0, 2, 16)
        for duration in (0, 150, 600)
    ]
    accepted = []
    for timing in grid:
        try:
            accepted.append(rules.check_timing(timing))
        except rules.RuleError:
            continue
    return random.Random(10).sample(accepted, count)


@pytest.mark.parametrize("timing", sample_of_timings(), ids=lambda t: "-".join(str(v) for v in t.values()))
def test_the_hooks_bound_is_the_simulators_and_refused_gaps_really_lose(timing):
    jobs_for = {
        gap: {"job": {"schedule": schedule, "time_zone": "Etc/UTC"}} for gap, schedule in SCHEDULE_FOR_GAP.items()
    }
    try:
        warnings = schedule_rules.check_schedule_timing(jobs_for[86400], timing, START)
    except rules.RuleError as refusal:  # the retries that max_retry_duration alone allows cannot recover a crash
        assert refusal.field == "max_retry_duration_seconds" and timing["retry_count"] == 0
        assert LOST in {row.verdict for row in table(timing, 10**7)}
        return
    rows = table(timing, 10**7)  # no next fire time in reach: how long each fault keeps the run busy
    bound = hook_bound(timing)
    hook = {outcome.fault: outcome.seconds for outcome in schedule_rules.busy_after_one_fault(timing)}
    assert {row.fault: row.busy_until for row in rows if hook[row.fault] is not None} == {
        fault: seconds for fault, seconds in hook.items() if seconds is not None
    }
    assert max(row.busy_until for row in rows) == bound
    losses = {row.fault for row in rows if row.verdict != OK}
    assert losses == (NO_RETRY_LOSSES if warnings else set())

    above = min(gap for gap in SCHEDULE_FOR_GAP if gap > bound)
    assert schedule_rules.check_schedule_timing(jobs_for[above], timing, START) == warnings
    assert {row.fault for row in table(timing, above) if row.verdict != OK} == losses

    at_or_below = [gap for gap in SCHEDULE_FOR_GAP if gap <= bound]
    if at_or_below:
        gap = max(at_or_below)
        with pytest.raises(rules.RuleError) as refusal:
            schedule_rules.check_schedule_timing(jobs_for[gap], timing, START)
        assert f"fires only {gap} s apart" in str(refusal.value) and f"busy for {bound} s" in str(refusal.value)
        assert {row.fault for row in table(timing, gap) if row.verdict != OK} - losses


def test_the_sample_covers_each_kind_of_answer():
    """The sample holds answers with and without retries, duration-only retries, and deadlines below timeouts."""
    timings = sample_of_timings()
    assert any(t["retry_count"] == 0 and t["max_retry_duration_seconds"] == 0 for t in timings)
    assert any(t["retry_count"] == 0 and t["max_retry_duration_seconds"] > 0 for t in timings)
    assert any(t["retry_count"] > 0 for t in timings)
    assert any(t["attempt_deadline_seconds"] < t["function_timeout_seconds"] for t in timings)
