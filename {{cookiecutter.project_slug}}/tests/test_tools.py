"""The operator tools (tools/run_id.py, runs.py, fire.py) against the handler and Google's Firestore emulator."""

import datetime as dt

import fire
import pytest
import run_id
import runs
from conftest import records, scheduler_headers

import dedup


@pytest.fixture
def recent(now):
    """A schedule time inside the retention window, with a non-UTC offset (run ids normalise to UTC)."""
    moment = (now - dt.timedelta(hours=1)).astimezone(dt.timezone(dt.timedelta(hours=2)))
    return moment.isoformat()


def test_run_id_prints_the_document_id_the_handler_writes(http, collection, recent, capsys, work):
    assert http.post("/", headers=scheduler_headers("nightly", recent)).status_code == 200
    assert run_id.main(["nightly", recent]) == 0
    assert list(records(collection)) == [capsys.readouterr().out.strip()]


def test_run_id_keys_other_projects_and_locations_apart(capsys):
    ids = set()
    # Neither is the baked default, whatever project and region the bake chose.
    for extra in ([], ["--project", "not-the-baked-project"], ["--location", "zz-nowhere1"]):
        assert run_id.main(["nightly", "2026-01-01T00:00:00Z", *extra]) == 0
        ids.add(capsys.readouterr().out.strip())
    assert len(ids) == 3


def test_run_id_refuses_a_time_that_is_not_rfc3339(capsys):
    assert run_id.main(["nightly", "2026-01-01 00:00"]) == 2
    assert "TIME='2026-01-01 00:00': is not an RFC 3339 timestamp" in capsys.readouterr().err


def test_stuck_lists_only_in_progress_runs_whose_lease_expired(collection, now):
    def record(status, lease_delta):
        return {
            "status": status,
            "attempt_id": "a",
            "attempts": 1,
            "lease_expires": now + lease_delta,
            "expire_at": now + dt.timedelta(days=1),
            "job_name": "nightly",
            "schedule_time": now,
        }

    collection.document("stuck").set(record("in_progress", -dt.timedelta(minutes=1)))
    collection.document("running").set(record("in_progress", dt.timedelta(minutes=5)))
    collection.document("done").set(record("completed", -dt.timedelta(minutes=1)))
    assert [run for run, _ in runs.stuck_runs(collection, now)] == ["stuck"]


def test_show_prints_one_run_by_job_and_time(http, collection, recent, capsys, work):
    assert runs.main(["show", "nightly", recent]) == 1
    assert "no record" in capsys.readouterr().out
    http.post("/", headers=scheduler_headers("nightly", recent))
    assert runs.main(["show", "nightly", recent]) == 0
    shown = capsys.readouterr().out
    assert list(records(collection))[0] in shown and '"status": "completed"' in shown


def test_fire_sends_what_cloud_scheduler_sends():
    at = dt.datetime(2026, 3, 4, 5, 6, 59, 999999, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    assert fire.minute_now(at) == "2026-03-04T04:06:00Z"
    assert fire.delivery_headers("nightly", "2026-03-04T04:06:00Z", "p-123456", "europe-west1") == {
        dedup.JOB_NAME_HEADER: "nightly",
        dedup.SCHEDULE_TIME_HEADER: "2026-03-04T04:06:00Z",
        dedup.PROJECT_HEADER: "p-123456",
        dedup.LOCATION_HEADER: "europe-west1",
    }


def test_fire_sends_a_job_id_as_its_scheduler_job_name():
    """`make fire JOB=nightly` is keyed and given to the work as the deployed job's deliveries are."""
    config = dedup.DedupConfig.from_env()
    for name, job in config.jobs.items():
        assert fire.scheduler_job_name(job.job_id, config) == name
        assert fire.scheduler_job_name(name, config) == name
    assert fire.scheduler_job_name("some-other-job", config) == "some-other-job"


def test_fire_refuses_a_bad_time_before_sending(capsys):
    assert fire.main(["--job", "nightly", "--time", "tomorrow", "--port", "9"]) == 2
    assert "TIME='tomorrow'" in capsys.readouterr().err
