"""The herd's full form (issue 27): every job of one minute fired at once, against the capacity the rules derive and
against the module's default, in tests/herd_sim.py's model of Cloud Run's 429s and Cloud Scheduler's retry waves.

    python benchmarks/herd.py [--jobs 1000] [--work-seconds 120]

Prints the table (executions, missing, duplicates, 429s, attempts, waves) and the refusal `python config.py` gives
the default capacity; exits 1 if the derived capacity leaves a run missing or duplicated. `make test` runs the same
model on 1,000 jobs (tests/test_herd_sim.py).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "hooks"))

import herd_sim  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=1000, help="jobs on one minute (default 1000)")
    parser.add_argument("--work-seconds", type=int, default=120, help="each run's work, in seconds (default 120)")
    args = parser.parse_args(argv)
    table, (derived, _default), refusal = herd_sim.herd_table(args.jobs, args.work_seconds)
    print(table)
    print(f"with the module's default, python config.py says:\n  {refusal}")
    return 0 if (derived.missing, derived.duplicates, derived.audit) == (0, 0, "ran") else 1


if __name__ == "__main__":
    sys.exit(main())
