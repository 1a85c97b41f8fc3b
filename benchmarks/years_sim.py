"""The years simulation's long run (issue 24): a default bake, two simulated years, twenty jobs, every move.

    python benchmarks/years_sim.py [--seed N] [--days 730] [--jobs 20] [--moves all] [--stop-runs 6]

Bakes the template with its default answers, lays the proofs into a copy (tests/proofs/prove.py) and runs
tests/proofs/harness/years_sim.py there, on a Firestore emulator of its own (or FIRESTORE_EMULATOR_HOST's). It prints
the seed, the count of each state, the duplicates and the unexplained fire times (each listed), and exits 1 if either
is not 0. `YEARS_SIM_SEED=<seed>` (or --seed) replays a run; a short replay (--days) reaches an early failure fast.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "proofs"))

import prove  # noqa: E402


def main(argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="years-sim-") as scratch:
        baked = subprocess.run(
            [sys.executable, "-m", "cookiecutter", "--no-input", "-o", f"{scratch}/bake", str(ROOT)],
            capture_output=True,
            text=True,
            check=False,
        )
        if baked.returncode != 0:
            print(baked.stderr, file=sys.stderr)
            return 2
        bake = next(Path(scratch, "bake").iterdir())
        copy = prove.lay(bake, Path(scratch) / "proved" / bake.name)
        command = [sys.executable, str(copy / "tests" / "harness" / "years_sim.py"), *argv]
        return subprocess.run(command, cwd=copy, env=prove.proof_env(copy), check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
