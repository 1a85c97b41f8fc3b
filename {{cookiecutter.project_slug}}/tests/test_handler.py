"""Every branch of the protocol, through the HTTP entry point, against Google's Firestore emulator."""

import datetime as dt
import hashlib
import threading
import time

import pytest
from conftest import PROJECT, records, scheduler_headers
from google.cloud import firestore

import dedup
from run_context import TerminalJobError, UnknownJob

BAKED_LOCATION = dedup.baked_settings()["DEDUP_LOCATION"]


def iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


def run_id_of(job: str, moment: dt.datetime, project: str = PROJECT, location: str = BAKED_LOCATION) -> str:
    material = f"{project}\n{location}\n{job}\n{moment.astimezone(dt.UTC).isoformat()}"
    return hashlib.sha256(material.encode()).hexdigest()


def test_fresh_run_is_processed_and_recorded(http, collection, work, now):
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 200
    assert response.text.startswith("processed")
    assert len(work.calls) == 1
    context = work.calls[0]
    assert context.run_id == run_id_of("nightly", now)
    assert (context.job_name, context.schedule_time, context.attempt) == ("nightly", now, 1)
    record = records(collection)[context.run_id]
    assert record["status"] == "completed"
    assert record["attempt_id"] == context.attempt_id
    assert record["job_name"] == "nightly" and record["schedule_time"] == now
    assert record["lease_expires"] > record["claimed_at"]
    assert record["expire_at"] >= now + dt.timedelta(seconds=int(dedup.baked_settings()["DEDUP_RETENTION_SECONDS"]))
    assert record["finished_at"] >= record["claimed_at"]


def test_replay_of_a_completed_run_skips_the_work(http, work, now):
    first = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert first.status_code == replay.status_code == 200
    assert replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def test_header_names_are_case_insensitive(http, work, now):
    lower = {"x-cloudscheduler-jobname": "nightly", "x-cloudscheduler-scheduletime": iso(now)}
    assert http.post("/", headers=lower).status_code == 200
    replay = http.post("/", headers={"X-Cloudscheduler-Jobname": "nightly", "X-Cloudscheduler-Scheduletime": iso(now)})
    assert replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def test_equal_instants_in_other_offsets_are_one_run(http, work, now):
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    shifted = now.astimezone(dt.timezone(dt.timedelta(hours=-7))).isoformat()
    assert http.post("/", headers=scheduler_headers("nightly", shifted)).text.startswith("duplicate")
    assert len(work.calls) == 1


def test_concurrent_duplicates_run_the_work_exactly_once(app, collection, work, now):
    gate = work.hold(0)
    barrier = threading.Barrier(4)
    statuses = []

    def deliver():
        client = app.test_client()
        barrier.wait()
        statuses.append(client.post("/", headers=scheduler_headers("nightly", iso(now))).status_code)

    threads = [threading.Thread(target=deliver) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while len(statuses) < 3 and time.monotonic() < deadline:  # the others are answered while one works
        time.sleep(0.05)
    gate.set()
    for thread in threads:
        thread.join(timeout=60)

    assert len(work.calls) == 1
    assert sorted(statuses) == [200, 409, 409, 409]
    assert list(records(collection).values())[0]["status"] == "completed"


def test_delivery_during_a_live_lease_gets_409(app, http, work, now):
    gate = work.hold(0)
    first = threading.Thread(target=lambda: app.test_client().post("/", headers=scheduler_headers("nightly", iso(now))))
    first.start()
    work.wait_for_calls(1)

    second = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    gate.set()
    first.join(timeout=30)
    assert second.status_code == 409
    assert second.text.startswith("in_progress")
    assert len(work.calls) == 1


def in_background(app, headers):
    """Delivers in a thread; returns the thread and a list that receives the response."""
    answers = []
    thread = threading.Thread(target=lambda: answers.append(app.test_client().post("/", headers=headers)))
    thread.start()
    return thread, answers


def test_expired_lease_is_taken_over_and_the_zombie_cannot_overwrite(app, http, collection, work, now, monkeypatch):
    monkeypatch.setenv("DEDUP_LEASE_SECONDS", "1")
    zombie_gate = work.hold(0)
    zombie, zombie_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(1)
    time.sleep(1.2)  # the zombie's lease runs out while it still works

    successor = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    zombie_gate.set()  # the zombie finishes late, after its successor completed the run
    zombie.join(timeout=30)

    assert successor.status_code == 200 and successor.text.startswith("processed")
    assert zombie_answer[0].status_code == 409 and zombie_answer[0].text.startswith("superseded")
    assert len(work.calls) == 2
    assert work.calls[1].attempt == 2
    record = records(collection)[work.calls[0].run_id]
    assert record["status"] == "completed"
    assert record["attempt_id"] == work.calls[1].attempt_id
    assert record["attempts"] == 2


def test_zombie_failure_cannot_delete_the_successors_record(app, collection, work, now, monkeypatch):
    monkeypatch.setenv("DEDUP_LEASE_SECONDS", "1")
    zombie_gate, successor_gate = work.hold(0), work.hold(1)
    work.errors[0] = RuntimeError("the zombie fails late")
    zombie, zombie_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(1)
    time.sleep(1.2)
    monkeypatch.setenv("DEDUP_LEASE_SECONDS", "60")
    successor, successor_answer = in_background(app, scheduler_headers("nightly", iso(now)))
    work.wait_for_calls(2)  # the successor owns the run and is inside the work

    zombie_gate.set()
    zombie.join(timeout=30)
    in_flight = records(collection)[work.calls[0].run_id]
    successor_gate.set()
    successor.join(timeout=30)

    assert zombie_answer[0].status_code == 409 and zombie_answer[0].text.startswith("superseded")
    assert in_flight["status"] == "in_progress" and in_flight["attempt_id"] == work.calls[1].attempt_id
    assert successor_answer[0].text.startswith("processed")
    assert records(collection)[work.calls[0].run_id]["status"] == "completed"


def test_retryable_failure_releases_the_run_for_an_immediate_retry(http, collection, work, now):
    work.errors[0] = RuntimeError("downstream timed out")
    failed = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert failed.status_code == 500
    assert failed.text.startswith("retryable_failure")
    assert records(collection) == {}

    retried = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert retried.status_code == 200 and retried.text.startswith("processed")
    assert len(work.calls) == 2


def test_terminal_failure_is_recorded_and_never_retried(http, collection, work, now):
    work.errors[0] = TerminalJobError("input file is missing")
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 200
    assert response.text.startswith("terminal_failure")
    (record,) = records(collection).values()
    assert record["status"] == "failed"
    assert record["last_error"] == "input file is missing"
    replay = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert replay.status_code == 200 and replay.text.startswith("duplicate")
    assert len(work.calls) == 1


def test_record_past_expire_at_counts_as_absent(http, collection, work, now):
    run_id = run_id_of("nightly", now)
    past = now - dt.timedelta(seconds=1)
    old = {"status": "failed", "attempt_id": "old", "lease_expires": past, "expire_at": past, "attempts": 1}
    collection.document(run_id).set(old | {"finished_at": past, "last_error": "old error", "result": "old result"})

    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 200 and response.text.startswith("processed")
    assert len(work.calls) == 1
    record = records(collection)[run_id]
    assert record["attempt_id"] == work.calls[0].attempt_id and record["status"] == "completed"
    assert "last_error" not in record and "result" not in record  # nothing of the old run's outcome survives


def test_project_and_location_disambiguate_runs(http, collection, work, now):
    time_header = iso(now)

    def deliver(**extra):
        return http.post("/", headers=scheduler_headers("nightly", time_header, **extra))

    deliver()
    explicit_default = deliver(**{"X-Scheduler-Project": PROJECT, "X-Scheduler-Location": BAKED_LOCATION})
    other_project = deliver(**{"X-Scheduler-Project": "other-proj-1"})
    other_region = deliver(**{"X-Scheduler-Location": "us-east1"})

    assert explicit_default.text.startswith("duplicate")
    assert other_project.text.startswith("processed") and other_region.text.startswith("processed")
    assert len(work.calls) == 3
    assert {c.run_id for c in work.calls} == {
        run_id_of("nightly", now),
        run_id_of("nightly", now, project="other-proj-1"),
        run_id_of("nightly", now, location="us-east1"),
    }
    assert set(records(collection)) == {c.run_id for c in work.calls}


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X-CloudScheduler-ScheduleTime": "2026-01-01T00:00:00Z"}, "missing X-CloudScheduler-JobName"),
        ({"X-CloudScheduler-JobName": "nightly"}, "missing X-CloudScheduler-ScheduleTime"),
        (scheduler_headers("nightly", "2026-01-01 00:00"), "not an RFC 3339 timestamp"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00"), "not an RFC 3339 timestamp"),
        (scheduler_headers("nightly", "2026-02-30T00:00:00Z"), "not a valid date"),
        (scheduler_headers("nightly", "2016-12-31T23:59:60Z"), "leap second"),
        (scheduler_headers("../etc", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("a%2Fb", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("", "2026-01-01T00:00:00Z"), "must be a Cloud Scheduler job id"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00Z", **{"X-Scheduler-Project": "Bad_Project"}), "project id"),
        (scheduler_headers("nightly", "2026-01-01T00:00:00Z", **{"X-Scheduler-Location": "moon"}), "GCP region"),
    ],
)
def test_bad_headers_get_400_and_nothing_is_written(http, collection, work, headers, reason):
    response = http.post("/", headers=headers)

    assert response.status_code == 400
    assert reason in response.text
    assert response.text.count("\n") == 1
    assert work.calls == []
    assert records(collection) == {}


def test_schedule_times_outside_the_accepted_window_are_refused(http, collection, work, now):
    retention = int(dedup.baked_settings()["DEDUP_RETENTION_SECONDS"])
    too_old = now - dt.timedelta(seconds=retention + 60)
    too_new = now + dt.timedelta(seconds=int(dedup.baked_settings()["DEDUP_MAX_FUTURE_SECONDS"]) + 60)
    next_month = now + dt.timedelta(days=31)  # a forced run of a monthly job sends its next scheduled time

    assert "older than the retention window" in http.post("/", headers=scheduler_headers("n", iso(too_old))).text
    assert "in the future" in http.post("/", headers=scheduler_headers("n", iso(too_new))).text
    assert records(collection) == {} and work.calls == []
    assert http.post("/", headers=scheduler_headers("n", iso(next_month))).status_code == 200


def test_every_log_line_carries_the_run_and_its_outcome(http, work, now, log_lines):
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    http.post("/", headers=scheduler_headers("nightly", iso(now)))
    work.errors[1] = TerminalJobError("bad input")  # the replay does not call the work
    later = now + dt.timedelta(minutes=1)
    http.post("/", headers=scheduler_headers("nightly", iso(later)))

    outcome_lines = [line for line in log_lines() if "outcome" in line]
    assert [(line["outcome"], line["severity"]) for line in outcome_lines] == [
        ("processed", "INFO"),
        ("duplicate", "INFO"),
        ("terminal_failure", "ERROR"),
    ]
    for line in outcome_lines:
        assert line["job"] == "nightly"
        assert len(line["run_id"]) == 64 and int(line["run_id"], 16) >= 0
        assert "attempt_id" in line or line["outcome"] == "duplicate"


def test_an_invalid_setting_answers_500_and_logs_it_without_touching_firestore(
    http, collection, work, now, monkeypatch, log_lines
):
    monkeypatch.setenv("DEDUP_LEASE_SECONDS", "five minutes")

    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 500
    rule = "must be a positive whole number of seconds"
    assert response.text == f"misconfigured: DEDUP_LEASE_SECONDS='five minutes': {rule}\n"
    (line,) = [line for line in log_lines() if "outcome" in line]
    assert (line["outcome"], line["severity"]) == ("misconfigured", "ERROR")
    assert work.calls == [] and records(collection) == {}


def test_firestore_unreachable_answers_500_without_running_the_work(http, work, now, monkeypatch):
    monkeypatch.setenv("FIRESTORE_EMULATOR_HOST", "127.0.0.1:9")  # nothing listens on the discard port
    dead = firestore.Client(project=PROJECT)
    monkeypatch.setattr(dedup, "firestore_client", lambda project, database: dead)
    started = time.monotonic()

    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))

    assert response.status_code == 500 and response.text.startswith("store_unavailable")
    assert time.monotonic() - started < dedup.RPC_TIMEOUT_SECONDS * 3
    assert work.calls == []


def test_every_outcome_has_one_answer_and_only_finished_runs_stop_scheduler(handler_module):
    """dedup.Outcome knows no HTTP; main.ANSWERS gives each its status and severity. Scheduler stops on 2xx,
    so a 2xx must mean the run needs no further delivery: done, recorded finished, or recorded skipped."""
    assert set(handler_module.ANSWERS) == set(dedup.Outcome)
    stops = {outcome.value for outcome, (status, _) in handler_module.ANSWERS.items() if 200 <= status < 300}
    assert stops == {"processed", "duplicate", "terminal_failure", "skipped_late"}
    assert handler_module.ANSWERS[dedup.Outcome.IN_PROGRESS][0] == 409  # never 503: retries stay counted


def test_the_work_gets_the_job_id_as_the_answers_spell_it(http, work, now):
    """Scheduler sends "<slug>-<job id>"; the work sees the job id itself, chosen through DEDUP_JOBS."""
    config = dedup.DedupConfig.from_env()
    slug = config.audit_job.removesuffix("_audit")
    assert config.jobs, "the baked settings list the answers' jobs"
    for name, job in config.jobs.items():
        assert name == f"{slug}-{job.job_id}"
        assert http.post("/", headers=scheduler_headers(name, iso(now))).status_code == 200
        context = work.calls[-1]
        assert (context.job_id, context.job_name) == (job.job_id, name)
    http.post("/", headers=scheduler_headers("not-a-configured-job", iso(now)))
    assert work.calls[-1].job_id is None


def test_a_job_without_work_is_misconfigured_released_and_retried(
    http, collection, now, handler_module, log_lines, monkeypatch
):
    """One line, 5xx so Scheduler retries, and no record: the run happens once a deploy gives the job its work."""

    def no_work(context):
        raise UnknownJob(f"job id {context.job_id!r}: not in job.WORK")

    monkeypatch.setattr(handler_module, "run", no_work)
    response = http.post("/", headers=scheduler_headers("nightly", iso(now)))
    assert response.status_code == 500
    assert response.text.startswith("misconfigured: no work for this job, run released for a retry: job id None")
    (line,) = [line for line in log_lines() if "outcome" in line]
    assert (line["outcome"], line["severity"], line["http_status"]) == ("misconfigured", "ERROR", 500)
    assert records(collection) == {}
{%- if cookiecutter.target == "function" %}


def test_every_answered_job_has_its_work_and_an_unknown_one_is_refused(http, collection, now, log_lines):
    """job.WORK covers the baked jobs; a Scheduler job DEDUP_JOBS lacks reaches the real job.run and is refused."""
    import job

    assert set(job.WORK) == {spec.job_id for spec in dedup.DedupConfig.from_env().jobs.values()}
    response = http.post("/", headers=scheduler_headers("stale-job", iso(now)))
    assert response.status_code == 500
    assert "job id None (Scheduler job 'stale-job'): not in job.WORK" in response.text
    assert [line["outcome"] for line in log_lines() if "outcome" in line] == ["misconfigured"]
    assert records(collection) == {}
{%- endif %}
