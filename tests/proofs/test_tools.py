"""The operator command (scheduled_dedup_tools.runs) against the handler and Google's Firestore emulator."""

import datetime as dt
import http.server
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import time_machine
from conftest import records, scheduler_headers
from scheduled_dedup_tools import runs
from scheduled_dedup_tools.firestore_emulator import Emulator

import config as configuration
from keys import JOB_NAME_HEADER, LOCATION_HEADER, PROJECT_HEADER, SCHEDULE_TIME_HEADER
from ledger import RunLedger

PROJECT = Path(__file__).resolve().parent.parent  # the bake the proofs are laid in: the tools run in it


@pytest.fixture
def recent(now):
    """A schedule time inside the retention window and any job's max_lateness_seconds (the matrix's least: an hour),
    with a non-UTC offset (run ids normalise to UTC)."""
    moment = (now - dt.timedelta(minutes=10)).astimezone(dt.timezone(dt.timedelta(hours=2)))
    return moment.isoformat()


@pytest.fixture
def deployed_job():
    """(Scheduler job name, job id) of the bake's first job not paused (a paused one's deliveries skip the work):
    Scheduler delivers the name, the answers say the id."""
    name, spec = sorted((name, spec) for name, spec in configuration.current().jobs.items() if not spec.paused)[0]
    return name, spec.job_id


def test_run_id_of_either_name_is_the_document_the_deployed_delivery_writes(
    http, collection, recent, capsys, work, deployed_job
):
    name, job_id = deployed_job
    assert http.post("/", headers=scheduler_headers(name, recent)).status_code == 200
    printed = []
    for job in (job_id, name):
        assert runs.main(["run-id", job, recent]) == 0
        printed.append(capsys.readouterr().out.strip())
    assert printed == list(records(collection)) * 2


def test_run_id_keys_other_projects_and_locations_apart(capsys, deployed_job):
    ids = set()
    # Neither is the baked default, whatever project and region the bake chose.
    for extra in ([], ["--project", "not-the-baked-project"], ["--location", "zz-nowhere1"]):
        assert runs.main(["run-id", deployed_job[1], "2026-01-01T00:00:00Z", *extra]) == 0
        ids.add(capsys.readouterr().out.strip())
    assert len(ids) == 3


def test_run_id_refuses_a_time_that_is_not_rfc3339(capsys, deployed_job):
    assert runs.main(["run-id", deployed_job[1], "2026-01-01 00:00"]) == 2
    assert "TIME='2026-01-01 00:00': is not an RFC 3339 timestamp" in capsys.readouterr().err


def test_a_job_the_project_lacks_is_refused_in_one_line_naming_the_jobs(capsys, deployed_job):
    assert runs.main(["run-id", "no-such-job", "2026-01-01T00:00:00Z"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("JOB='no-such-job': not a job of this project: ") and "\n" not in err
    assert f"{deployed_job[1]} ({deployed_job[0]})" in err


def a_record(status, now, lease=dt.timedelta(0), expire=dt.timedelta(days=1)):
    return {
        "status": status,
        "attempt_id": "a",
        "attempts": 1,
        "lease_expires": now + lease,
        "expire_at": now + expire,
        "job_name": "nightly",
        "schedule_time": now,
        "execution": "projects/p/locations/r/jobs/j/executions/e",
    }


def test_stuck_lists_only_in_progress_runs_whose_lease_expired(collection, now):
    collection.document("stuck").set(a_record("in_progress", now, lease=-dt.timedelta(minutes=1)))
    collection.document("running").set(a_record("in_progress", now, lease=dt.timedelta(minutes=5)))
    collection.document("done").set(a_record("completed", now, lease=-dt.timedelta(minutes=1)))
    assert [run for run, _ in RunLedger(configuration.current()).stuck_runs(now)] == ["stuck"]


def test_the_followed_runs_are_the_started_ones_not_past_their_expire_at(collection, now):
    """A proxy target follows its `started` runs' executions; one past expire_at counts as absent (TTL)."""
    collection.document("running").set(a_record("started", now, expire=dt.timedelta(minutes=1)))
    collection.document("expired").set(a_record("started", now, expire=dt.timedelta(0)))
    collection.document("done").set(a_record("completed", now))
    assert [run.run_id for run in RunLedger(configuration.current()).started_runs(now)] == ["running"]


def test_show_by_job_id_prints_the_deployed_run(http, collection, recent, capsys, work, deployed_job):
    name, job_id = deployed_job
    assert runs.main(["show", job_id, recent]) == 1
    assert "no record" in capsys.readouterr().out
    http.post("/", headers=scheduler_headers(name, recent))
    for job in (job_id, name):
        assert runs.main(["show", job, recent]) == 0
        shown = capsys.readouterr().out
        assert list(records(collection))[0] in shown and '"status": "completed"' in shown


@pytest.fixture
def receiver():
    """A local HTTP server that answers 200 and keeps the headers of each POST (a stand-in for the function)."""
    sent = []

    class Recorder(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            sent.append(self.headers)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1], sent
    server.shutdown()


def test_fire_sends_what_cloud_scheduler_sends(deployed_job, receiver):
    """`runs.py fire JOB`: the Scheduler job name, this minute in UTC (or the time given), the project/location."""
    port, sent = receiver
    fire = ["fire", deployed_job[1], "--port", str(port)]
    at = dt.datetime(2026, 3, 4, 5, 6, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    with time_machine.travel(at, tick=False):
        assert runs.main([*fire, "--project", "p-123456", "--location", "europe-west1"]) == 0
    assert runs.main([*fire, "--time", "2026-03-04T05:06:00+01:00"]) == 0
    names = (JOB_NAME_HEADER, SCHEDULE_TIME_HEADER, PROJECT_HEADER, LOCATION_HEADER, "Authorization")
    assert [tuple(headers.get(name) for name in names) for headers in sent] == [
        (deployed_job[0], "2026-03-04T04:06:00Z", "p-123456", "europe-west1", None),
        (deployed_job[0], "2026-03-04T04:06:00Z", None, None, None),  # none given: the function keys it by its own
    ]


FAKE_GCLOUD = """#!/bin/sh
echo "$@" >> "$GCLOUD_CALLS"
if [ "$*" = "config get-value account" ]; then echo "$ACTIVE_ACCOUNT"; else echo "token-$ACTIVE_ACCOUNT"; fi
"""


@pytest.mark.parametrize(
    ("account", "impersonate", "audience"),
    [
        ("ana@example.com", "", False),
        ("vm@p.iam.gserviceaccount.com", "", True),
        ("ana@example.com", "inv@p.iam.gserviceaccount.com", True),
    ],
    ids=["a-person", "a-vm", "impersonating"],
)
def test_a_delivery_to_a_url_carries_an_identity_token_for_it(
    tmp_path, receiver, deployed_job, account, impersonate, audience
):
    """fire and backfill --url: one token from gcloud, for the function's URL whenever gcloud can say so."""
    port, sent = receiver
    (tmp_path / "gcloud").write_text(FAKE_GCLOUD)
    (tmp_path / "gcloud").chmod(0o755)
    url = f"http://127.0.0.1:{port}/"
    environ = {
        "PATH": f"{tmp_path}:{os.environ['PATH']}",
        "GCLOUD_CALLS": str(tmp_path / "calls"),
        "ACTIVE_ACCOUNT": account,
    }
    result = run_tool(
        "fire", deployed_job[1], "--url", url, *(["--impersonate", impersonate] if impersonate else []), **environ
    )
    assert result.returncode == 0, result.stderr
    assert sent[0]["Authorization"] == f"Bearer token-{account}"
    (token_call,) = [call for call in (tmp_path / "calls").read_text().splitlines() if "print-identity-token" in call]
    assert (f"--audiences={url}" in token_call) is audience
    assert (f"--impersonate-service-account={impersonate}" in token_call) is bool(impersonate)


def test_every_tool_resolves_a_job_id_to_its_scheduler_job_name():
    """`runs.py fire nightly` is keyed and given to the work as the deployed job's deliveries are."""
    config = configuration.current()
    for name, job in config.jobs.items():
        assert runs.resolve_job(config, job.job_id) == name
        assert runs.resolve_job(config, name) == name
        assert runs.selected_jobs(config, job.job_id) == {name: job}
    assert runs.resolve_job(config, config.audit_job) == config.audit_job


def test_fire_refuses_a_bad_time_before_sending(capsys, deployed_job):
    assert runs.main(["fire", deployed_job[1], "--time", "tomorrow", "--port", "9"]) == 2
    assert "TIME='tomorrow'" in capsys.readouterr().err


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_tool(*arguments: str, **environ: str) -> subprocess.CompletedProcess[str]:
    env = {key: value for key, value in os.environ.items() if key not in ("FIRESTORE_EMULATOR_HOST", *environ)}
    env.update({key: value for key, value in environ.items() if value})
    command = [sys.executable, "-m", "scheduled_dedup_tools.runs", *arguments]
    return subprocess.run(command, cwd=PROJECT, env=env, capture_output=True, text=True, timeout=60, check=False)


@pytest.mark.parametrize("command", [["stuck"], ["show", "{job}", "2026-01-01T00:00:00Z"]], ids=["stuck", "show"])
def test_no_emulator_running_is_one_line_naming_the_fix(command, deployed_job):
    host = f"127.0.0.1:{closed_port()}"
    result = run_tool(*[arg.format(job=deployed_job[1]) for arg in command], FIRESTORE_EMULATOR_HOST=host)
    assert result.returncode == 1
    assert result.stderr.strip() == runs.NO_EMULATOR.format(host)


def test_no_credentials_is_one_line_naming_the_fix(tmp_path):
    """No emulator, no application-default credentials (an empty gcloud config), not on Google Cloud."""
    result = run_tool("stuck", CLOUDSDK_CONFIG=str(tmp_path), NO_GCE_CHECK="True", GOOGLE_APPLICATION_CREDENTIALS="")
    assert result.returncode == 2
    assert result.stderr.strip() == runs.NO_CREDENTIALS


def test_a_failed_save_of_the_emulators_data_keeps_the_last_one_and_leaves_nothing_beside(tmp_path):
    """make dev's save at Ctrl-C: an export the emulator does not make leaves the previous data as it was."""
    data = tmp_path / ".emulator-data"
    (data / "previous").mkdir(parents=True)
    with pytest.raises(OSError):
        Emulator(port=closed_port(), data=data).save("p", "(default)")  # nothing listens there
    assert [path.name for path in tmp_path.iterdir()] == [".emulator-data"]
    assert [path.name for path in data.iterdir()] == ["previous"]
