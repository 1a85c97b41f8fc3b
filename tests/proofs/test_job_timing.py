"""Issue 24, per-job timing through the deliveries queue: every Cloud Tasks task carries its own job's deadline.

A job with its own attempt_deadline_seconds in config.yaml, as a user writes it; tools/runs.py as a user runs it
(`rerun`, `backfill --queue`), in a process of its own; the queue a stand-in of Cloud Tasks' REST API
(harness/tasks_standin.py) that keeps every task it is given and, like Cloud Tasks, cancels an attempt unanswered
by the task's dispatch deadline: 10 minutes unless the task sets one, which must lie in [15 s, 30 min]
(Task.dispatch_deadline, https://cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks).
Without its own, a re-run of a 30-minute job is cancelled at 10 minutes and retried while its work still runs.

And every setting as config.yaml states it: the settings the other proofs set through typed overrides
(config.Config.with_jobs, .everywhere) reach the function from the file, and a delivery obeys them.
"""

import datetime as dt
import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import records, scheduler_headers
from tasks_standin import TasksStandin

import config
import dedup
import rules

ROOT = Path(config.__file__).resolve().parent  # the bake (a copy with the proofs laid in)


def project_with(tmp_path: Path, jobs: dict[str, int]) -> Path:
    """A copy of the bake whose config.yaml adds a job per entry, {job id: its own attempt_deadline_seconds},
    with the waits the bake would write for it (rules.passing_waits)."""
    project = tmp_path / "project"
    ignored = shutil.ignore_patterns(".terraform", "terraform", "tests", "__pycache__", ".pytest_cache", ".venv*")
    shutil.copytree(ROOT, project, ignore=ignored)
    lines = []
    for job_id, deadline in jobs.items():
        waits = rules.passing_waits(5, 3, deadline + rules.LEASE_AFTER_DEADLINE_SECONDS) or {}
        lines.append(f'  {job_id}:\n    schedule: "0 4 * * *"\n    attempt_deadline_seconds: {deadline}\n')
        lines.extend(f"    {key}: {value}\n" for key, value in waits.items())
    config_file = project / "config.yaml"
    config_file.write_text(config_file.read_text() + "".join(lines))
    checked = subprocess.run([sys.executable, "config.py"], cwd=project, capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0, checked.stderr
    return project


def tool(project: Path, env: dict[str, str], *args: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "scheduled_dedup_tools.runs", *args],
        cwd=project, capture_output=True, text=True, timeout=300, env=env,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def queue(tmp_path):
    """(project, its environment, the stand-in of its deliveries queue): long jobs of 30 and 15 minutes, and one
    at Scheduler's shortest deadline, beside the bake's own. Nothing answers the tasks: what they carry is the
    test (one attempt each)."""
    project = project_with(tmp_path, {"long": 1800, "mid": 900, "brief": 15})
    # A project of its own keeps these runs apart from other bakes' on the shared emulator.
    own = "timing-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]
    file = project / "config.yaml"
    file.write_text(re.sub(r"(?m)^project: .*$", f"project: {own}", file.read_text(encoding="utf-8"), count=1))
    code = "import config; print(config.load().tasks_queue)"
    name = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    standin = TasksStandin(name.stdout.strip(), "http://127.0.0.1:9/", max_attempts=1)
    env = {**os.environ, "CLOUD_TASKS_EMULATOR_HOST": standin.host}
    yield project, env, standin
    standin.close()


def deadlines(standin: TasksStandin) -> dict[str, str]:
    """Each task's job (its X-CloudScheduler-JobName) -> its dispatch deadline ("1800s"; "" when it sets none)."""
    return {
        task["httpRequest"]["headers"]["X-CloudScheduler-JobName"]: task.get("dispatchDeadline", "")
        for task in standin.tasks
    }


def test_a_rerun_carries_its_own_jobs_deadline_to_the_queue(queue):
    """Today's task sets no dispatch deadline: Cloud Tasks cancels a re-run of the 30-minute job at 10 minutes."""
    project, env, standin = queue
    time = "2026-01-01T04:00:00Z"
    for job_id in ("long", "mid", "brief", "nightly"):
        args = [
            "rerun",
            job_id,
            time,
            "--reason",
            "input fixed",
            "--by",
            "ana@example.com",
            "--rerun-id",
            job_id,
            "--queue",
        ]
        assert "queued" in tool(project, env, *args)
    # Each job its own deadline; the bake's job the defaults' (300 s); both ends of Cloud Tasks' range taken.
    assert deadlines(standin) == {
        "nightly-report-long": "1800s",
        "nightly-report-mid": "900s",
        "nightly-report-brief": "15s",
        "nightly-report-nightly": "300s",
    }


def test_a_backfill_through_the_queue_carries_each_jobs_deadline(queue, emulator_host):
    """backfill --queue: one task per missing run, each with its own job's deadline."""
    project, env, standin = queue
    env = {**env, "FIRESTORE_EMULATOR_HOST": emulator_host}
    day = dt.datetime.now(dt.UTC).replace(hour=0, minute=0, second=0, microsecond=0) - dt.timedelta(days=2)
    window = ["--since", day.isoformat(), "--until", (day + dt.timedelta(days=1)).isoformat()]
    for job_id in ("long", "nightly"):
        tool(project, env, "backfill", *window, "--job", job_id, "--queue")
    assert deadlines(standin) == {"nightly-report-long": "1800s", "nightly-report-nightly": "300s"}


# ---------------------------------------------------------------- every setting as config.yaml states it

OTHER_PLACE = {"project": "other-project-1", "location": "us-central1"}
# Where the proofs key their runs (the fixtures' project, kept apart from other bakes'), served too.
TEST_PLACE = {"project": os.environ.get("DEDUP_TEST_PROJECT", "dedup-test-project"), "location": "europe-west1"}
REPORT = {  # every job key at a value no default has
    "schedule": "0 3 * * *",
    "time_zone": "Europe/Madrid",
    "max_lateness_seconds": 3600,
    "catch_up": True,
    "dst_gap": "skip",
    "attempt_deadline_seconds": 600,
    "lease_seconds": 700,
    "retry_count": 4,
    "min_backoff_seconds": 60,  # 60+120+240+400 = 820 s > the 700 s lease
    "max_backoff_seconds": 400,
    "max_doublings": 3,
    "max_retry_duration_seconds": 0,
}
HELD = {"schedule": "0 4 * * *", "paused": True, "overlap": "start"}


@pytest.fixture
def written(monkeypatch, tmp_path):
    """The bake's config.yaml with every project-level key and two jobs set as a user writes them, read by the
    function as it reads its own (config.CONFIG_FILE); the raw mapping."""
    raw = yaml.safe_load(config.CONFIG_FILE.read_text(encoding="utf-8"))
    raw["retention_seconds"] = 700000
    raw["audit_interval_minutes"] = 30
    raw["serve"] = [{"project": raw["project"], "location": raw["region"]}, OTHER_PLACE, TEST_PLACE]
    raw["defaults"] = {**raw["defaults"], "attempt_deadline_seconds": 320, "lease_seconds": 400}
    raw["jobs"] = {"report": REPORT, "held": HELD}
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    checked = subprocess.run([sys.executable, str(ROOT / "config.py"), str(path)], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    monkeypatch.setattr(config, "CONFIG_FILE", path)
    monkeypatch.setattr(config, "USED", None)  # the file's, as deployed
    return raw


def test_every_setting_reaches_the_function_as_config_yaml_states_it(written):
    settings = config.current()
    slug = written["slug"]
    assert (settings.project, settings.location) == (written["project"], written["region"])
    assert (settings.database, settings.collection) == (written["database"], written["collection"])
    assert settings.retention == dt.timedelta(seconds=700000)
    places = [(written["project"], written["region"]), *(tuple(place.values()) for place in (OTHER_PLACE, TEST_PLACE))]
    assert settings.served == tuple(places)
    assert settings.audit_job == f"{slug}_audit"
    assert (
        settings.tasks_queue == f"projects/{written['project']}/locations/{written['region']}/queues/{slug}-deliveries"
    )
    # The defaults block: the audit job's numbers, and a job's that sets none.
    held, report = settings.jobs[f"{slug}-held"], settings.jobs[f"{slug}-report"]
    assert settings.attempt_deadline_for(f"{slug}-held") == settings.attempt_deadline == dt.timedelta(seconds=320)
    assert settings.lease_for(f"{slug}-held") == settings.lease == dt.timedelta(seconds=400)
    assert settings.retry_window == dt.timedelta(seconds=rules.retry_window_seconds(320, 5, 300, 0))
    assert (held.paused, held.overlap, held.catch_up, held.max_lateness) == (True, "start", False, None)
    # A job's own.
    assert (report.schedule, report.time_zone, report.dst_gap, report.catch_up) == (
        "0 3 * * *",
        "Europe/Madrid",
        "skip",
        True,
    )
    assert report.max_lateness == dt.timedelta(seconds=3600)
    assert settings.attempt_deadline_for(f"{slug}-report") == dt.timedelta(seconds=600)
    assert settings.stop_after(f"{slug}-report") == dt.timedelta(seconds=590)
    assert settings.lease_for(f"{slug}-report") == dt.timedelta(seconds=700)
    assert settings.settle_for(f"{slug}-report") == dt.timedelta(
        seconds=700 + rules.retry_window_seconds(600, 4, 400, 0)
    )


def test_a_delivery_obeys_config_yamls_lateness_lease_and_retention(written, monkeypatch, http, collection, now, work):
    """Proven elsewhere through typed overrides (Config.with_jobs, .everywhere); here as the file states them: a
    delivery later than the job's max_lateness_seconds is recorded skipped, one on time claims with the job's own
    lease and keeps its record the file's retention."""
    monkeypatch.setattr(dedup, "utcnow", lambda: now)
    job = f"{written['slug']}-report"
    late = scheduler_headers(job, (now - dt.timedelta(seconds=3601)).strftime("%Y-%m-%dT%H:%M:%SZ"))
    answer = http.post("/", headers=late)
    assert answer.status_code == 200 and answer.text.startswith("skipped_late:"), answer.text
    on_time = now - dt.timedelta(seconds=3599)  # boundary: a second within the limit
    answer = http.post("/", headers=scheduler_headers(job, on_time.strftime("%Y-%m-%dT%H:%M:%SZ")))
    assert answer.status_code == 200 and answer.text.startswith("processed:"), answer.text
    assert len(work.calls) == 1
    (record,) = [r for r in records(collection).values() if r.get("status") == "completed"]
    assert record["lease_expires"] == now + dt.timedelta(seconds=700)
    assert record["expire_at"] == now + dt.timedelta(seconds=700000)
