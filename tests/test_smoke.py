"""`make smoke` of a bake, end to end on this machine: the bake's `tools/runs.py smoke` against a real
functions-framework server of the bake, Google's Firestore emulator, and a local stand-in for the four
Google REST APIs it calls (Scheduler jobs.run, Logging entries.list, the Firestore field's TTL state,
Monitoring alertPolicies.list). The stand-in's Force run does what Google's guide says one does: it
delivers the job with the NEXT scheduled time as X-CloudScheduler-ScheduleTime. A proxy bake's server also talks
gRPC to a local fake of the Run v2 API, which starts the executions and says how each is doing.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import datetime as dt
import http.server
import json
import os
import re
import subprocess
import sys
import threading
import time
import urllib.request
import zoneinfo
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
import yaml
from conftest import bake, config_file
from cronsim import CronSim
from google.cloud import run_v2
from google.longrunning import operations_pb2
from google.protobuf import any_pb2
from scheduled_dedup_tools.firestore_emulator import free_port

pytestmark = pytest.mark.bake


class StandIn(http.server.ThreadingHTTPServer):
    """The Google APIs `runs.py smoke` calls. `ttl_state`, `policies` and `scheduler_status` set what it answers."""

    def __init__(self, function_url: str, settings: dict, log_path: Path) -> None:
        super().__init__(("127.0.0.1", 0), StandInHandler)
        self.function_url = function_url
        self.settings = settings
        self.log_path = log_path
        self.ttl_state = "ACTIVE"
        self.policies = [{"displayName": "p: run missed", "enabled": True}]
        self.scheduler_status = 200
        self.schedule_time_header = None  # None: the next fire time, as a Force run sends
        self.requests: list[str] = []
        self.seen: list[tuple[str, str]] = []  # (log line, when first seen: its entry's timestamp), in log order

    @property
    def root(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def force_run(self, job_name: str) -> None:
        job = self.settings["jobs"][job_name.removeprefix(self.settings["slug"] + "-")]
        zone = zoneinfo.ZoneInfo(job.get("time_zone", "Etc/UTC"))
        next_fire = next(CronSim(job["schedule"], dt.datetime.now(zone))).astimezone(dt.UTC)
        self.deliver(job_name, self.schedule_time_header or next_fire.strftime("%Y-%m-%dT%H:%M:%SZ"))

    def deliver(self, job_name: str, schedule_time: str) -> None:
        headers = {
            "X-CloudScheduler-JobName": job_name,
            "X-CloudScheduler-ScheduleTime": schedule_time,
            "X-Scheduler-Project": self.settings["project"],
            "X-Scheduler-Location": self.settings["region"],
        }
        request = urllib.request.Request(self.function_url, data=b"", headers=headers, method="POST")
        with contextlib.suppress(urllib.error.HTTPError):  # the answer is the function's: smoke reads its line
            urllib.request.urlopen(request, timeout=30).close()

    def stamp_lines(self) -> None:
        """Stamps each new log line with now: Cloud Logging's entry timestamp, which entries.list filters on."""
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        lines = self.log_path.read_text().splitlines()
        self.seen += [(text, now) for text in lines[len(self.seen) :]]

    def outcome_lines(self, job_name: str, schedule_time: str, since: str) -> list[dict]:
        self.stamp_lines()
        lines = []
        for text, stamp in self.seen:
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if line.get("job") == job_name and line.get("schedule_time") == schedule_time and stamp >= since:
                if "outcome" not in line:
                    continue
                lines.append({"jsonPayload": line, "timestamp": stamp})
        return lines[::-1]  # newest first, as orderBy "timestamp desc"


class StandInHandler(http.server.BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, *args) -> None:
        pass

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        self.server.requests.append(f"POST {self.path}")
        if match := re.fullmatch(r"/v1/projects/[^/]+/locations/[^/]+/jobs/([^/:]+):run", self.path):
            if self.server.scheduler_status != 200:
                return self._answer(self.server.scheduler_status, {"error": {"message": "PERMISSION_DENIED"}})
            self.server.stamp_lines()  # what was logged before this run is older than the smoke's `since`
            self.server.force_run(match.group(1))
            return self._answer(200, {"name": match.group(1)})
        if self.path == "/v2/entries:list":
            job = re.search(r'jsonPayload\.job="([^"]+)"', body["filter"]).group(1)
            schedule_time = re.search(r'jsonPayload\.schedule_time="([^"]+)"', body["filter"]).group(1)
            since = re.search(r'timestamp>="([^"]+)"', body["filter"]).group(1)
            return self._answer(200, {"entries": self.server.outcome_lines(job, schedule_time, since)})
        self._answer(404, {"error": {"message": f"no stand-in for {self.path}"}})

    def do_GET(self) -> None:
        self.server.requests.append(f"GET {self.path}")
        if re.fullmatch(r"/v1/projects/[^/]+/databases/[^/]+/collectionGroups/[^/]+/fields/expire_at", self.path):
            return self._answer(200, {"ttlConfig": {"state": self.server.ttl_state}})
        if re.fullmatch(r"/v3/projects/[^/]+/alertPolicies\?filter=.*", self.path):
            return self._answer(200, {"alertPolicies": self.server.policies})
        self._answer(404, {"error": {"message": f"no stand-in for {self.path}"}})


@pytest.fixture(scope="module")
def deployed(tmp_path_factory, emulator_host):
    """A default bake served by a real functions-framework server, and the stand-in APIs in front of it."""
    project = bake(tmp_path_factory.mktemp("smoke"))
    collection = f"smoke-{os.getpid()}"
    own = config_file(project, project.parent / "config-smoke.yaml", collection=collection)
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, **own}
    with serving(project, env) as stand_in:
        yield project, stand_in, {**env, "SMOKE_API_ROOT": stand_in.root}, collection


@contextlib.contextmanager
def serving(project: Path, env: dict) -> Iterator[StandIn]:
    """The bake's function on a real functions-framework server with `env`, and the stand-in APIs in front of it."""
    settings = yaml.safe_load((project / "config.yaml").read_text())  # the bake's one configuration file
    port = free_port()
    log_path = project / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "functions_framework",
                "--target",
                "handle_scheduled_job",
                "--source",
                "main.py",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],  # fmt: skip
            cwd=project,
            env={**env, "PYTHONUNBUFFERED": "1"},
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    stand_in = StandIn(f"http://127.0.0.1:{port}/", settings, log_path)
    threading.Thread(target=stand_in.serve_forever, daemon=True).start()
    try:
        _wait_until_serving(port, server)
        yield stand_in
    finally:
        stand_in.shutdown()
        server.kill()
        server.wait(timeout=10)


def _wait_until_serving(port: int, server: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/robots.txt", timeout=5)
        except urllib.error.HTTPError:
            return  # functions-framework answers 404 for robots.txt once loaded
        except OSError:
            assert server.poll() is None, "the function server died at start"
            time.sleep(0.1)
    pytest.fail("the function server did not start in 60 s")


def smoke(project: Path, env: dict, *args: str, log_wait: str = "10") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "scheduled_dedup_tools.runs", "smoke", "--log-wait", log_wait, *args],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_healthy_deployment_passes_every_step_and_the_run_is_recorded(deployed):
    project, stand_in, env, collection = deployed
    stand_in.ttl_state, stand_in.policies, stand_in.scheduler_status = "ACTIVE", [{"enabled": True}], 200
    result = smoke(project, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert [line.split()[0] for line in result.stdout.splitlines()[:5]] == ["PASS"] * 5
    assert result.stdout.splitlines()[-1] == "smoke: PASS (5/5 steps)"
    run_id = re.search(r"run_id=([0-9a-f]{64})", result.stdout).group(1)
    from google.cloud import firestore  # the record smoke read is really there, completed

    client = firestore.Client(project=stand_in.settings["project"], database=stand_in.settings["database"])
    assert client.collection(collection).document(run_id).get().to_dict()["status"] == "completed"


@pytest.mark.parametrize(
    ("change", "failed_step"),
    [
        ({"ttl_state": "CREATING"}, "TTL policy"),
        ({"ttl_state": "NEEDS_REPAIR"}, "TTL policy"),
        ({"policies": [{"displayName": "p: run missed", "enabled": False}]}, "alert policies"),
        ({"policies": []}, "alert policies"),
        ({"scheduler_status": 403}, "force run"),
    ],
)
def test_each_broken_part_fails_its_own_step_and_the_whole_smoke(deployed, change, failed_step):
    project, stand_in, env, _ = deployed
    stand_in.ttl_state, stand_in.policies, stand_in.scheduler_status = "ACTIVE", [{"enabled": True}], 200
    for name, value in change.items():
        setattr(stand_in, name, value)
    result = smoke(project, env)
    assert result.returncode == 1
    failed = [line.split(None, 1)[1] for line in result.stdout.splitlines() if line.startswith("FAIL ")]
    assert failed and failed[0].startswith(failed_step), result.stdout
    assert result.stdout.splitlines()[-1].startswith("smoke: FAIL")


def test_a_force_run_the_function_does_not_process_fails_the_outcome_and_record_steps(deployed):
    project, stand_in, env, _ = deployed
    stand_in.ttl_state, stand_in.policies, stand_in.scheduler_status = "ACTIVE", [{"enabled": True}], 200
    stand_in.schedule_time_header = "not-a-time"  # answered 400 invalid_delivery: no run, no record, no job field
    stand_in.stamp_lines()  # the earlier tests' lines of the same slot (duplicates pass) are logged long ago
    stand_in.seen = [(text, "2000-01-01T00:00:00.000000Z") for text, _ in stand_in.seen]
    try:
        result = smoke(project, env, log_wait="2")
    finally:
        stand_in.schedule_time_header = None
    assert result.returncode == 1
    steps = {line.split()[1]: line.split()[0] for line in result.stdout.splitlines()[:5]}
    assert result.stdout.splitlines()[1].startswith("FAIL  outcome line")
    assert "no outcome line of nightly-report-nightly at " in result.stdout
    assert " in Cloud Logging after 2 s" in result.stdout
    assert result.stdout.splitlines()[2].startswith("FAIL  run record")
    assert steps["force"] == steps["TTL"] == steps["alert"] == "PASS"


def test_a_run_whose_record_is_not_found_completed_fails_the_record_step(deployed):
    """The function recorded the run in its collection; smoke reading another one finds no completed record."""
    project, stand_in, env, _ = deployed
    stand_in.ttl_state, stand_in.policies, stand_in.scheduler_status = "ACTIVE", [{"enabled": True}], 200
    other = config_file(project, project.parent / "config-other.yaml", collection="not-the-functions")
    result = smoke(project, {**env, **other})
    assert result.returncode == 1
    assert [line.split()[0] for line in result.stdout.splitlines()[:5]] == ["PASS", "PASS", "FAIL", "PASS", "PASS"]
    assert result.stdout.splitlines()[2].endswith("status=None"), result.stdout


def test_an_unknown_job_is_refused_in_one_line(deployed):
    project, _, env, _ = deployed
    result = smoke(project, env, "--job", "no-such-job")
    assert result.returncode == 1
    assert result.stderr.startswith("smoke: FAIL (--job='no-such-job': not a job of this project: ")
    assert len(result.stderr.splitlines()) == 1 and not result.stdout


def test_a_project_without_jobs_is_refused_in_one_line(deployed):
    project, _, env, _ = deployed
    result = smoke(project, {**env, **config_file(project, project.parent / "config-no-jobs.yaml", jobs={})})
    assert result.returncode == 1
    assert result.stderr.startswith("smoke: FAIL (config-no-jobs.yaml: jobs={}: must be a non-empty mapping")
    assert len(result.stderr.splitlines()) == 1 and not result.stdout


def test_without_credentials_smoke_names_the_fix_in_one_line(tmp_path, deployed):
    project, _, env, _ = deployed
    env = {k: v for k, v in env.items() if k != "SMOKE_API_ROOT"}
    env["GOOGLE_APPLICATION_CREDENTIALS"] = str(tmp_path / "missing.json")
    result = smoke(project, env)
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "smoke: FAIL (no Google credentials: run `gcloud auth application-default login` first)"
    )


class FakeRunApi:
    """The two Run v2 methods a cloud_run_job bake calls, on a local gRPC server: RunJob starts an execution
    (its answer: a long-running operation whose metadata is the execution), GetExecution shows it `running` (no
    completion time) until the test sets `ended` to succeeded or failed, as Run v2's task counts say it."""

    def __init__(self, job: str) -> None:
        self.job = job
        self.started: list[str] = []
        self.ended: dict[str, str] = {}  # execution name -> succeeded | failed

        def method(handle, request_type):
            return grpc.unary_unary_rpc_method_handler(
                handle, request_deserializer=request_type.deserialize, response_serializer=lambda raw: raw
            )

        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        jobs = {"RunJob": method(self.run_job, run_v2.RunJobRequest)}
        executions = {"GetExecution": method(self.get_execution, run_v2.GetExecutionRequest)}
        self.server.add_generic_rpc_handlers([
            grpc.method_handlers_generic_handler("google.cloud.run.v2.Jobs", jobs),
            grpc.method_handlers_generic_handler("google.cloud.run.v2.Executions", executions),
        ])  # fmt: skip
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def run_job(self, request: run_v2.RunJobRequest, context) -> bytes:
        self.started.append(f"{request.name}/executions/smoke-{len(self.started) + 1}")
        metadata = any_pb2.Any()
        metadata.Pack(run_v2.Execution.pb(run_v2.Execution(name=self.started[-1])))
        return operations_pb2.Operation(name="operations/smoke", metadata=metadata).SerializeToString()

    def get_execution(self, request: run_v2.GetExecutionRequest, context) -> bytes:
        ended = self.ended.get(request.name)
        done = {"completion_time": dt.datetime.now(dt.UTC)} if ended else {}
        counts = {"succeeded": {"succeeded_count": 1}, "failed": {"failed_count": 1}}.get(ended, {"running_count": 1})
        return run_v2.Execution.serialize(run_v2.Execution(name=request.name, task_count=1, **done, **counts))


# Loaded by the server's interpreters (its fork server's too): the bake's Run v2 clients talk to the fake.
FAKE_CLIENTS = """
import os

import grpc
from google.cloud import run_v2
from google.cloud.run_v2.services.executions.transports import ExecutionsGrpcTransport
from google.cloud.run_v2.services.jobs.transports import JobsGrpcTransport

Jobs, Executions = run_v2.JobsClient, run_v2.ExecutionsClient
run_v2.JobsClient = lambda: Jobs(transport=JobsGrpcTransport(channel=grpc.insecure_channel(os.environ["FAKE_RUN"])))
run_v2.ExecutionsClient = lambda: Executions(
    transport=ExecutionsGrpcTransport(channel=grpc.insecure_channel(os.environ["FAKE_RUN"]))
)
"""


@pytest.fixture(scope="module")
def proxy_project(tmp_path_factory) -> Path:
    """A cloud_run_job bake: its daily job keeps the smoke's slot (the next 03:00 UTC) the same for the whole test."""
    return bake(tmp_path_factory.mktemp("proxy-smoke"), target="cloud_run_job")


@pytest.mark.parametrize(
    ("ended", "record", "verdict"), [("succeeded", "completed", "PASS"), ("failed", "failed", "FAIL")]
)
def test_a_proxy_bakes_smoke_passes_on_a_started_run_and_reads_how_its_execution_ended(
    tmp_path, emulator_host, proxy_project, ended, record, verdict
):
    """A proxy's run is `started` with its execution's name right after the delivery: healthy. Once a later delivery
    of the job saw the execution end, the record is `completed` (PASS) or `failed` (FAIL)."""
    settings = yaml.safe_load((proxy_project / "config.yaml").read_text())
    job_name = f"projects/{settings['project']}/locations/{settings['region']}/jobs/{settings['slug']}-job"
    fake = FakeRunApi(job_name)
    (tmp_path / "sitecustomize.py").write_text(FAKE_CLIENTS)
    collection = f"proxy-smoke-{ended}-{os.getpid()}"
    own = config_file(proxy_project, tmp_path / "config.yaml", collection=collection)
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, **own}
    server_env = {**env, "PYTHONPATH": str(tmp_path), "FAKE_RUN": fake.address, "PROXY_JOB_NAME": job_name}
    try:
        with serving(proxy_project, server_env) as stand_in:
            env["SMOKE_API_ROOT"] = stand_in.root
            first = smoke(proxy_project, env)
            assert first.returncode == 0, first.stdout + first.stderr
            assert [line.split()[0] for line in first.stdout.splitlines()[:5]] == ["PASS"] * 5
            assert first.stdout.splitlines()[2].endswith(f" status=started execution={fake.started[0]}")
            # The job's delivery of its previous slot follows the started run first, and sees its execution end.
            fake.ended[fake.started[0]] = ended
            (job_id,) = settings["jobs"]
            job = settings["jobs"][job_id]
            now = dt.datetime.now(zoneinfo.ZoneInfo(job["time_zone"]))
            previous = next(CronSim(job["schedule"], now, reverse=True)).astimezone(dt.UTC)
            stand_in.deliver(f"{settings['slug']}-{job_id}", previous.strftime("%Y-%m-%dT%H:%M:%SZ"))
            again = smoke(proxy_project, env)
    finally:
        fake.server.stop(grace=None)
    assert len(fake.started) == 2, fake.started  # the smoke's run, then the previous slot's: one execution each
    assert again.returncode == (verdict == "FAIL"), again.stdout + again.stderr
    steps = [line.split()[0] for line in again.stdout.splitlines()[:5]]
    assert steps == ["PASS", "PASS", verdict, "PASS", "PASS"], again.stdout
    assert f" status={record} execution={fake.started[0]}" in again.stdout.splitlines()[2]
