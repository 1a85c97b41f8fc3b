"""Issue 24, per-job timing through the deliveries queue: every Cloud Tasks task carries its own job's deadline.

A job with its own attempt_deadline_seconds in config.yaml, as a user writes it; tools/runs.py as a user runs it
(`rerun`, `backfill --queue`), in a process of its own; the queue a stand-in of Cloud Tasks' REST API
(harness/tasks_standin.py) that keeps every task it is given and, like Cloud Tasks, cancels an attempt unanswered
by the task's dispatch deadline: 10 minutes unless the task sets one, which must lie in [15 s, 30 min]
(Task.dispatch_deadline, https://cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks).
Without its own, a re-run of a 30-minute job is cancelled at 10 minutes and retried while its work still runs.
"""

import datetime as dt
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import config
import pytest
import rules
from tasks_standin import TasksStandin

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
        [sys.executable, "tools/runs.py", *args], cwd=project, capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


@pytest.fixture
def queue(tmp_path):
    """(project, its environment, the stand-in of its deliveries queue): long jobs of 30 and 15 minutes, and one
    at Scheduler's shortest deadline, beside the bake's own. Nothing answers the tasks: what they carry is the
    test (one attempt each)."""
    project = project_with(tmp_path, {"long": 1800, "mid": 900, "brief": 15})
    own = "timing-" + hashlib.sha256(str(tmp_path).encode()).hexdigest()[:12]
    code = "import settings; print(settings.baked_settings()['DEDUP_TASKS_QUEUE'])"
    name = subprocess.run([sys.executable, "-c", code], cwd=project, capture_output=True, text=True, check=True)
    standin = TasksStandin(name.stdout.strip(), "http://127.0.0.1:9/", max_attempts=1)
    env = {**os.environ, "CLOUD_TASKS_EMULATOR_HOST": standin.host, "DEDUP_PROJECT": own}
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
        args = ["rerun", job_id, time, "--reason", "input fixed", "--by", "ana@example.com", "--rerun-id", job_id]
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
