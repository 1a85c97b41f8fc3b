"""What benchmarks/scale.py and benchmarks/stop_cost.py share: a default bake of this template and one of a reference
commit, each measured with N jobs configured by a probe script in a fresh process, on one Google Firestore emulator;
their arguments (--reference, --jobs, --json) and their JSON."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent

from scheduled_dedup_tools.firestore_emulator import running_emulator  # noqa: E402

# One row per job count: (jobs, the reference bake's figures, this template's).
Rows = list[tuple[int, dict, dict]]


def bake(template: Path, into: Path) -> Path:
    """A default bake of `template`; what its hooks print goes to stderr (they run as processes of their own, writing
    to file descriptor 1): stdout is the scripts' table."""
    from cookiecutter.main import cookiecutter

    sys.stdout.flush()
    stdout = os.dup(1)
    os.dup2(2, 1)
    try:
        return Path(cookiecutter(str(template), no_input=True, output_dir=str(into)))
    finally:
        sys.stdout.flush()
        os.dup2(stdout, 1)
        os.close(stdout)


def template_at(ref: str, into: Path) -> Path:
    """The template as it was at `ref` (git archive: no checkout of this work tree is touched)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "template.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "template", filter="data")
    return into / "template"


def configure_jobs(project: Path, count: int, slug: str, collection: str) -> dict[str, str]:
    """N hourly jobs and a collection of the probe's own; the first job is the bake's own `nightly`, whose work job.py
    has: the deliveries go to it. As a config.yaml of its own (CONFIG_YAML), and as the DEDUP_* variables a
    reference bake older than issue 28 reads."""
    ids = ["nightly", *(f"j{i}" for i in range(1, count))]
    jobs = {f"{slug}-{job_id}": {"job_id": job_id, "schedule": "0 * * * *", "time_zone": "Etc/UTC"} for job_id in ids}
    variables = {"DEDUP_JOBS": json.dumps(jobs), "DEDUP_COLLECTION": collection}
    if not (project / "config.yaml").is_file():  # a reference older than config.yaml: the variables alone
        return variables
    raw = yaml.safe_load((project / "config.yaml").read_text(encoding="utf-8"))
    raw |= {"collection": collection, "jobs": {job_id: {"schedule": "0 * * * *"} for job_id in ids}}
    path = project.parent / f"config-{collection}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return {"CONFIG_YAML": str(path), **variables}


def run_probe(script: str, project: Path, count: int, host: str, arguments: list[str]) -> dict:
    """benchmarks/<script> in a fresh process from `project`'s directory with `count` jobs, a collection of its own:
    the JSON object it prints last."""
    env = {
        **os.environ,
        # ref / now: a collection a side
        **configure_jobs(project, count, project.name, f"{Path(script).stem}-{project.parent.parent.name}-{count}"),
        "FIRESTORE_EMULATOR_HOST": host,
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *arguments],
        cwd=project, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"{script} failed in {project} with {count} jobs:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def arguments(description: str, reference: str) -> argparse.ArgumentParser:
    """The arguments both comparisons take; a script adds its own."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--reference", default=reference, help="git ref of the template to compare with")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    return parser


def measure_both(args: argparse.Namespace, probe: Callable[[Path, int, str], dict], prefix: str) -> Rows:
    """`probe(bake, jobs, emulator host)` on the reference bake and on this template's, at each job count (the two
    interleaved: they see the same machine); the figures as JSON too if --json asks."""
    with tempfile.TemporaryDirectory(prefix=prefix) as scratch, running_emulator() as host:
        scratch = Path(scratch)
        old = bake(template_at(args.reference, scratch / "ref"), scratch / "ref" / "bake")
        new = bake(ROOT, scratch / "now" / "bake")
        rows = [(count, probe(old, count, host), probe(new, count, host)) for count in args.jobs]
    if args.json:
        Path(args.json).write_text(json.dumps([{"jobs": c, "reference": o, "now": n} for c, o, n in rows], indent=2))
    return rows
