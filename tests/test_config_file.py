"""Issue 17: one file, config.yaml, holds the jobs and their timing, and the project lives with it.

A bake with a nightly export that needs 10 minutes beside a */15 sync (each job its own deadline); a schedule
changed in the one file (the tools key no run twice); a job added (its Scheduler job in Terraform's plan, its run
served locally) - each on a real bake, its Terraform offline, its runs on the Firestore emulator.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zoneinfo
from pathlib import Path

import pytest
import yaml
from conftest import bake

from tests.terraform_offline import terraform

EXPORT = {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin", "attempt_deadline_seconds": 600}
SYNC = {"schedule": "*/15 * * * *"}


@pytest.fixture(scope="module")
def export_and_sync(tmp_path_factory) -> Path:
    """Every other answer at its default."""
    return bake(tmp_path_factory.mktemp("export-sync"), jobs={"export": EXPORT, "sync": SYNC})


def copy_of(project: Path, tmp_path: Path) -> Path:
    copy = tmp_path / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".terraform", "__pycache__", ".pytest_cache"))
    return copy


def python(project: Path, code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def emulator_env(emulator_host: str, project: Path) -> dict[str, str]:
    # The DEDUP_PROJECT override keeps this bake's runs apart from other bakes' on the shared emulator.
    own = "cfg-" + hashlib.sha256(str(project).encode()).hexdigest()[:12]
    return {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, "DEDUP_PROJECT": own}


def deliver(project: Path, env: dict[str, str], job_id: str, schedule_time: dt.datetime) -> str:
    """One Scheduler-like delivery to the function served by functions-framework (its WSGI app, in process)."""
    code = f"""
import functions_framework, yaml
config = yaml.safe_load(open("config.yaml"))
app = functions_framework.create_app(target="handle_scheduled_job", source="main.py")
answer = app.test_client().post("/", headers={{
    "X-CloudScheduler-JobName": config["slug"] + "-" + {job_id!r},
    "X-CloudScheduler-ScheduleTime": {schedule_time.strftime("%Y-%m-%dT%H:%M:%SZ")!r},
}})
print(answer.status_code, answer.get_data(as_text=True).strip())
"""
    return python(project, code, env).strip().splitlines()[-1]


def last_fire(hour: int, minute: int, zone: str, days_ago: int) -> dt.datetime:
    local = dt.datetime.now(zoneinfo.ZoneInfo(zone)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return (local - dt.timedelta(days=days_ago)).astimezone(dt.UTC)


def test_export_and_sync_bake_each_with_its_own_deadline(export_and_sync):
    """Today's template refuses this bake (one deadline for every job: "one fault can keep a run busy for
    1559 s" at */15) or the key (attempt_deadline_seconds is no job key)."""
    written = yaml.safe_load((export_and_sync / "config.yaml").read_text())
    assert written["jobs"]["export"] == EXPORT
    assert written["jobs"]["sync"] == SYNC
    printed = python(
        export_and_sync,
        "import config, settings, json; c = config.load(); d = settings.DedupConfig.from_env({}); print(json.dumps("
        "{j: [c.jobs[j].timing['attempt_deadline_seconds'], c.jobs[j].timing['lease_seconds'],"
        " d.jobs[c.scheduler_job_name(j)].attempt_deadline.total_seconds()] for j in ('export', 'sync')}))",
    )
    assert json.loads(printed) == {"export": [600, 660, 600.0], "sync": [300, 360, 300.0]}
    checked = subprocess.run([sys.executable, "config.py"], cwd=export_and_sync, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # Terraform gives each Scheduler job its own deadline, and the function the largest (root.tftest.hcl, mocks).
    tf = export_and_sync / "terraform"
    assert terraform(tf, "init", "-backend=false").returncode == 0
    tested = terraform(tf, "test", "-filter=tests/scheduled_dedup.tftest.hcl")
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]


def test_a_schedule_changed_in_the_one_file_keys_no_run_twice(export_and_sync, emulator_host, tmp_path):
    """The trap of two live sources: a schedule changed where Terraform reads it, the tools reading another
    copy, and backfill listing each real run as missing. With one file, the tools see what is deployed."""
    project = copy_of(export_and_sync, tmp_path)
    env = emulator_env(emulator_host, project)
    before = last_fire(2, 0, "Europe/Berlin", 2)
    assert deliver(project, env, "export", before).startswith("200 processed")
    config_file = project / "config.yaml"
    config_file.write_text(config_file.read_text().replace('schedule: "0 2 * * *"', 'schedule: "0 4 * * *"', 1))
    after = last_fire(4, 0, "Europe/Berlin", 1)
    assert deliver(project, env, "export", after).startswith("200 processed")

    def missed(since: dt.datetime, *extra: str) -> list[dict]:
        window = ["--since", since.isoformat(), "--until", (since + dt.timedelta(days=1)).isoformat()]
        result = subprocess.run(
            [sys.executable, "tools/runs.py", "missed", *window, "--job", "export", "--json", *extra],
            cwd=project, capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    day = after.astimezone(zoneinfo.ZoneInfo("Europe/Berlin")).replace(hour=0, minute=0)
    assert missed(day) == [], "the run at the new time is there: nothing to backfill"
    expected = missed(day, "--all")
    assert [(run["schedule_time"], run["state"]) for run in expected] == [
        (after.strftime("%Y-%m-%dT%H:%M:%SZ"), "completed")
    ]


def add_job(project: Path, job_id: str, schedule: str, work: bool) -> None:
    config_file = project / "config.yaml"
    config_file.write_text(config_file.read_text() + f'  {job_id}:\n    schedule: "{schedule}"\n')
    if work:
        job = project / "job.py"
        text = job.read_text()
        opening = re.search(r"WORK: dict\[.*\] = \{\n", text)
        work = f"def {job_id}_work(context: RunContext) -> None:\n    pass\n\n\n"  # the job's own work function
        job.write_text(
            text[: opening.start()] + work + text[opening.start() : opening.end()]
            + f'    "{job_id}": {job_id}_work,\n' + text[opening.end() :]
        )  # fmt: skip


def test_adding_a_job_is_config_yaml_and_job_work(export_and_sync, emulator_host, tmp_path):
    project = copy_of(export_and_sync, tmp_path)
    # config.yaml alone: the bake's own test says the two disagree.
    add_job(project, "weekly", "0 6 * * 1", work=False)
    alone = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config.py", "-k", "job_work"],
        cwd=project, capture_output=True, text=True, timeout=300, env=emulator_env(emulator_host, project),
    )  # fmt: skip
    assert alone.returncode != 0 and "config.yaml's jobs and job.py's WORK" in alone.stdout, alone.stdout[-2000:]
    # And its work in job.py: the test passes, Terraform plans its Scheduler job, its run is served.
    shutil.rmtree(project)
    project = copy_of(export_and_sync, tmp_path)
    add_job(project, "weekly", "0 6 * * 1", work=True)
    both = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config.py"],
        cwd=project, capture_output=True, text=True, timeout=300, env=emulator_env(emulator_host, project),
    )  # fmt: skip
    assert both.returncode == 0, both.stdout[-3000:]
    tf = project / "terraform"
    assert terraform(tf, "init", "-backend=false").returncode == 0
    graph = terraform(tf, "graph")
    assert graph.returncode == 0 and "google_cloud_scheduler_job.this" in graph.stdout
    # root.tftest.hcl: one Scheduler job per job of config.yaml, named <slug>-<job id> (plan and apply, mocks).
    planned = terraform(tf, "test", "-filter=tests/root.tftest.hcl")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    now = dt.datetime.now(dt.UTC)
    monday = now.replace(hour=6, minute=0, second=0, microsecond=0) - dt.timedelta(days=now.weekday())
    monday -= dt.timedelta(days=7) if monday > now else dt.timedelta(0)  # the last Monday 06:00 that has passed
    assert deliver(project, emulator_env(emulator_host, project), "weekly", monday).startswith("200 processed")


def terraform_reads(workdir: Path, text: str) -> object:
    """config.yaml as Terraform's root reads it (yamldecode), evaluated by Terraform in a root of one output."""
    workdir.mkdir()
    (workdir / "config.yaml").write_text(text)
    (workdir / "main.tf").write_text('output "config" { value = yamldecode(file("${path.root}/config.yaml")) }\n')
    applied = terraform(workdir, "apply", "-auto-approve", "-input=false", f"-state={workdir / 'state'}")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
    return json.loads(terraform(workdir, "output", "-json", f"-state={workdir / 'state'}").stdout)["config"]["value"]


def test_terraform_and_the_function_read_the_baked_config_yaml_alike(export_and_sync, tmp_path):
    """Issue 24 item 6: one reading of every value: Terraform's yamldecode (YAML 1.2) and PyYAML (YAML 1.1)."""
    text = (export_and_sync / "config.yaml").read_text()
    assert terraform_reads(tmp_path / "tf", text) == yaml.safe_load(text)


def test_a_deadline_the_two_readers_read_differently_is_refused_before_terraform_reads_it(export_and_sync, tmp_path):
    """`attempt_deadline_seconds: 0600`: 600 s to Terraform (Scheduler's deadline), 384 s to the function (its
    stop): `python config.py`, which `make deploy` runs first, refuses it naming the key, the value and the rule."""
    text, count = re.subn(
        r"(?m)^(  attempt_deadline_seconds:) \d+$", r"\1 0600", (export_and_sync / "config.yaml").read_text()
    )
    assert count == 1
    assert terraform_reads(tmp_path / "tf", text)["defaults"]["attempt_deadline_seconds"] == 600
    assert yaml.safe_load(text)["defaults"]["attempt_deadline_seconds"] == 384
    (tmp_path / "config.yaml").write_text(text)
    checked = subprocess.run(
        [sys.executable, "config.py", str(tmp_path / "config.yaml")],
        cwd=export_and_sync,
        capture_output=True,
        text=True,
    )
    (line,) = checked.stderr.splitlines()
    assert checked.returncode == 1 and "defaults.attempt_deadline_seconds='0600'" in line and "leading zero" in line
