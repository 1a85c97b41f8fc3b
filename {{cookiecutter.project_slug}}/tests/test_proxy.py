"""The handler as an idempotent proxy, at the API boundary: the real client library talks gRPC to a
local fake of the Google API, so the test sees the exact request a delivery sends, and the fake says
how each execution it started is doing (running, succeeded, failed, cancelled) when it is followed."""

import concurrent.futures
import datetime as dt
import itertools
import threading

import grpc
import pytest
from conftest import configured, records, scheduler_headers

# This target's API, its messages and its client: tests/proxy_api.py, the target's own.
from proxy_api import (
    DETAIL,
    GET_REQUEST,
    GET_SERVICE,
    LIST_REQUEST,
    METHOD,
    REQUEST_TYPE,
    SERVICE,
    TARGET,
    TARGET_ENV,
    client_for,
    execution_in,
    install,
    listed,
    run_id_sent,
    started,
)

import config
from keys import RunKey

SCHEDULED = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)


class FakeGoogleApi:
    """A local gRPC server for the methods the proxy calls: starting an execution (requests recorded;
    each gets a name of its own), reading one (in the state the test set, `running` until then; one deleted
    from `states` is NOT_FOUND) and listing them (newest first, each created at the function's clock)."""

    def __init__(self) -> None:
        self.requests = []
        self.failure: grpc.StatusCode | None = None
        self.lose_answer: grpc.StatusCode | None = None  # the execution starts, its answer is lost
        self.get_failure: grpc.StatusCode | None = None
        self.get_failures: dict[str, grpc.StatusCode] = {}  # execution name -> what reading it answers
        self.started: list[tuple[str, object, dt.datetime]] = []  # name, request, create time
        self.arrived: threading.Event | None = None  # set when a start call arrives
        self.gate: threading.Event | None = None  # a start call waits for it: its start is in flight meanwhile
        self.states: dict[str, str] = {}  # execution name -> running | succeeded | failed | cancelled
        self.names = (f"{TARGET}/executions/run-{number}" for number in itertools.count(1))

        def method(handle, request_type):
            return grpc.unary_unary_rpc_method_handler(
                handle, request_deserializer=request_type.deserialize, response_serializer=lambda raw: raw
            )

        methods = {
            (SERVICE, METHOD): method(self.handle, REQUEST_TYPE),
            (GET_SERVICE, "GetExecution"): method(self.get, GET_REQUEST),
            (GET_SERVICE, "ListExecutions"): method(self.list, LIST_REQUEST),
        }
        self.server = grpc.server(concurrent.futures.ThreadPoolExecutor(max_workers=2))
        for service in {service for service, _ in methods}:
            handlers = {name: handler for (owner, name), handler in methods.items() if owner == service}
            self.server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(service, handlers)])
        self.address = f"127.0.0.1:{self.server.add_insecure_port('127.0.0.1:0')}"
        self.server.start()

    def handle(self, request, context):
        self.requests.append(request)
        if self.arrived:
            self.arrived.set()
        if self.gate:
            self.gate.wait(30)
        if self.failure:
            context.abort(self.failure, "injected by the test")
        name = next(self.names)
        self.states[name] = "running"
        self.started.append((name, request, CLOCK[0]))
        if self.lose_answer:
            context.abort(self.lose_answer, "injected by the test: started, answer lost")
        return started(request, name)

    def get(self, request, context):
        if self.get_failure or request.name in self.get_failures:
            context.abort(self.get_failure or self.get_failures[request.name], "injected by the test")
        if request.name not in self.states:
            context.abort(grpc.StatusCode.NOT_FOUND, request.name)
        return execution_in(request.name, self.states[request.name])

    def list(self, request, context):
        return listed([entry for entry in self.started if entry[0] in self.states])


@pytest.fixture
def api(monkeypatch, handler_module):
    fake = FakeGoogleApi()
    channel = grpc.insecure_channel(fake.address)
    install(monkeypatch, client_for(channel))
    monkeypatch.setenv(TARGET_ENV, TARGET)
    yield fake
    channel.close()
    fake.server.stop(grace=None)


# The function's clock: a minute after the schedule time of the last delivery (deliver sets it).
CLOCK = [SCHEDULED + dt.timedelta(minutes=1)]


@pytest.fixture(autouse=True)
def recent_schedule(monkeypatch):
    """SCHEDULED is inside the accepted window whatever today is."""
    CLOCK[0] = SCHEDULED + dt.timedelta(minutes=1)
    monkeypatch.setattr("dedup.utcnow", lambda: CLOCK[0])


def deliver(http, hours_later=0, job="nightly"):
    """The delivery of SCHEDULED (or of the hourly run `hours_later`), a minute after its time as Scheduler sends
    it: one dated ahead of the clock would be a Force run, a manual run of its own."""
    moment = SCHEDULED + dt.timedelta(hours=hours_later)
    CLOCK[0] = max(CLOCK[0], moment + dt.timedelta(minutes=1))
    return http.post("/", headers=scheduler_headers(job, moment.isoformat().replace("+00:00", "Z")))


def run_key(hours_later=0):
    loaded = config.current()
    return RunKey(loaded.project, loaded.location, "nightly", SCHEDULED + dt.timedelta(hours=hours_later))


def run_record(collection, hours_later=0):
    return collection.document(run_key(hours_later).run_id).get().to_dict()


def jobs(monkeypatch, **overlap):
    """The job `nightly` alone, hourly, with its overlap rule if given."""
    job = {"schedule": "0 * * * *", "time_zone": "Etc/UTC", **overlap}
    configured(monkeypatch, lambda loaded: loaded.with_jobs({"nightly": job}))


def released_with_intent(collection):
    """A start that failed is released with its intent kept: its lease ended, so the retry takes it over at once and
    looks for an execution of the run before it starts one (executions.Handover)."""
    (record,) = records(collection).values()
    return record["status"] == "in_progress" and record["lease_expires"] <= CLOCK[0] and "starting_at" in record


def ended_lines(log_lines):
    return [line for line in log_lines() if "execution_outcome" in line]


def test_a_claimed_run_starts_one_execution_carrying_the_run_id(http, collection, api):
    response = deliver(http)

    assert response.status_code == 200 and response.text.startswith("processed")
    (request,) = api.requests
    (run_id, record) = records(collection).popitem()
    assert run_id_sent(request) == run_id
    # Started, not completed: how the execution ends is not known yet, and it is followed.
    assert record["status"] == "started"
    assert record["execution"] == f"{TARGET}/executions/run-1"  # its full resource name


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
    assert released_with_intent(collection)
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
    assert released_with_intent(collection)  # not recorded failed for good
    monkeypatch.setenv(TARGET_ENV, TARGET)  # the fixing deploy; Cloud Scheduler retries
    fixed = deliver(http)
    assert fixed.status_code == 200 and fixed.text.startswith("processed")
    assert len(api.requests) == 1


@pytest.mark.parametrize("state", ["failed", "cancelled"])
def test_a_failed_execution_is_recorded_failed_and_logged_for_the_alert(http, collection, api, log_lines, state):
    deliver(http)
    api.states[f"{TARGET}/executions/run-1"] = state

    following = deliver(http, hours_later=1)  # the job's next run follows its previous execution first

    assert following.status_code == 200 and following.text.startswith("processed")
    first = run_record(collection)
    assert first["status"] == "failed"
    assert f"{TARGET}/executions/run-1 {state}" in first["last_error"]
    (line,) = ended_lines(log_lines)
    # What the metric <slug>-execution-failed counts (by jsonPayload.job) and its alert fires on.
    assert line["severity"] == "ERROR"
    assert line["execution_outcome"] == state
    assert (line["job"], line["execution"]) == ("nightly", f"{TARGET}/executions/run-1")
    assert line["run_id"] == run_key().run_id  # the followed run's, not the delivery's
    assert DETAIL in line["message"] or state == "cancelled"
    assert run_record(collection, hours_later=1)["status"] == "started"  # the next run started: its own execution
    assert len(api.requests) == 2


def test_a_succeeded_execution_is_recorded_completed(http, collection, api, log_lines):
    deliver(http)
    api.states[f"{TARGET}/executions/run-1"] = "succeeded"

    deliver(http, hours_later=1)

    assert run_record(collection)["status"] == "completed"
    (line,) = ended_lines(log_lines)
    assert (line["severity"], line["execution_outcome"]) == ("INFO", "succeeded")


def test_the_audit_follows_every_jobs_executions(http, collection, api, log_lines):
    """A job whose next run is days away: the audit job's delivery records its failed execution."""
    deliver(http)
    api.states[f"{TARGET}/executions/run-1"] = "failed"

    audit = deliver(http, hours_later=1, job=config.current().audit_job)

    assert audit.status_code == 200 and audit.text.startswith("processed")
    assert run_record(collection)["status"] == "failed"
    assert [line["execution_outcome"] for line in ended_lines(log_lines)] == ["failed"]
    assert len(api.requests) == 1  # the audit starts nothing


def test_an_ended_execution_is_recorded_and_logged_once(http, collection, api, log_lines):
    deliver(http)
    api.states[f"{TARGET}/executions/run-1"] = "failed"
    deliver(http, hours_later=1)
    deliver(http, hours_later=1, job=config.current().audit_job)

    assert len(ended_lines(log_lines)) == 1


@pytest.mark.parametrize("rule", [{}, {"overlap": "skip"}])
def test_overlap_skip_records_the_new_run_skipped_while_the_previous_execution_runs(
    http, collection, api, monkeypatch, rule
):
    jobs(monkeypatch, **rule)  # skip is the default
    deliver(http)

    skipped = deliver(http, hours_later=1)

    assert skipped.status_code == 200 and skipped.text.startswith("skipped_overlap")  # 2xx: Scheduler stops
    assert f"{TARGET}/executions/run-1" in skipped.text
    record = run_record(collection, hours_later=1)
    assert record["status"] == "skipped" and f"{TARGET}/executions/run-1" in record["last_error"]
    assert len(api.requests) == 1  # nothing started
    assert deliver(http, hours_later=1).text.startswith("duplicate")  # its retry does not start it either
    api.states[f"{TARGET}/executions/run-1"] = "succeeded"
    assert deliver(http, hours_later=2).text.startswith("processed")  # once it ended, the next run starts
    assert len(api.requests) == 2


def test_overlap_start_starts_the_new_run_while_the_previous_execution_runs(http, collection, api, monkeypatch):
    jobs(monkeypatch, overlap="start")
    deliver(http)

    second = deliver(http, hours_later=1)

    assert second.status_code == 200 and second.text.startswith("processed")
    assert len(api.requests) == 2
    assert run_record(collection)["status"] == run_record(collection, hours_later=1)["status"] == "started"


@pytest.mark.parametrize("value", ["sometimes", "", None, ["skip"]])
def test_a_bad_overlap_rule_is_refused_naming_the_job_and_the_value(http, collection, api, monkeypatch, value):
    with pytest.raises(config.ConfigError) as refused:  # config.yaml's rule (rules.JOB_CHOICES), at load
        jobs(monkeypatch, overlap=value)

    assert f"jobs.nightly.overlap={value!r}: must be one of skip, start" in str(refused.value)
    assert "\n" not in str(refused.value)


def test_an_api_error_while_following_releases_the_new_run_for_a_retry(http, collection, api):
    deliver(http)
    api.get_failure = grpc.StatusCode.PERMISSION_DENIED

    failed = deliver(http, hours_later=1)

    assert failed.status_code == 500 and failed.text.startswith("retryable_failure")
    assert "PermissionDenied" in failed.text
    assert run_record(collection, hours_later=1) is None  # released: Scheduler's retry follows again
    assert run_record(collection)["status"] == "started"
    assert len(api.requests) == 1
