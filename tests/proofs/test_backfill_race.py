"""Backfill against real servers (tools/runs.py backfill, the audit's missed runs): a late Scheduler retry racing it."""

import datetime as dt
import json
import threading

from conftest import scheduler_headers
from live_server import wait_for_file
from scheduled_dedup_tools import runs
from test_audit import at, ten_minute_job, window_3h_ago

import audit
import config as configuration
from keys import RunKey


def test_backfill_runs_each_missing_run_once_even_racing_a_late_scheduler_retry(monkeypatch, fleet, now, capsys):
    """Real servers on the emulator. Backfill's first delivery is held mid-work (its claim live) while
    Scheduler's late retry of the same run arrives: 409. Another run's retry is sent at the moment
    backfill starts. Decided from the final state: every run's work ran exactly once."""
    ten_minute_job(monkeypatch)
    since, until = window_3h_ago(now)
    raced_time = audit.rfc3339(at(since) + dt.timedelta(minutes=20))
    held = fleet.start(SERVED_FAULT="hold_after_work")  # backfill's target: its first delivery waits
    scheduler = fleet.start()  # where Scheduler's late retries land (another instance)
    held.wait_ready()
    scheduler.wait_ready()
    assert runs.main(["backfill", "--since", since, "--until", until, "--dry-run"]) == 0
    assert capsys.readouterr().out.count("(dry run: not sent)") == 3 and fleet.executions() == []

    start = threading.Barrier(2)
    backfill_code = []

    def backfill():
        start.wait()
        backfill_code.append(runs.main(["backfill", "--since", since, "--until", until, "--port", str(held.port)]))

    filler = threading.Thread(target=backfill)
    filler.start()
    start.wait()
    raced = scheduler.deliver(scheduler_headers("ten", raced_time))  # at the moment backfill starts
    wait_for_file(held.signal_path)  # backfill's delivery of the first run did its work; its claim is live
    late_retry = scheduler.deliver(scheduler_headers("ten", since))
    held.signal_path.with_name(held.signal_path.name + ".go").write_text("go")
    filler.join(timeout=120)
    out = capsys.readouterr().out

    assert late_retry.status == 409 and late_retry.text.startswith("in_progress:"), late_retry
    assert raced.status in (200, 409), raced
    assert backfill_code == [0], out
    first_row = next(line for line in out.splitlines() if audit.rfc3339(at(since)) in line)
    assert "200 processed" in first_row, out
    config = configuration.current()
    run_ids = [
        RunKey(config.project, config.location, "ten", at(since) + dt.timedelta(minutes=m)).run_id for m in (0, 10, 20)
    ]
    assert sorted(fleet.executions()) == sorted(run_ids)  # each run's work ran exactly once
    assert scheduler.deliver(scheduler_headers("ten", since)).text.startswith("duplicate:")  # a later retry
    assert runs.main(["missed", "--since", since, "--until", until, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert sorted(fleet.executions()) == sorted(run_ids)
