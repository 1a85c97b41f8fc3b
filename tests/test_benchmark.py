"""benchmarks/ in a tiny mode on a default bake: it runs, and both handlers cost the RPCs the protocol promises.

The benchmark proves the template against the seed's sample, so it lives in the template and runs once
here, not in every bake. RPC counts are deterministic, so they are asserted; timings are the
benchmark's to print, never asserted.
"""

from __future__ import annotations

import collections
import json
import os
import subprocess
import sys

import figures
import pytest
from conftest import ROOT, bake

pytestmark = pytest.mark.bake


@pytest.fixture(scope="module")
def measured(emulator_host, tmp_path_factory):
    project = bake(tmp_path_factory.mktemp("bench"))
    out = tmp_path_factory.mktemp("benchmark") / "figures.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--runs", "5", "--import-runs", "1", "--json", str(out)],
        cwd=project,
        env={**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout


def test_baked_handler_costs_2_rpcs_fresh_1_or_2_per_replay_4_per_takeover(measured):
    rpcs = measured[0]["rpcs"]["baked"]
    assert rpcs == {
        "fresh": {"Commit": 2},  # create-if-absent, then the finish guarded by the claim's update time
        "replay": {"BatchGetDocuments": 1},  # one read: this instance saw the run done (ledger.DONE_HERE_LIMIT)
        "replay_elsewhere": {"Commit": 1, "BatchGetDocuments": 1},  # the failed create, then one read
        "takeover": {"Commit": 3, "BatchGetDocuments": 1},  # failed create, read, guarded takeover, finish
    }


def test_seed_sample_costs_two_transactions_fresh_and_one_per_replay(measured):
    rpcs = measured[0]["rpcs"]["seed"]
    transaction = {"BeginTransaction": 1, "BatchGetDocuments": 1, "Commit": 1}
    assert rpcs["fresh"] == {name: 2 * n for name, n in transaction.items()}
    assert rpcs["replay"] == rpcs["replay_elsewhere"] == transaction
    assert rpcs["takeover"] == rpcs["fresh"]


def test_table_shows_both_handlers_side_by_side(measured):
    table = measured[1]
    assert "| per fresh run | 2 (Commit x2) | 6 (BatchGetDocuments x2, BeginTransaction x2, Commit x2) |" in table
    assert "| median |" in table and "| import time of main.py |" in table and "| peak RSS after import |" in table
    assert "pass `--load-json FILE` from the load test" in table


def test_the_stop_is_measured_next_to_todays_in_thread_call(measured):
    """The stop's cost per run (the work in a warm worker) beside the in-thread call it replaced, wall time and CPU."""
    stop, table = measured[0]["stop"], measured[1]
    assert stop["process"]["median_ms"] > stop["thread"]["median_ms"] > 0  # a message each way costs more than a call
    assert stop["process"]["cpu_ms"] > 0 and stop["thread"]["cpu_ms"] > 0
    assert stop["first_ms"] > 0 and stop["fork_server_rss_mb"] > 0 and stop["work_process_private_mb"] > 0
    first = "| first run on an instance (starts the fork server and a warm worker) |"
    for row in ("| wall time, median |", "| CPU, mean |", first, "| fork server RSS"):
        assert row in table, row


def test_run_outside_a_bake_is_refused_in_one_line(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py")], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"benchmarks/run.py: {tmp_path} is not a baked project (no dedup.py); run it from a bake's directory"
    )


def test_rpc_counts_over_target_are_reported():
    within = {"fresh": collections.Counter(Commit=2), "replay": collections.Counter(BatchGetDocuments=1)}
    within["replay_elsewhere"] = collections.Counter(Commit=1, BatchGetDocuments=1)
    assert figures.over_target(within | {"takeover": collections.Counter(Commit=4)}) == []
    over = within | {"takeover": collections.Counter(Commit=4, BatchGetDocuments=1)}
    assert figures.over_target(over) == ["takeover: 5 RPCs, target ≤ 4"]


def test_load_figures_missing_a_field_are_refused(tmp_path):
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"clients": 8}))
    with pytest.raises(SystemExit, match=r"load.json'?: missing .*errors_5xx"):
        figures.read_load(str(path))


def test_the_scale_benchmark_prints_both_sides_and_the_audit_reads_only_new_fire_times(tmp_path):
    """benchmarks/scale.py in a tiny mode: today's bake against the reference commit. Reads are deterministic:
    the reference audit re-read a day of every job each hour (24 fire times + its marker: 25 a job), this one
    reads each newly settled run once, plus its bookmark (issue 19 item 12)."""
    out = tmp_path / "scale.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "scale.py"), "--jobs", "1", "3", "--deliveries", "2",
         "--audits", "3", "--json", str(out)],  # fmt: skip
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith("| jobs | CPU per delivery, ")
    figures = {row["jobs"]: row for row in json.loads(out.read_text())}
    for jobs in (1, 3):
        assert figures[jobs]["reference"]["audit_reads_per_hour"] == 25 * jobs
        assert figures[jobs]["now"]["audit_reads_per_hour"] == jobs + 1


def test_the_stop_cost_benchmark_prints_the_seed_the_per_process_stop_and_the_warm_worker(tmp_path):
    """benchmarks/stop_cost.py in a tiny mode: the reference bake's stop starts a process per run (no warm worker
    left after its runs), this bake's keeps one; every side answers. Timings are printed, never asserted."""
    out = tmp_path / "stop_cost.json"
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stop_cost.py"), "--jobs", "1", "--deliveries", "2",
         "--json", str(out)],  # fmt: skip
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    # After the bakes' own lines (the hook names a bake's local module path).
    assert "\n| jobs | fresh run: seed | per-process stop (" in "\n" + result.stdout
    (row,) = json.loads(out.read_text())
    assert (row["reference"]["warm_workers"], row["now"]["warm_workers"]) == (0, 1)
    for side in ("seed", "in_thread", "stop"):
        assert row["now"][side]["fresh_ms"] > 0 and row["now"][side]["fresh_cpu_ms"] >= 0


def test_the_stop_cost_targets_are_judged_at_each_job_count():
    import stop_cost

    def side(fresh, replay, cpu):
        return {"fresh_ms": fresh, "replay_ms": replay, "fresh_cpu_ms": cpu}

    within = {"seed": side(10, 4, 3), "in_thread": side(4, 4, 3), "stop": side(6, 4, 3.3)}
    over = within | {"stop": side(6.1, 4.1, 3.4)}

    assert stop_cost.verdicts([(1, {}, within)]) == [
        "1 jobs: fresh latency / seed's 0.60, target ≤ 0.6: met",
        "1 jobs: replay latency / seed's 1.00, target ≤ 1.0: met",
        "1 jobs: CPU per fresh delivery / in-thread's 1.10, target ≤ 1.1: met",
    ]
    assert [line.rsplit(": ", 1)[1] for line in stop_cost.verdicts([(1_000, {}, over)])] == ["NOT met"] * 3
