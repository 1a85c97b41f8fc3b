"""Per-delivery CPU and the audit's Firestore reads per hour at 1, 100 and 1,000 jobs: this template's bake
side by side with a bake of a reference commit (default: the last commit before the incremental audit and
the once-per-process configuration), on Google's Firestore emulator.

    python benchmarks/scale.py [--reference REF] [--jobs 1 100 1000] [--deliveries 30] [--audits 4]

Each side is a default bake with N hourly jobs (`0 * * * *`, UTC) configured; benchmarks/scale_probe.py
measures it in a fresh process. Prints one Markdown table. Timings are printed, never asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "{{cookiecutter.project_slug}}" / "tools"))

from firestore_emulator import running_emulator  # noqa: E402

# The last commit whose audit re-read a whole day per audit and whose handler parsed the job table on
# every delivery (issue 19 items 11 and 12 were measured against it).
REFERENCE = "0a5c4c0"


def bake(template: Path, into: Path) -> Path:
    from cookiecutter.main import cookiecutter

    return Path(cookiecutter(str(template), no_input=True, output_dir=str(into)))


def template_at(ref: str, into: Path) -> Path:
    """The template as it was at `ref` (git archive: no checkout of this work tree is touched)."""
    into.mkdir(parents=True, exist_ok=True)
    archive = into / "template.tar"
    with open(archive, "wb") as out:
        subprocess.run(["git", "-C", str(ROOT), "archive", ref], stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(into / "template", filter="data")
    return into / "template"


def configure_jobs(project: Path, count: int, slug: str) -> dict[str, str]:
    """N hourly jobs, as the environment the deployed function gets (DEDUP_JOBS wins over the baked file); the
    first is the bake's own `nightly`, whose work job.py has: the deliveries go to it."""
    ids = ["nightly", *(f"j{i}" for i in range(1, count))]
    jobs = {f"{slug}-{job_id}": {"job_id": job_id, "schedule": "0 * * * *", "time_zone": "Etc/UTC"} for job_id in ids}
    return {"DEDUP_JOBS": json.dumps(jobs)}


def run_probe(script: str, project: Path, count: int, host: str, arguments: list[str]) -> dict:
    """benchmarks/<script> in a fresh process from `project`'s directory with `count` jobs, a collection of its own:
    the JSON object it prints last."""
    env = {
        **os.environ,
        **configure_jobs(project, count, project.name),
        "FIRESTORE_EMULATOR_HOST": host,
        # ref / now: a collection a side
        "DEDUP_COLLECTION": f"{Path(script).stem}-{project.parent.parent.name}-{count}",
    }
    result = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *arguments],
        cwd=project, env=env, capture_output=True, text=True, timeout=3600,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"{script} failed in {project} with {count} jobs:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.splitlines()[-1])


def probe(project: Path, count: int, host: str, args) -> dict:
    return run_probe(
        "scale_probe.py", project, count, host, ["--deliveries", str(args.deliveries), "--audits", str(args.audits)]
    )


def table(rows: list[tuple[int, dict, dict]], reference: str) -> str:
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
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", default=REFERENCE, help="git ref of the template to compare with")
    parser.add_argument("--jobs", type=int, nargs="+", default=[1, 100, 1000])
    parser.add_argument("--deliveries", type=int, default=30)
    parser.add_argument("--audits", type=int, default=4, help="hourly audits per side (the first is reported apart)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="scale-") as scratch, running_emulator() as host:
        scratch = Path(scratch)
        old = bake(template_at(args.reference, scratch / "ref"), scratch / "ref" / "bake")
        new = bake(ROOT, scratch / "now" / "bake")
        rows = [(count, probe(old, count, host, args), probe(new, count, host, args)) for count in args.jobs]
    print(table(rows, args.reference))
    if args.json:
        Path(args.json).write_text(json.dumps([{"jobs": c, "reference": o, "now": n} for c, o, n in rows], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
