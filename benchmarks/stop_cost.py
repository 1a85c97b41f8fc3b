"""What the stop costs per delivery: the seed's sample, the per-process stop of a reference commit (a process per
run, forked from a fork server) and this template's stop, side by side at 1, 100 and 1,000 jobs, on Google's
Firestore emulator; the in-thread call of the work (the design before any stop) is the CPU reference.

    python benchmarks/stop_cost.py [--reference REF] [--jobs 1 100 1000] [--deliveries 100] [--json PATH]

Each side is a default bake with N hourly jobs (benchmarks/scale.py's); benchmarks/stop_cost_probe.py measures it
in a fresh process (an instance start: its first run through the stop is reported apart). Prints one Markdown table
and the targets of issue 27: fresh latency ≤ 0.6× the seed's, replay ≤ 1×, CPU per fresh delivery within 10 % of the
in-thread call. Timings depend on the machine and its load: they are printed, never asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_bakes import Rows, arguments, measure_both, run_probe  # noqa: E402

# The last commit whose stop started a process per run (issue 27 replaced it with warm workers).
REFERENCE = "f1d5821"
FRESH_TARGET, REPLAY_TARGET, CPU_TARGET = 0.6, 1.0, 1.1


def probe(project: Path, count: int, host: str, deliveries: int) -> dict:
    return run_probe("stop_cost_probe.py", project, count, host, ["--deliveries", str(deliveries)])


def table(rows: Rows, reference: str) -> str:
    """One row per job count: `old` measured on the reference bake, `new` on this one (its seed and in-thread
    sides stand for both: the same code)."""
    lines = [
        f"| jobs | fresh run: seed | per-process stop ({reference}) | warm worker | warm / seed "
        "| replay: seed | per-process | warm | warm / seed "
        "| CPU per fresh delivery: in-thread | per-process | warm | warm / in-thread |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for count, old, new in rows:
        seed, thread, before, now = new["seed"], new["in_thread"], old["stop"], new["stop"]
        lines.append(
            f"| {count:,} | {seed['fresh_ms']:.2f} ms | {before['fresh_ms']:.2f} ms | {now['fresh_ms']:.2f} ms "
            f"| {now['fresh_ms'] / seed['fresh_ms']:.2f} "
            f"| {seed['replay_ms']:.2f} ms | {before['replay_ms']:.2f} ms | {now['replay_ms']:.2f} ms "
            f"| {now['replay_ms'] / seed['replay_ms']:.2f} "
            f"| {thread['fresh_cpu_ms']:.2f} ms | {before['fresh_cpu_ms']:.2f} ms | {now['fresh_cpu_ms']:.2f} ms "
            f"| {now['fresh_cpu_ms'] / thread['fresh_cpu_ms']:.2f} |"
        )
    lines.append("")
    lines.append("| jobs | first run on a new instance: per-process stop | warm worker | its CPU: per-process | warm |")
    lines.append("|---:|---:|---:|---:|---:|")
    for count, old, new in rows:
        lines.append(
            f"| {count:,} | {old['first_run_ms']:.0f} ms | {new['first_run_ms']:.0f} ms "
            f"| {old['first_run_cpu_ms']:.0f} ms | {new['first_run_cpu_ms']:.0f} ms |"
        )
    return "\n".join(lines)


def verdicts(rows: Rows) -> list[str]:
    """Each target of issue 27 at each job count, met or not, one line each."""
    lines = []
    for count, _, new in rows:
        seed, thread, now = new["seed"], new["in_thread"], new["stop"]
        for what, ratio, target in (
            ("fresh latency / seed's", now["fresh_ms"] / seed["fresh_ms"], FRESH_TARGET),
            ("replay latency / seed's", now["replay_ms"] / seed["replay_ms"], REPLAY_TARGET),
            ("CPU per fresh delivery / in-thread's", now["fresh_cpu_ms"] / thread["fresh_cpu_ms"], CPU_TARGET),
        ):
            verdict = "met" if ratio <= target else "NOT met"
            lines.append(f"{count:,} jobs: {what} {ratio:.2f}, target ≤ {target}: {verdict}")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__.splitlines()[0], REFERENCE)
    parser.add_argument("--deliveries", type=int, default=100)
    args = parser.parse_args(argv)
    rows = measure_both(args, lambda project, count, host: probe(project, count, host, args.deliveries), "stop-cost-")
    print(table(rows, args.reference))
    print()
    print("\n".join(verdicts(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
