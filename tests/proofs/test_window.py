"""The accepted schedule-time window, at its exact edges (docs/security.md, "Replay of old schedule times").

A delivery is accepted when  now - retention < schedule time <= now + max_future  (read_run_key):
- retention (config.yaml's retention_seconds) is how long a run's record is
  kept: a record counts as absent from its expire_at on (Firestore's TTL may delete it any time
  after), so a schedule time that old could run again and is refused with a 400 instead;
- max_future (config.MAX_FUTURE, 32 days) lets a forced run through: "Force run" sends the
  job's next scheduled time, up to a month ahead for a monthly job. Jobs scheduled less often than
  every 32 days (yearly, Feb 29) cannot be forced through this handler.
Wider cases (too old, too far ahead, next month) are in test_handler.py.
"""

import dataclasses
import datetime as dt

import pytest
from conftest import PROJECT, records, scheduler_headers

import config
import dedup
from keys import read_run_key
from outcomes import InvalidDelivery

CONFIG = dataclasses.replace(config.load(), project=PROJECT)
NOW = dt.datetime(2026, 6, 15, 12, 0, tzinfo=dt.UTC)
TICK = dt.timedelta(microseconds=1)  # the finest step a schedule time has (fractions are cut to microseconds)


def iso(moment):
    return moment.isoformat().replace("+00:00", "Z")


def answer_at(schedule_time):
    try:
        return read_run_key(scheduler_headers("nightly", iso(schedule_time)), CONFIG, NOW).schedule_time
    except InvalidDelivery as refusal:
        return str(refusal)


@pytest.mark.parametrize(
    ("schedule_time", "accepted"),
    [
        (NOW - CONFIG.retention, False),
        (NOW - CONFIG.retention + TICK, True),
        (NOW, True),
        (NOW + CONFIG.max_future, True),
        (NOW + CONFIG.max_future + TICK, False),
    ],
    ids=["retention-edge", "just-inside-retention", "now", "max-future-edge", "just-past-max-future"],
)
def test_window_edges(schedule_time, accepted):
    answer = answer_at(schedule_time)
    if accepted:
        assert answer == schedule_time
    else:
        assert "older than the retention window" in answer or "in the future" in answer


def test_a_replay_at_the_end_of_retention_is_refused_never_run_again(http, collection, work, monkeypatch):
    schedule_time = NOW
    monkeypatch.setattr(dedup, "utcnow", lambda: schedule_time)
    assert http.post("/", headers=scheduler_headers("nightly", iso(schedule_time))).text.startswith("processed")
    (record,) = records(collection).values()

    monkeypatch.setattr(dedup, "utcnow", lambda: record["expire_at"] - TICK)
    last_moment = http.post("/", headers=scheduler_headers("nightly", iso(schedule_time)))
    monkeypatch.setattr(dedup, "utcnow", lambda: record["expire_at"])
    at_expiry = http.post("/", headers=scheduler_headers("nightly", iso(schedule_time)))

    assert last_moment.status_code == 200 and last_moment.text.startswith("duplicate")
    assert at_expiry.status_code == 400 and "older than the retention window" in at_expiry.text
    assert [r["attempts"] for r in records(collection).values()] == [1]
