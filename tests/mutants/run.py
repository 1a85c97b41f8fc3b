"""Mutation testing: apply each mutant of tests/mutants/mutants.py, run its tests, report killed/survived.

    python tests/mutants/run.py              # every mutant (minutes: one narrow pytest run per mutant)
    python tests/mutants/run.py ID [ID ...]  # only these mutants
    python tests/mutants/run.py --check      # only check that every original snippet is found exactly once

Not part of `make test` (pyproject.toml keeps pytest out of tests/mutants). Everything happens on copies
in a temporary directory: the template (without .git, build output and venvs) and one default bake of it
(plus a bake of each proxy target, made only when a mutant of its code is run: BAKES), each with the
template's proofs laid in (tests/proofs/prove.py), so "tests/test_faults.py" names the laid-in proof.
Each mutant edits one file of a copy, runs its tests with -x, then restores the file. One Firestore
emulator serves every baked run. First, the unmutated code must pass the union of the tests, or a
"killed" would mean nothing. A mutant whose original is missing or not unique is an error, never skipped.
Exit status: 0 when no mutant is an error and at least 95 % are killed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(ROOT / "tests" / "proofs"))

import prove  # noqa: E402  (tests/proofs/prove.py)
from mutants import MUTANTS, Mutant  # noqa: E402
from scheduled_dedup_tools.firestore_emulator import Emulator  # noqa: E402

TARGET_SCORE = 0.95
BAKED = "baked/"
# A mutant's file "<prefix><path>" lives in the bake made with these answers (the rest default).
BAKES: dict[str, dict[str, str]] = {
    BAKED: {},
    "baked-cloud-run-job/": {"target": "cloud_run_job"},
    "baked-workflow/": {"target": "workflow"},
}
MUTANT_TIMEOUT_SECONDS = 900
# Copies and mutated sources are rewritten within one second at the same size: a stale .pyc would be
# loaded for the restored file, so none is written.
# The template's copy has no .git: tests/test_upgrade.py reads the previous release from this checkout's history.
ENV = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "TEMPLATE_HISTORY": str(ROOT)}
# The bakes' tools package (packages/): its copy's source goes first on every run's path, ahead of the checkout's
# editable install, so that a bake and the template's tests run the mutated copy.
TOOLS_SOURCE = Path("packages", "scheduled-dedup-tools", "src")
UNCOPIED = shutil.ignore_patterns(".git", "build", ".venv*", "node_modules", ".pytest_cache", "__pycache__")


def bake_of(mutant: Mutant) -> str:
    """The BAKES prefix of the mutant's file, or "" for a file of the template."""
    return next((prefix for prefix in BAKES if mutant.file.startswith(prefix)), "")


class Workspace:
    """The template's copy and its bakes (BAKES, each made on first use), in one temporary directory."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.template = root / "template"
        shutil.copytree(ROOT, self.template, ignore=UNCOPIED)
        ENV["PYTHONPATH"] = os.pathsep.join(filter(None, [str(self.template / TOOLS_SOURCE), ENV.get("PYTHONPATH")]))
        # The offline Terraform toolchain's own venvs take minutes to build: share the checkout's.
        for venv in (".venv-standin", ".venv-checkov"):
            if (ROOT / venv).is_dir():
                (self.template / venv).symlink_to(ROOT / venv)
        self.bakes: dict[str, Path] = {}
        self.bake = self.bake_dir(BAKED)

    def bake_dir(self, prefix: str) -> Path:
        if prefix not in self.bakes:
            output = self.root / ("bake" + prefix.removeprefix("baked").rstrip("/"))
            answers = [f"{key}={value}" for key, value in BAKES[prefix].items()]
            command = [sys.executable, "-m", "cookiecutter", "--no-input", "-o", str(output), str(self.template)]
            subprocess.run([*command, *answers], check=True, env=ENV, capture_output=True, timeout=300)
            (baked,) = output.iterdir()
            # The template's proofs laid in (tests/proofs/): a mutant's baked tests may be the bake's own or a proof.
            proved = self.root / ("proved" + prefix.removeprefix("baked").rstrip("/")) / baked.name
            self.bakes[prefix] = prove.lay(baked, proved)
        return self.bakes[prefix]

    def path_of(self, mutant: Mutant) -> Path:
        prefix = bake_of(mutant)
        relative = mutant.file.removeprefix(prefix)
        if prefix and relative.startswith("packages/"):  # the template's tools package, as a bake runs it
            return self.template / relative
        return self.bake_dir(prefix) / relative if prefix else self.template / mutant.file

    def cwd_of(self, mutant: Mutant) -> Path:
        prefix = bake_of(mutant)
        return self.bake_dir(prefix) if prefix else self.template


def pytest(cwd: Path, args: tuple[str, ...], env: dict[str, str]) -> tuple[int, str]:
    # -n 0: one narrow run, in one process (the template's addopts would start two workers).
    command = [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", "-n", "0", *args]
    try:
        result = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=MUTANT_TIMEOUT_SECONDS
        )
    except subprocess.TimeoutExpired:
        return -1, f"timed out after {MUTANT_TIMEOUT_SECONDS} s"
    return result.returncode, result.stdout[-3000:] + result.stderr[-2000:]


def verdict(returncode: int) -> str:
    """pytest's exit status -> killed | survived | error (see pytest's ExitCode)."""
    if returncode == 0:
        return "survived"
    if returncode in (1, 2, -1):  # tests failed; collection broke (a mutant that does not import); timed out
        return "killed"
    return "error"  # 3 internal error, 4 usage error (a test id that does not exist), 5 no tests collected


def killing_test(output: str) -> str:
    """The first test pytest's summary names as failed (or the collection error), to show why."""
    for line in output.splitlines():
        summary = re.match(r"(FAILED|ERROR) (\S+)", line)  # not the captured log's "ERROR    name:..."
        if summary:
            return summary.group(2).split("::")[-1]
    return "a timeout" if "timed out" in output else "(no FAILED line)"


@contextlib.contextmanager
def mutated(path: Path, mutant: Mutant) -> Iterator[None]:
    original = path.read_text()
    path.write_text(original.replace(mutant.original, mutant.replacement, 1))
    try:
        yield
    finally:
        path.write_text(original)


def snippet_problem(workspace: Workspace, mutant: Mutant) -> str | None:
    path = workspace.path_of(mutant)
    if not path.is_file():
        return f"{mutant.file}: no such file"
    count = path.read_text().count(mutant.original)
    if count != 1:
        return f"original snippet found {count} times in {mutant.file} (must be exactly once)"
    if mutant.original == mutant.replacement:
        return "replacement equals the original"
    return None


Union = dict[tuple[str, str], set[str | None]]


def test_union(mutants: list[Mutant]) -> Union:
    """Per (bake prefix or "", test) the -k selections the mutants use with it; None: the whole test."""
    union: Union = {}
    for mutant in mutants:
        baked = bake_of(mutant)
        args = list(mutant.tests)
        selection = None
        if "-k" in args:
            index = args.index("-k")
            selection = args[index + 1]
            del args[index : index + 2]
        for test in args:
            union.setdefault((baked, test), set()).add(selection)
    return union


def baseline_args(union: Union, baked: str) -> list[tuple[str, ...]]:
    """One pytest argument list per -k group (a whole file, or node ids), for the unmutated run."""
    whole, keyed = [], {}
    for (is_baked, test), selections in sorted(union.items()):
        if is_baked != baked:
            continue
        if None in selections:
            whole.append(test)
        else:
            keyed.setdefault(test, set()).update(selections)
    runs = [tuple(whole)] if whole else []
    for test, selections in keyed.items():
        runs.append((test, "-k", " or ".join(sorted(f"({s})" for s in selections))))
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*", help="mutant ids to run (default: all)")
    parser.add_argument("--check", action="store_true", help="only check the original snippets")
    args = parser.parse_args(argv)
    ids = [mutant.id for mutant in MUTANTS]
    duplicates = {i for i in ids if ids.count(i) > 1}
    unknown = set(args.ids) - set(ids)
    if duplicates or unknown:
        print(f"duplicate ids: {sorted(duplicates)}; unknown ids: {sorted(unknown)}", file=sys.stderr)
        return 2
    chosen = [mutant for mutant in MUTANTS if not args.ids or mutant.id in args.ids]

    with tempfile.TemporaryDirectory(prefix="mutants-") as scratch:
        print(f"==> copying the template and baking it under {scratch}", flush=True)
        workspace = Workspace(Path(scratch))
        problems = {mutant.id: snippet_problem(workspace, mutant) for mutant in chosen}
        if args.check:
            for mutant_id, problem in problems.items():
                print(f"{'error' if problem else 'ok':6} {mutant_id}{': ' + problem if problem else ''}")
            return 1 if any(problems.values()) else 0
        emulator = Emulator(log_path=Path(scratch) / "emulator.log").start()
        baked_env = {**ENV, "FIRESTORE_EMULATOR_HOST": emulator.host}
        try:
            return run_all(workspace, chosen, problems, baked_env)
        finally:
            emulator.stop()


def run_all(
    workspace: Workspace, chosen: list[Mutant], problems: dict[str, str | None], baked_env: dict[str, str]
) -> int:
    union = test_union([mutant for mutant in chosen if not problems[mutant.id]])
    for baked in sorted({prefix for prefix, _ in union}):
        cwd = workspace.bake_dir(baked) if baked else workspace.template
        env = prove.proof_env(cwd, baked_env) if baked else ENV  # the proofs' plugin and harness
        for run_args in baseline_args(union, baked):
            print(f"==> unmutated: pytest {' '.join(run_args)}", flush=True)
            returncode, output = pytest(cwd, run_args, env)
            if returncode != 0:
                print(f"the unmutated code fails its own tests; fix that first:\n{output}", file=sys.stderr)
                return 2

    results = []
    for number, mutant in enumerate(chosen, start=1):
        started = time.monotonic()
        detail = problems[mutant.id]
        if detail:
            status = "error"
        else:
            baked = bake_of(mutant)
            with mutated(workspace.path_of(mutant), mutant):
                cwd = workspace.cwd_of(mutant)
                returncode, output = pytest(cwd, mutant.tests, prove.proof_env(cwd, baked_env) if baked else ENV)
            status = verdict(returncode)
            detail = f"pytest exit status {returncode}\n{output}" if status == "error" else ""
        seconds = time.monotonic() - started
        results.append((mutant, status, detail))
        killer = f" by {killing_test(output)}" if status == "killed" else ""
        print(
            f"[{number:3}/{len(chosen)}] {status:8} {mutant.id:38} {mutant.file} ({seconds:.0f} s){killer}", flush=True
        )

    killed = [m for m, s, _ in results if s == "killed"]
    survived = [m for m, s, _ in results if s == "survived"]
    errors = [(m, d) for m, s, d in results if s == "error"]
    scored = len(killed) + len(survived)
    score = len(killed) / scored if scored else 0.0
    print(f"\nkilled {len(killed)}, survived {len(survived)}, errors {len(errors)}; score {score:.1%}", flush=True)
    for mutant in survived:
        print(f"  survived: {mutant.id} ({mutant.file}): {mutant.rule}")
    for mutant, detail in errors:
        print(f"  error: {mutant.id} ({mutant.file}): {detail}")
    return 0 if not errors and score >= TARGET_SCORE else 1


if __name__ == "__main__":
    sys.exit(main())
