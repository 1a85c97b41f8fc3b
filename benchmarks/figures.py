"""The benchmark's figures: targets, the Markdown table and the page it writes. Pure: no Firestore, no bake.

benchmarks/run.py measures; this module judges and reports, so its rules are unit-tested on their own
(tests/test_benchmark.py).
"""

from __future__ import annotations

import collections
import datetime as dt
import importlib.metadata
import json
import os
import platform
import statistics
from collections.abc import Mapping
from pathlib import Path

SCENARIOS = {
    "fresh": "per fresh run",
    "replay": "per replay of a completed run, on the instance that completed it",
    "replay_elsewhere": "per replay of a completed run, on another instance",
    "takeover": "per takeover of an expired lease",
}
# The most RPCs the baked handler may spend per scenario (issue: "2 fresh, <= 2 replay, <= 4 takeover").
TARGETS = {"fresh": 2, "replay": 2, "replay_elsewhere": 2, "takeover": 4}
# What the seed's sample is documented to cost: two transactions of BeginTransaction + BatchGet + Commit.
SEED_EXPECTED = {"fresh": 6, "replay": 3, "replay_elsewhere": 3}
LATENCY_TARGET = 0.5  # baked median <= 0.5 x the seed's
IMPORT_TARGET = 1.3  # baked main.py import <= 1.3 x the bare function's
# The load test's hand-over (--load-json): one JSON object with these keys.
LOAD_FIELDS = {
    "clients": "concurrent clients",
    "runs": "distinct runs",
    "deliveries_per_run": "deliveries per run",
    "executions": "work executions (must equal runs)",
    "errors_5xx": "5xx answers (must be 0)",
    "throughput_per_s": "deliveries per second",
    "p50_ms": "p50 latency, ms",
    "p95_ms": "p95 latency, ms",
}


def summary(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"median_ms": statistics.median(ms), "p95_ms": statistics.quantiles(ms, n=20, method="inclusive")[18]}


def describe(counts: collections.Counter[str]) -> str:
    names = ", ".join(f"{name} x{n}" if n > 1 else name for name, n in sorted(counts.items()))
    return f"{counts.total()} ({names})"


def table(results: dict, runs: int, import_runs: int) -> str:
    baked, seed = results["rpcs"]["baked"], results["rpcs"]["seed"]
    latency, imports = results["latency"], results["import"]

    def met(ok: bool) -> str:
        return "yes" if ok else "**NO**"

    rows = [
        ("Measure", "Baked handler", "Reference", "Baked / reference", "Target", "Met"),
        ("**Firestore RPCs** (reference: the seed's sample)", "", "", "", "", ""),
    ]
    for scenario, label in SCENARIOS.items():
        ours, theirs = baked[scenario], seed[scenario]
        target = f"baked {'' if scenario == 'fresh' else '≤ '}{TARGETS[scenario]}"
        if scenario in SEED_EXPECTED:
            target += f"; seed {SEED_EXPECTED[scenario]}"
        ok = ours.total() <= TARGETS[scenario] and seed[scenario].total() == SEED_EXPECTED.get(scenario, theirs.total())
        rows.append((label, describe(ours), describe(theirs), f"{ours.total() / theirs.total():.2f}", target, met(ok)))
    rows.append((f"**Latency per fresh run** ({runs} runs each; reference: the seed's sample)", "", "", "", "", ""))
    for stat, label in (("median_ms", "median"), ("p95_ms", "p95")):
        ratio = latency["baked"][stat] / latency["seed"][stat]
        target, ok = ("≤ 0.5× seed", met(ratio <= LATENCY_TARGET)) if stat == "median_ms" else ("", "")
        rows.append(
            (label, f"{latency['baked'][stat]:.2f} ms", f"{latency['seed'][stat]:.2f} ms", f"{ratio:.2f}", target, ok)
        )
    rows.append(
        (
            f"**Cold start** (median of {import_runs} fresh processes; reference: a bare functions-framework "
            "function importing google-cloud-firestore)",
            "",
            "",
            "",
            "",
            "",
        )
    )
    ratio = imports["baked"]["seconds"] / imports["bare"]["seconds"]
    rows.append(
        (
            "import time of main.py",
            f"{imports['baked']['seconds'] * 1000:.0f} ms",
            f"{imports['bare']['seconds'] * 1000:.0f} ms",
            f"{ratio:.2f}",
            "≤ 1.3× bare",
            met(ratio <= IMPORT_TARGET),
        )
    )
    rss_ratio = imports["baked"]["peak_rss_mb"] / imports["bare"]["peak_rss_mb"]
    rows.append(
        (
            "peak RSS after import",
            f"{imports['baked']['peak_rss_mb']:.1f} MB",
            f"{imports['bare']['peak_rss_mb']:.1f} MB",
            f"{rss_ratio:.2f}",
            "",
            "",
        )
    )
    stop = results["stop"]
    rows.append(
        (
            f"**The stop per run** ({runs} runs each in a loop, empty work, the work in a warm worker; "
            "reference: the in-thread call of the work)",
            "",
            "",
            "",
            "",
            "",
        )
    )
    for stat, label in (("median_ms", "wall time, median"), ("p95_ms", "wall time, p95"), ("cpu_ms", "CPU, mean")):
        ours, theirs = stop["process"][stat], stop["thread"][stat]
        rows.append((label, f"{ours:.3f} ms", f"{theirs:.3f} ms", f"{ours / theirs:.0f}", "", ""))
    first = "first run on an instance (starts the fork server and a warm worker)"
    rows.append((first, f"{stop['first_ms']:.0f} ms", "", "", "", ""))
    rows.append(("fork server RSS (once per instance)", f"{stop['fork_server_rss_mb']:.1f} MB", "", "", "", ""))
    worker = f"{stop['work_process_private_mb']:.1f} MB"
    rows.append(("a warm worker's own memory (one per run at once)", worker, "", "", "", ""))
    rows.append(("**Load** (issue 5: 8 clients, 50 runs × 4 duplicate deliveries, real server)", "", "", "", "", ""))
    load = results["load"]
    if load is None:
        rows.append(("not measured in this run", "pass `--load-json FILE` from the load test", "", "", "", ""))
    else:
        for field, label in LOAD_FIELDS.items():
            rows.append((label, f"{load[field]}", "", "", "", ""))
        ok = load["executions"] == load["runs"] and load["errors_5xx"] == 0
        rows.append(("exactly once under load", "", "", "", "executions = runs, no 5xx", met(ok)))
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * len(rows[0])]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines)


def over_target(baked: Mapping[str, collections.Counter[str]]) -> list[str]:
    """The baked handler's RPC counts that exceed their targets, as one line each."""
    return [
        f"{scenario}: {baked[scenario].total()} RPCs, target ≤ {TARGETS[scenario]}"
        for scenario in SCENARIOS
        if baked[scenario].total() > TARGETS[scenario]
    ]


def machine() -> str:
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ),
        platform.processor() or "unknown CPU",
    )
    versions = ", ".join(
        f"{name} {importlib.metadata.version(name)}"
        for name in ("google-cloud-firestore", "functions-framework", "grpcio")
    )
    return (
        f"nproc {len(os.sched_getaffinity(0))} ({cpu}), load average {os.getloadavg()[0]:.1f} at the end; "
        f"Python {platform.python_version()} on {platform.system()} "
        f"{platform.release()}; {versions}; Google's Firestore emulator on loopback"
    )


def document(report: str, command: str) -> str:
    return "\n".join(
        [
            "# Performance: the baked handler against the seed's sample",
            "",
            "Generated by the template's `benchmarks/run.py` on a default bake (`make bench` bakes one, runs its"
            " load test with LOAD_JSON set, then the benchmark); do not edit by hand, run it again.",
            "RPCs are counted per gRPC call at the Firestore client's channel; a fresh run is a claim, the",
            "(empty) work and the finish. Latency and cold start depend on the machine and its load (a shared",
            "machine makes them noisy: compare the ratios, measured interleaved); RPC counts do not.",
            "",
            report,
            "",
            f"- Command (in the baked project's directory): `{command}`",
            f"- Machine: {machine()}",
            f"- Date: {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC",
            "",
        ]
    )


def read_load(path: str | None) -> dict | None:
    if path is None:
        return None
    load = json.loads(Path(path).read_text())
    missing = sorted(set(LOAD_FIELDS) - set(load))
    if missing:
        raise SystemExit(f"--load-json={path!r}: missing {', '.join(missing)}; expected keys: {', '.join(LOAD_FIELDS)}")
    return load
