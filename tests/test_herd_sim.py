"""tests/herd_sim.py: a herd on one minute against the capacity the rules derive runs every job once at its first
attempt; against the module's default it loses runs with no fault at all, and the rules refuse that capacity."""

from __future__ import annotations

import dataclasses

import herd_sim
import pytest
import rules
from conftest import ROOT

JOBS = 1000
WORK_SECONDS = 120  # longer than the first waits (30, 60 s): a wave starts only what the capacity frees


@pytest.fixture(scope="module")
def herd():
    return herd_sim.herd_table(JOBS, WORK_SECONDS)


def test_the_rules_capacity_runs_every_job_once_at_its_first_attempt(herd):
    table, (derived, _default), _refusal = herd
    print(table)
    assert derived.capacity == JOBS + 1  # every job and the audit, on the hour
    outcome = dataclasses.asdict(derived)
    assert {key: outcome[key] for key in ("executions", "missing", "duplicates", "audit", "too_many", "attempts")} == {
        "executions": JOBS,
        "missing": 0,
        "duplicates": 0,
        "audit": "ran",
        "too_many": 0,
        "attempts": JOBS + 1,
    }
    assert derived.waves == [0]


def test_the_docs_show_the_simulators_table(herd):
    """docs/choosing-the-numbers.md, "Capacity: the busiest minute": what `python benchmarks/herd.py` prints."""
    table, _results, _refusal = herd
    assert f"```text\n{table}\n" in (ROOT / "docs" / "choosing-the-numbers.md").read_text()


def test_the_modules_default_loses_runs_with_no_fault_and_the_rules_refuse_it(herd):
    _table, (_derived, default), refusal = herd
    assert default.capacity == rules.FUNCTION_DEFAULTS["max_instance_count"]
    assert default.missing > 0 and default.too_many > 0 and default.duplicates == 0
    assert default.executions + default.missing == JOBS
    assert refusal.startswith(
        f"ERROR: config.yaml: function.max_instance_count=5: the busiest minute, "
        f"{herd_sim.FIRE_TIME:%Y-%m-%dT%H:%MZ}, has {JOBS + 1} runs in flight at once"
    )
    assert refusal.endswith(f"a value that passes: function.max_instance_count {JOBS + 1}")


def test_one_slot_short_of_the_herd_needs_a_retry_wave():
    """The rule's edge: one request fewer than the herd, and a run waits for Scheduler's retries (429s); it still
    runs once, late, with a retry gone that the one-fault rules had counted for a fault."""
    timing = herd_sim.herd_config(10)["defaults"]
    short = herd_sim.simulate(10, 10, timing, WORK_SECONDS)
    assert short.too_many > 0 and len(short.waves) == 2
    assert (short.executions, short.missing, short.duplicates) == (10, 0, 0)
