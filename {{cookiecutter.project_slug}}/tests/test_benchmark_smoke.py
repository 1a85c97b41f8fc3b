"""benchmarks/run.py in a tiny mode: it runs, and both handlers cost the RPCs the protocol promises.

RPC counts are deterministic, so they are asserted; timings are the benchmark's to print, never asserted.
"""

import collections
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import run as bench

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def figures(emulator_host, tmp_path_factory):
    out = tmp_path_factory.mktemp("benchmark") / "figures.json"
    result = subprocess.run(
        [sys.executable, "benchmarks/run.py", "--runs", "5", "--import-runs", "1", "--json", str(out)],
        cwd=ROOT,
        env={**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return json.loads(out.read_text()), result.stdout


def test_baked_handler_costs_2_rpcs_fresh_2_per_replay_4_per_takeover(figures):
    rpcs = figures[0]["rpcs"]["baked"]
    assert rpcs == {
        "fresh": {"Commit": 2},  # create-if-absent, then the finish guarded by the claim's update time
        "replay": {"Commit": 1, "BatchGetDocuments": 1},  # the failed create, then one read
        "takeover": {"Commit": 3, "BatchGetDocuments": 1},  # failed create, read, guarded takeover, finish
    }


def test_seed_sample_costs_two_transactions_fresh_and_one_per_replay(figures):
    rpcs = figures[0]["rpcs"]["seed"]
    transaction = {"BeginTransaction": 1, "BatchGetDocuments": 1, "Commit": 1}
    assert rpcs["fresh"] == {name: 2 * n for name, n in transaction.items()}
    assert rpcs["replay"] == transaction
    assert rpcs["takeover"] == rpcs["fresh"]


def test_table_shows_both_handlers_side_by_side(figures):
    table = figures[1]
    assert "| per fresh run | 2 (Commit x2) | 6 (BatchGetDocuments x2, BeginTransaction x2, Commit x2) |" in table
    assert "| median |" in table and "| import time of main.py |" in table and "| peak RSS after import |" in table
    assert "pass `--load-json FILE` from the load test" in table


def test_rpc_counts_over_target_are_reported():
    within = {"fresh": collections.Counter(Commit=2), "replay": collections.Counter(Commit=2)}
    assert bench.over_target(within | {"takeover": collections.Counter(Commit=4)}) == []
    over = within | {"takeover": collections.Counter(Commit=4, BatchGetDocuments=1)}
    assert bench.over_target(over) == ["takeover: 5 RPCs, target ≤ 4"]


def test_load_figures_missing_a_field_are_refused(tmp_path):
    path = tmp_path / "load.json"
    path.write_text(json.dumps({"clients": 8}))
    with pytest.raises(SystemExit, match=r"load.json'?: missing .*errors_5xx"):
        bench.read_load(str(path))
