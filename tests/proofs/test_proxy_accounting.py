{%- if cookiecutter.target != "function" -%}
"""Every execution a proxy started accounted for (issue 25, scenarios 5 and 6), through the bake's own fake of the
{{ "Run v2" if cookiecutter.target == "cloud_run_job" else "Workflows" }} API (tests/test_proxy.py) and the
Firestore emulator.

- An execution that never ends: once its run has been `started` longer than its job's max_execution_seconds
  (rules.max_execution_seconds) every audit reports it `overdue` (the line its metric and alert count), `runs.py
  stuck` lists it, `overlap: skip` says so when it skips behind it, and its record is kept past the retention while
  the execution runs, so that its end is still recorded.
{%- if cookiecutter.target == "cloud_run_job" %}
- A Cloud Run job execution whose tasks exit 0 after dead-lettering items is recorded `failed` with its dead letters
  counted (execution_outcome `dead_lettered`), never `completed`.
{%- endif %}
"""

import argparse
import datetime as dt

import test_proxy
from scheduled_dedup_tools import runs
from test_proxy import CLOCK, TARGET, deliver, ended_lines, jobs, run_key, run_record

import config as configuration

# The bake's fake of the API and its clock, fixtures of this module too.
api, recent_schedule = test_proxy.api, test_proxy.recent_schedule
FIRST = f"{TARGET}/executions/run-1"
BOUND_HOURS = 2  # the job's max_execution_seconds, in hours


def bounded(monkeypatch):
    jobs(monkeypatch, max_execution_seconds=BOUND_HOURS * 3600)


def audit(http, hours_later):
    return deliver(http, hours_later=hours_later, job=configuration.current().audit_job)


def overdue_lines(log_lines):
    return [line for line in log_lines() if line.get("audit_state") == "overdue"]


def test_an_execution_past_its_bound_is_reported_overdue_by_every_audit_and_not_before(
    http, collection, api, monkeypatch, log_lines
):
    """Reported by each audit, as the audit's missing and stuck runs are: its alert stays open while it runs."""
    bounded(monkeypatch)
    deliver(http)

    assert audit(http, BOUND_HOURS - 1).status_code == 200
    assert overdue_lines(log_lines) == []  # within its bound: running, not overdue
    CLOCK[0] = run_record(collection)["started_at"] + dt.timedelta(hours=BOUND_HOURS, minutes=1)
    assert audit(http, BOUND_HOURS).status_code == 200
    assert audit(http, BOUND_HOURS + 1).status_code == 200

    lines = overdue_lines(log_lines)
    assert len(lines) == 2
    assert {(line["severity"], line["execution"], line["run_id"], line["job"]) for line in lines} == {
        ("WARNING", FIRST, run_key().run_id, "nightly")
    }
    assert run_record(collection)["status"] == "started"  # still followed: its end will be recorded


def test_runs_stuck_lists_an_overdue_execution(http, collection, api, monkeypatch, capsys):
    bounded(monkeypatch)
    deliver(http)
    capsys.readouterr()
    runs.stuck(configuration.current(), argparse.Namespace())
    assert FIRST not in capsys.readouterr().out  # within its bound

    CLOCK[0] += dt.timedelta(hours=BOUND_HOURS, minutes=1)
    runs.stuck(configuration.current(), argparse.Namespace())

    (line,) = [line for line in capsys.readouterr().out.splitlines() if run_key().run_id in line]
    assert "overdue" in line and FIRST in line


def test_overlap_skip_behind_an_overdue_execution_says_so(http, collection, api, monkeypatch):
    bounded(monkeypatch)
    deliver(http)

    within = deliver(http, hours_later=1)
    past = deliver(http, hours_later=BOUND_HOURS + 1)

    assert within.text.startswith("skipped_overlap") and "overdue" not in within.text
    assert past.status_code == 200 and past.text.startswith("skipped_overlap")
    assert "overdue" in past.text and "max_execution_seconds" in past.text and FIRST in past.text


def test_an_overdue_run_is_kept_past_its_retention_and_its_end_recorded(http, collection, api, monkeypatch, log_lines):
    """Its record would expire at the retention (its TTL); the audit that reports it overdue keeps it while its
    execution runs, so that the end is still followed and recorded, never dropped without a line."""
    bounded(monkeypatch)
    deliver(http)
    expires = run_record(collection)["expire_at"]
    CLOCK[0] += dt.timedelta(hours=BOUND_HOURS, minutes=1)
    audit(http, BOUND_HOURS + 1)

    api.states[FIRST] = "failed"  # it ends, after the record's first expire_at
    CLOCK[0] = expires + dt.timedelta(hours=1)
    assert audit(http, (CLOCK[0] - test_proxy.SCHEDULED) // dt.timedelta(hours=1)).status_code == 200

    assert run_record(collection)["status"] == "failed"
    assert [line["execution"] for line in ended_lines(log_lines)] == [FIRST]
{%- if cookiecutter.target == "cloud_run_job" %}


def dead_letters(collection):
    """Where the job's tasks write their dead letters (cloud_run_job/store.py: JobStore.dead_letters)."""
    return collection._client.collection(configuration.current().dead_letters_collection)


def dead_letter(collection, item_id, hours_later=0):
    """What a task writes for an item that failed terminally (JobStore.fail), keyed `<run id>:<item id>`."""
    run_id = run_key(hours_later).run_id
    letter = {"run_id": run_id, "item_id": item_id, "failed_at": CLOCK[0], "stage": "transform", "error": "bad input"}
    dead_letters(collection).document(f"{run_id}:{item_id}").set(letter)


def test_a_succeeded_execution_that_dead_lettered_items_is_recorded_as_such(http, collection, api, log_lines):
    """Its tasks exit 0 (a dead-lettered item is finished for the job), the execution succeeds: the run is recorded
    `failed` with its dead letters counted, and its line is what the execution-failed metric and alert count."""
    deliver(http)
    dead_letter(collection, "item-1")
    dead_letter(collection, "item-2")
    api.states[FIRST] = "succeeded"

    audit(http, 1)

    record = run_record(collection)
    assert record["status"] == "failed" and record["dead_letters"] == 2
    assert "2 item(s) dead-lettered" in record["last_error"] and FIRST in record["last_error"]
    (line,) = ended_lines(log_lines)
    assert (line["severity"], line["execution_outcome"], line["execution"]) == ("ERROR", "dead_lettered", FIRST)


def test_another_runs_dead_letters_do_not_count(http, collection, api):
    deliver(http)
    dead_letter(collection, "item-1", hours_later=5)
    api.states[FIRST] = "succeeded"

    audit(http, 1)

    assert run_record(collection)["status"] == "completed" and "dead_letters" not in run_record(collection)
{%- endif %}
{%- endif %}
