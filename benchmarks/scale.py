"""Per-delivery CPU and the audit's Firestore reads per hour at 1, 100 and 1,000 jobs: this template's bake
side by side with a bake of a reference commit (default: the last commit before the incremental audit and
the once-per-process configuration), on Google's Firestore emulator.

    python benchmarks/scale.py [--reference REF] [--jobs 1 100 1000] [--deliveries 30] [--audits 4]

Each side is a default bake with N hourly jobs (`0 * * * *`, UTC) configured; benchmarks/scale_probe.py
measures it in a fresh process. Prints one Markdown table. Timings are printed, never asserted.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from two_bakes import Rows, arguments, measure_both, run_probe  # noqa: E402

# The last commit whose audit re-read a whole day per audit and whose handler parsed the job table on
# every delivery (issue 19 items 11 and 12 were measured against it).
REFERENCE = "0a5c4c0"


def probe(project: Path, count: int, host: str, args) -> dict:
    return run_probe(
        "scale_probe.py", project, count, host, ["--deliveries", str(args.deliveries), "--audits", str(args.audits)]
    )


def table(rows: Rows, reference: str) -> str:
    lines = [
        f"| jobs | CPU per delivery, {reference} | now | audit reads per hour, {reference} | now "
        "| now, with the daily full sweep spread over 24 h |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for count, old, new in rows:
        lines.append(
            f"| {count:,} | {old['cpu_ms_per_delivery']} ms | {new['cpu_ms_per_delivery']} ms "
            f"| {old['audit_reads_per_hour']:,.0f} | {new['audit_reads_per_hour']:,.0f} "
            f"| {new['audit_reads_per_hour'] + new['audit_reads_first'] / 24:,.0f} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = arguments(__doc__.splitlines()[0], REFERENCE)
    parser.add_argument("--deliveries", type=int, default=30)
    parser.add_argument("--audits", type=int, default=4, help="hourly audits per side (the first is reported apart)")
    args = parser.parse_args(argv)
    rows = measure_both(args, lambda project, count, host: probe(project, count, host, args), "scale-")
    print(table(rows, args.reference))
    return 0


if __name__ == "__main__":
    sys.exit(main())
