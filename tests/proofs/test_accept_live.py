"""Only what Cloud Scheduler sends is accepted (issue 16), on a real functions-framework server with the deployed
threading and timeout settings: the same refusals the in-process tests/proofs/test_accept.py moves the clock for,
here at the real clock, across the process boundary, each answered with one outcome line and nothing written."""

import datetime as dt

import pytest
from conftest import configured, records, scheduler_headers
from test_stop import deployed_env

import schedules
from ledger import AUDIT_CURSOR_ID

pytestmark = pytest.mark.faults

HOURLY = {"live-hourly": {"schedule": "0 * * * *", "time_zone": "Etc/UTC"}}


def rfc3339(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def outcome_lines(server):
    return [line for line in server.log_lines() if "http_status" in line]


def test_a_live_server_refuses_what_scheduler_never_sends_and_serves_on(fleet, collection, monkeypatch):
    configured(monkeypatch, lambda loaded: loaded.with_jobs(HOURLY))
    server = fleet.start(**deployed_env(8)).wait_ready()
    now = dt.datetime.now(dt.UTC)
    last_fire = now.replace(minute=0, second=0, microsecond=0)
    next_fire = last_fire + dt.timedelta(hours=1)
    if next_fire - now < dt.timedelta(minutes=2):  # inside the clock margin the next-but-one is still refused
        last_fire, next_fire = next_fire, next_fire + dt.timedelta(hours=1)
    refusals = {
        "GET": (server.deliver(scheduler_headers("live-hourly", rfc3339(last_fire)), method="GET"), 405),
        "after the next fire time": (
            server.deliver(scheduler_headers("live-hourly", rfc3339(next_fire + dt.timedelta(hours=1)))),
            400,
        ),
        "another project": (
            server.deliver(scheduler_headers("live-hourly", rfc3339(last_fire), **{"X-Scheduler-Project": "other-1"})),
            400,
        ),
    }
    for case, (answer, status) in refusals.items():
        assert answer.status == status, (case, answer)
    assert records(collection) == {}  # nothing written for any of them
    lines = outcome_lines(server)
    assert [line["http_status"] for line in lines] == [405, 400, 400]  # one line each
    # The instance serves on: a delivery Scheduler does send runs the work.
    served = server.deliver(scheduler_headers("live-hourly", rfc3339(last_fire)))
    assert served.status == 200 and served.text.startswith("processed"), served


def test_a_live_audit_dated_ahead_leaves_the_bookmark_at_the_functions_clock(fleet, collection, monkeypatch):
    config = configured(monkeypatch, lambda loaded: loaded.with_jobs(HOURLY))
    server = fleet.start(**deployed_env(8)).wait_ready()
    before = dt.datetime.now(dt.UTC)
    # A Force run of the audit: its next fire time (its own cron, issue 24), ahead of the clock.
    ahead = rfc3339(
        schedules.next_fire_after(config.spec_of(config.audit_job).fire_rule, before + schedules.CLOCK_MARGIN)
    )
    answer = server.deliver(scheduler_headers(config.audit_job, ahead), timeout=60)
    assert answer.status == 200, answer
    bookmark = collection.document(AUDIT_CURSOR_ID).get().to_dict()
    (entry,) = bookmark["jobs"].values()
    assert before - dt.timedelta(seconds=5) <= entry["since"] <= dt.datetime.now(dt.UTC)
