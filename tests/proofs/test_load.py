"""Load: 8 concurrent clients, 50 runs x 4 duplicate deliveries, on a real server against the emulator.

The server is functions-framework's own: gunicorn, one worker process, THREADS threads (its default is
4 per core); it gets 16 so that no client waits for a thread. The figures are printed, not asserted
(timings depend on the machine); with LOAD_JSON=PATH set, this test also writes them to PATH as JSON
(the template's benchmark reads them from there).
"""

import datetime as dt
import json
import os

import pytest
from conftest import records, scheduler_headers
from live_server import measure_load

pytestmark = pytest.mark.load

RUNS, DUPLICATES, CLIENTS = 50, 4, 8


def test_duplicate_deliveries_under_load_run_each_run_exactly_once(fleet, collection):
    server = fleet.start(THREADS="16").wait_ready()
    base = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)

    def headers_of_run(index):
        moment = base - dt.timedelta(minutes=index)
        return scheduler_headers("load", moment.isoformat().replace("+00:00", "Z"))

    figures = measure_load(server, headers_of_run, runs=RUNS, duplicates=DUPLICATES, clients=CLIENTS)
    print(f"\nload: {CLIENTS} clients, {RUNS} runs x {DUPLICATES} deliveries: {figures.summary()}")

    assert figures.deliveries == RUNS * DUPLICATES
    assert not [status for status in figures.statuses if status >= 500 or status == 0]
    assert figures.outcomes["processed"] == RUNS
    # Every other delivery is a duplicate of a finished run (200) or meets a live claim (409, retried later).
    assert set(figures.outcomes) <= {"processed", "duplicate", "in_progress"}
    executions = fleet.executions()
    if os.environ.get("LOAD_JSON"):
        with open(os.environ["LOAD_JSON"], "w") as handover:
            json.dump(figures.handover(len(executions)), handover)
    assert len(executions) == len(set(executions)) == RUNS
    run_records = records(collection)
    assert len(run_records) == RUNS and {r["status"] for r in run_records.values()} == {"completed"}
