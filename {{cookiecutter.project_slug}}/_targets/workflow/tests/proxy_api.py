"""What tests/test_proxy.py needs of this target's API, the Workflows Executions API: the method a delivery
calls, the messages a local fake of the API answers with, and the client job.py uses, pointed at the fake."""

import datetime as dt
import json
import sys

import grpc
from google.cloud.workflows import executions_v1
from google.cloud.workflows.executions_v1.services.executions.transports import (
    ExecutionsGrpcTransport,
)

# Why a failed execution failed, as the API says it (the record keeps it).
DETAIL = "Task nightly-task0 failed with exit code 3"
TARGET_ENV, TARGET = "PROXY_WORKFLOW_NAME", "projects/p-123456/locations/europe-west1/workflows/nightly-wf"
SERVICE, METHOD = "google.cloud.workflows.executions.v1.Executions", "CreateExecution"
GET_SERVICE, GET_REQUEST = SERVICE, executions_v1.GetExecutionRequest
LIST_REQUEST = executions_v1.ListExecutionsRequest


def started(request: executions_v1.CreateExecutionRequest, execution: str) -> bytes:
    return executions_v1.Execution.serialize(executions_v1.Execution(name=execution))


def listed(executions: list[tuple[str, object, dt.datetime]]) -> bytes:
    """ListExecutions' answer, newest first: each execution with its start time and argument (the FULL view)."""
    return executions_v1.ListExecutionsResponse.serialize(
        executions_v1.ListExecutionsResponse(
            executions=[
                executions_v1.Execution(name=name, start_time=at, argument=request.execution.argument)
                for name, request, at in reversed(executions)
            ]
        )
    )


def execution_in(name: str, state: str) -> bytes:
    """An execution as GetExecution shows it: its state, and for a failed one its error."""
    states = executions_v1.Execution.State
    error = executions_v1.Execution.Error(payload=DETAIL) if state == "failed" else None
    shown = {"running": states.ACTIVE, "succeeded": states.SUCCEEDED, "failed": states.FAILED}
    return executions_v1.Execution.serialize(
        executions_v1.Execution(name=name, state=shown.get(state, states.CANCELLED), error=error)
    )


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
