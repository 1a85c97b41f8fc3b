"""One JSON line per log record on a real functions-framework server, as deployed (LOG_EXECUTION_ID=true,
which the function gets: function.tf). functions-framework installs root handlers of its own before
it loads main.py; main.configure_logging keeps only ours, or every record would be printed twice,
the copy without severity or outcome (twice the log volume, and its cost)."""

import pytest
from conftest import scheduler_headers

pytestmark = pytest.mark.faults


def test_every_record_is_one_json_line_with_its_severity(fleet, now):
    server = fleet.start(LOG_EXECUTION_ID="true").wait_ready()
    deliveries = [
        scheduler_headers("one-line", now.isoformat()),  # processed
        scheduler_headers("one-line", now.isoformat()),  # duplicate
        {"X-CloudScheduler-JobName": "one-line"},  # invalid_delivery: no schedule time
    ]
    answers = [server.deliver(headers) for headers in deliveries]
    server.kill()  # every line is written: nothing is left in a buffer

    printed = server.log_path.read_text().splitlines()
    lines = server.log_lines()
    assert [answer.status for answer in answers] == [200, 200, 400]
    assert len(lines) == len(printed), "some lines are not JSON"
    assert all("severity" in line for line in lines), [line for line in lines if "severity" not in line]
    outcomes = [line for line in lines if "outcome" in line]
    assert [line["outcome"] for line in outcomes] == ["processed", "duplicate", "invalid_delivery"]
    for line in outcomes:
        assert [other.get("message") for other in lines].count(line["message"]) == 1, line["message"]
    # The rest: the work's own line (served_job.py), from its process, and google-cloud-logging's one-time
    # line naming its version, once for the server (not once more per run's process).
    rest = [line for line in lines if "outcome" not in line]
    assert [line.get("message") for line in rest if "logging.googleapis.com/diagnostic" not in line] == [
        "served work started"
    ]
    assert sum("logging.googleapis.com/diagnostic" in line for line in rest) == 1
