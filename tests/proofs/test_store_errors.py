"""Every gRPC status Firestore can answer, at every call a delivery makes, ends in one outcome line.

The handler's client talks to the emulator through tests/harness/fake_firestore.py, which answers one chosen
call with one chosen status code: the claim's create, its read (after an existing record made the
create fail), a takeover's update, the finish's update (success or terminal failure), the release's
delete. Each (call, code)
must give exactly one outcome line and the answer that outcome maps to, leave the work unrun when the
call comes before it, and write nothing but whole records. The codes a call expects as the protocol's
answer (ALREADY_EXISTS at the create; FAILED_PRECONDITION and NOT_FOUND, the guard's refusal, at the
guarded writes) are answered 409 as the protocol says; NOT_FOUND and FAILED_PRECONDITION anywhere
else mean a missing or Datastore-mode database: 500 `misconfigured`, naming it; every other code is
500 `store_unavailable`.
"""

import dataclasses
import datetime as dt

import grpc
import pytest
from conftest import records, scheduler_headers
from fake_firestore import BATCH_GET_DOCUMENTS, COMMIT{% if cookiecutter.target != "function" %}, RUN_QUERY{% endif %}

import config as configuration
from keys import read_run_key
from ledger import READ_RETRY
from outcomes import Outcome
from run_context import TerminalJobError

CODES = [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK]
GUARD_REFUSALS = (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.NOT_FOUND)
DATABASE_CODES = (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.FAILED_PRECONDITION)


@dataclasses.dataclass(frozen=True)
class Call:
    """One Firestore call of a delivery: how to reach it, and what its protocol answers are."""

    method: str  # the gRPC method the client uses for it
    after: int  # calls of that method the delivery makes before it
    existing: str | None  # the record the run has before the delivery: None, "completed" or "expired"
    work_raises: type[Exception] | None  # RuntimeError: the release path; TerminalJobError: the recorded failure
    before_work: bool
    protocol_answers: dict[grpc.StatusCode, str]  # code -> outcome the protocol gives it


CALLS = {
    "claim-create": Call(COMMIT, 0, None, None, True, {grpc.StatusCode.ALREADY_EXISTS: "in_progress"}),
    "claim-read": Call(BATCH_GET_DOCUMENTS, 0, "completed", None, True, {}),
    "takeover-update": Call(COMMIT, 1, "expired", None, True, dict.fromkeys(GUARD_REFUSALS, "in_progress")),
    "finish-update": Call(COMMIT, 1, None, None, False, dict.fromkeys(GUARD_REFUSALS, "superseded")),
    "fail-update": Call(COMMIT, 1, None, TerminalJobError, False, dict.fromkeys(GUARD_REFUSALS, "superseded")),
    "release-delete": Call(COMMIT, 1, None, RuntimeError, False, dict.fromkeys(GUARD_REFUSALS, "superseded")),
{%- if cookiecutter.target != "function" %}
    # A proxy's query for the job's started runs (executions.py), in the handler's process before the work: a
    # store error like any other (store_unavailable; misconfigured for the database's codes), the claim released.
    "follow-query": Call(RUN_QUERY, 0, None, None, True, {}),
{%- endif %}
}
# Calls where NOT_FOUND / FAILED_PRECONDITION are no protocol answer, so they mean the database (ledger.firestore_call).
CLAIMS = {"claim-create", "claim-read", "follow-query"}


def job_of(case: str, code: grpc.StatusCode) -> str:
    return f"{case}-{code.name}".lower().replace("_", "-")


def expected_outcome(call_name: str, code: grpc.StatusCode) -> str:
    call = CALLS[call_name]
    if code in call.protocol_answers:
        return call.protocol_answers[code]
    if call_name in CLAIMS and code in DATABASE_CODES:
        return "misconfigured"
    return "store_unavailable"


def existing_record(kind: str, now: dt.datetime) -> dict:
    lease_expires = now - dt.timedelta(minutes=1) if kind == "expired" else now + dt.timedelta(minutes=5)
    return {
        "status": "completed" if kind == "completed" else "in_progress",
        "attempt_id": "an-earlier-attempt",
        "attempts": 1,
        "lease_expires": lease_expires,
        "expire_at": now + dt.timedelta(days=1),
        "claimed_at": now - dt.timedelta(minutes=10),
    }


@pytest.fixture
def short_read_retry(monkeypatch):
    """The claim's read retries UNAVAILABLE, INTERNAL and RESOURCE_EXHAUSTED for RPC_TIMEOUT_SECONDS (5 s)
    before it gives up; scaled to 0.3 s here, the same RetryError at the end."""
    monkeypatch.setattr("ledger.READ_RETRY", READ_RETRY.with_timeout(0.3))


@pytest.mark.parametrize("code", CODES, ids=[code.name for code in CODES])
@pytest.mark.parametrize("call_name", list(CALLS))
def test_every_status_at_every_call_gives_one_outcome_line(
    call_name, code, http, collection, work, now, firestore_through, log_lines, short_read_retry, handler_module
):
    call = CALLS[call_name]
    config = configuration.current()
    headers = scheduler_headers(job_of(call_name, code), now.isoformat())
    run_id = read_run_key(headers, config, now).run_id
    if call.existing:
        collection.document(run_id).set(existing_record(call.existing, now))
    before = records(collection)
    if call.work_raises:
        work.errors[0] = call.work_raises("the work failed")
    firestore_through.fail(call.method, code, after=call.after)

    response = http.post("/", headers=headers)

    outcome = expected_outcome(call_name, code)
    assert firestore_through.failed[:1] == [(call.method, code)], "the fault never reached its call"
    outcome_lines = [line for line in log_lines() if "outcome" in line]
    assert len(outcome_lines) == 1, (response.status_code, response.text, outcome_lines)
    (line,) = outcome_lines
    assert line["outcome"] == outcome and response.text.startswith(f"{outcome}:")
    assert response.status_code == line["http_status"] == handler_module.ANSWERS[Outcome(outcome)][0]
    assert response.status_code >= 500 or code in call.protocol_answers
    if outcome == "misconfigured":
        assert config.database_name in line["message"]
    after = records(collection)
    if call.before_work:
        assert work.calls == []
        assert after == before  # the failed call wrote nothing; the run is as the delivery found it
    else:  # the work ran; its claim stays whole until its lease, as after a crash (docs/faults.md)
        (context,) = work.calls
        assert after[run_id]["attempt_id"] == context.attempt_id and after[run_id]["status"] == "in_progress"


@pytest.mark.faults
def test_a_real_server_gives_one_outcome_line_for_every_status_at_the_claim(
    fleet, faulty_firestore, now, handler_module
):
    """The measurement of issue 9, as a test: a functions-framework server (gunicorn), every status
    code at the claim's create; before the fix NOT_FOUND and FAILED_PRECONDITION were bare 500s."""
    server = fleet.start(FIRESTORE_EMULATOR_HOST=faulty_firestore.host).wait_ready()
    try:
        answers = {}
        for code in CODES:
            faulty_firestore.fail(COMMIT, code)
            answers[code] = server.deliver(scheduler_headers(job_of("live", code), now.isoformat()))
    finally:
        faulty_firestore.clear()

    lines = server.log_lines()
    for code, answer in answers.items():
        outcome = expected_outcome("claim-create", code)
        outcome_lines = [line for line in lines if line.get("job") == job_of("live", code) and "outcome" in line]
        assert len(outcome_lines) == 1, (code, answer, outcome_lines)
        (line,) = outcome_lines
        assert (answer.status, line["outcome"]) == (handler_module.ANSWERS[Outcome(outcome)][0], outcome), code
        assert answer.text.startswith(f"{outcome}:"), (code, answer.text)
    assert fleet.executions() == []
