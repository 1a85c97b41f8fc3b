"""The handler as an idempotent proxy, at the API boundary: the real client library talks gRPC to a
local fake of the Google API, so the test sees the exact request a delivery sends."""

import concurrent.futures
import datetime as dt
{%- if cookiecutter.target == "workflow" %}
import json
{%- endif %}
import sys

import grpc
import pytest
from conftest import records, scheduler_headers
{%- if cookiecutter.target == "cloud_run_job" %}
from google.cloud import run_v2
from google.cloud.run_v2.services.jobs.transports import JobsGrpcTransport
from google.longrunning import operations_pb2
from google.protobuf import any_pb2

TARGET_ENV, TARGET = "PROXY_JOB_NAME", "projects/p-123456/locations/europe-west1/jobs/nightly-job"
SERVICE, METHOD = "google.cloud.run.v2.Jobs", "RunJob"
EXECUTION = f"{TARGET}/executions/nightly-job-x7k2p"


def started(request: run_v2.RunJobRequest) -> bytes:
    """RunJob answers with a long-running operation whose metadata is the execution it started."""
    metadata = any_pb2.Any()
    metadata.Pack(run_v2.Execution.pb(run_v2.Execution(name=EXECUTION)))
    return operations_pb2.Operation(name="projects/p-123456/operations/op-1", metadata=metadata).SerializeToString()


def client_for(channel: grpc.Channel) -> run_v2.JobsClient:
    return run_v2.JobsClient(transport=JobsGrpcTransport(channel=channel))


def install(monkeypatch, client) -> None:
    monkeypatch.setattr(sys.modules["job"], "jobs_client", lambda: client)


def run_id_sent(request: run_v2.RunJobRequest) -> str:
    assert request.name == TARGET
    (container,) = request.overrides.container_overrides
    env = {var.name: var.value for var in container.env}
    assert set(env) == {"DEDUP_RUN_ID", "DEDUP_SCHEDULE_TIME"}
    assert env["DEDUP_SCHEDULE_TIME"] == "2026-06-01T12:00:00Z"
    assert not container.args and not request.overrides.task_count  # nothing else is overridden
    return env["DEDUP_RUN_ID"]


REQUEST_TYPE = run_v2.RunJobRequest
{%- else %}
from google.cloud.workflows import executions_v1
from google.cloud.workflows.executions_v1.services.executions.transports import ExecutionsGrpcTransport

TARGET_ENV, TARGET = "PROXY_WORKFLOW_NAME", "projects/p-123456/locations/europe-west1/workflows/nightly-wf"
SERVICE, METHOD = "google.cloud.workflows.executions.v1.Executions", "CreateExecution"
EXECUTION = f"{TARGET}/executions/3f1c0a2e"


def started(request: executions_v1.CreateExecutionRequest) -> bytes:
    return executions_v1.Execution.serialize(executions_v1.Execution(name=EXECUTION))


def client_for(channel: grpc.Channel) -> executions_v1.ExecutionsClient:
    return executions_v1.ExecutionsClient(transport=ExecutionsGrpcTransport(channel=channel))


def install(monkeypatch, client) -> None:
    monkeypatch.setattr(sys.modules["job"], "executions_client", lambda: client)


def run_id_sent(request: executions_v1.CreateExecutionRequest) -> str:
    assert request.parent == TARGET
    argument = json.loads(request.execution.argument)
    assert set(argument) == {"run_id", "job_name", "schedule_time"}
    assert (argument["job_name"], argument["schedule_time"]) == ("nightly", "2026-06-01T12:00:00Z")
    return argument["run_id"]


REQUEST_TYPE = executions_v1.CreateExecutionRequest
{%- endif %}

SCHEDULED = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


class FakeGoogleApi:
    """A local gRPC server for the one method the proxy calls: records requests, answers or fails."""

    def __init__(self) -> None:
        self.requests = []
        self.failure: grpc.StatusCode | None = None
        handler = grpc.unary_unary_rpc_method_handler(
            self.handle, request_deserializer=REQUEST_TYPE.deserialize, response_serializer=lambda raw: raw
        )
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {METHOD: handler})])
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def handle(self, request, context):
        self.requests.append(request)
        if self.failure:
            context.abort(self.failure, "injected by the test")
        return started(request)


@pytest.fixture
def api(monkeypatch, handler_module):
    fake = FakeGoogleApi()
    channel = grpc.insecure_channel(fake.address)
    install(monkeypatch, client_for(channel))
    monkeypatch.setenv(TARGET_ENV, TARGET)
    yield fake
    channel.close()
    fake.server.stop(grace=None)


@pytest.fixture(autouse=True)
def recent_schedule(monkeypatch):
    """SCHEDULED is inside the accepted window whatever today is."""
    monkeypatch.setattr("dedup.utcnow", lambda: SCHEDULED + dt.timedelta(minutes=1))


def deliver(http):
    return http.post("/", headers=scheduler_headers("nightly", "2026-06-01T12:00:00Z"))


def test_a_claimed_run_starts_one_execution_carrying_the_run_id(http, collection, api):
    response = deliver(http)

    assert response.status_code == 200 and response.text.startswith("processed")
    (request,) = api.requests
    (run_id, record) = records(collection).popitem()
    assert run_id_sent(request) == run_id
    assert record["status"] == "completed"
    assert record["result"] == EXECUTION  # the execution the claim started, for operators


def test_a_replayed_delivery_starts_nothing(http, api):
    deliver(http)
    replay = deliver(http)

    assert replay.status_code == 200 and replay.text.startswith("duplicate")
    assert len(api.requests) == 1


@pytest.mark.parametrize("code", [grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.PERMISSION_DENIED])
def test_a_failed_api_call_releases_the_claim_and_answers_5xx(http, collection, api, code):
    api.failure = code
    failed = deliver(http)

    assert failed.status_code == 500 and failed.text.startswith("retryable_failure")
    assert records(collection) == {}  # released: Cloud Scheduler's retry claims it at once
    api.failure = None
    retried = deliver(http)
    assert retried.status_code == 200 and retried.text.startswith("processed")
    assert len(api.requests) == 2  # the failed call did not start anything, so the retry must
    assert run_id_sent(api.requests[0]) == run_id_sent(api.requests[1])


@pytest.mark.parametrize("value", ["", "nightly-job", f"{TARGET}/../other"])
def test_a_bad_target_name_is_retryable_so_the_run_happens_once_a_deploy_fixes_it(
    http, collection, api, monkeypatch, value
):
    monkeypatch.setenv(TARGET_ENV, value)
    response = deliver(http)

    assert response.status_code == 500 and response.text.startswith("retryable_failure")
    assert f"ValueError: {TARGET_ENV}={value!r}: must be projects/" in response.text
    assert api.requests == []
    assert records(collection) == {}  # released, not recorded failed for good
    monkeypatch.setenv(TARGET_ENV, TARGET)  # the fixing deploy; Cloud Scheduler retries
    fixed = deliver(http)
    assert fixed.status_code == 200 and fixed.text.startswith("processed")
    assert len(api.requests) == 1
