"""What tests/test_proxy.py needs of this target's API, the Run v2 API (Jobs.RunJob, Executions): the method a delivery
calls, the messages a local fake of the API answers with, and the client job.py uses, pointed at the fake."""

import datetime as dt
import sys

import grpc
from google.cloud import run_v2
from google.cloud.run_v2.services.executions.transports import ExecutionsGrpcTransport
from google.cloud.run_v2.services.jobs.transports import JobsGrpcTransport
from google.longrunning import operations_pb2
from google.protobuf import any_pb2

# Why a failed execution failed, as the API says it (the record keeps it).
DETAIL = "Task nightly-task0 failed with exit code 3"
TARGET_ENV, TARGET = "PROXY_JOB_NAME", "projects/p-123456/locations/europe-west1/jobs/nightly-job"
SERVICE, METHOD = "google.cloud.run.v2.Jobs", "RunJob"
GET_SERVICE, GET_REQUEST = "google.cloud.run.v2.Executions", run_v2.GetExecutionRequest
LIST_REQUEST = run_v2.ListExecutionsRequest


def started(request: run_v2.RunJobRequest, execution: str) -> bytes:
    """RunJob answers with a long-running operation whose metadata is the execution it started."""
    metadata = any_pb2.Any()
    metadata.Pack(run_v2.Execution.pb(run_v2.Execution(name=execution)))
    return operations_pb2.Operation(name="projects/p-123456/operations/op-1", metadata=metadata).SerializeToString()


def listed(executions: list[tuple[str, object, dt.datetime]]) -> bytes:
    """ListExecutions' answer, newest first: each execution with its create time and the environment it ran with."""
    return run_v2.ListExecutionsResponse.serialize(
        run_v2.ListExecutionsResponse(
            executions=[
                run_v2.Execution(
                    name=name,
                    create_time=at,
                    template=run_v2.TaskTemplate(
                        containers=[run_v2.Container(env=request.overrides.container_overrides[0].env)]
                    ),
                )
                for name, request, at in reversed(executions)
            ]
        )
    )


def execution_in(name: str, state: str) -> bytes:
    """An execution of one task as GetExecution shows it: no completion time while it runs, then its counts."""
    done = {"completion_time": dt.datetime(2026, 6, 1, 12, 30, tzinfo=dt.UTC)}
    completed = run_v2.Condition(type_="Completed", state=run_v2.Condition.State.CONDITION_FAILED, message=DETAIL)
    fields = {
        "running": {"running_count": 1},
        "succeeded": {**done, "succeeded_count": 1},
        "failed": {**done, "failed_count": 1, "conditions": [completed]},
        "cancelled": {**done, "cancelled_count": 1, "conditions": [completed]},
    }[state]
    return run_v2.Execution.serialize(run_v2.Execution(name=name, task_count=1, **fields))


def client_for(channel: grpc.Channel) -> run_v2.JobsClient:
    return run_v2.JobsClient(transport=JobsGrpcTransport(channel=channel))


def install(monkeypatch, client) -> None:
    monkeypatch.setattr(sys.modules["job"], "jobs_client", lambda: client)
    transport = ExecutionsGrpcTransport(channel=client.transport.grpc_channel)
    reader = run_v2.ExecutionsClient(transport=transport)
    monkeypatch.setattr(sys.modules["job"], "executions_client", lambda: reader)  # what execution_end reads


def run_id_sent(request: run_v2.RunJobRequest) -> str:
    assert request.name == TARGET
    (container,) = request.overrides.container_overrides
    env = {var.name: var.value for var in container.env}
    assert set(env) == {"DEDUP_RUN_ID", "DEDUP_SCHEDULE_TIME"}
    assert env["DEDUP_SCHEDULE_TIME"] == "2026-06-01T12:00:00Z"
    assert not container.args and not request.overrides.task_count  # nothing else is overridden
    return env["DEDUP_RUN_ID"]


REQUEST_TYPE = run_v2.RunJobRequest
