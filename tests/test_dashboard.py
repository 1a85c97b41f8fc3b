"""The module's Cloud Monitoring dashboard (dashboard.tf), checked offline against the Monitoring API's own types.

`terraform test -verbose -json` plans the module with mock providers and prints the plan, which holds
the dashboard_json Terraform would send. google-cloud-monitoring-dashboards' Dashboard type parses it
with json_format.Parse(ignore_unknown_fields=False): a misspelled or misplaced field fails here, not
at apply. The charts' metric types must be the log-based metrics the same plan creates.
"""

from __future__ import annotations

import json
import re
import shutil
import textwrap

import pytest
from conftest import ROOT
from google.cloud.monitoring_dashboard_v1 import types as dashboard_types
from google.protobuf import json_format

from tests.terraform_offline import terraform

pytestmark = pytest.mark.terraform

MODULE_DIR = ROOT / "terraform" / "modules" / "scheduled-dedup"
JOBS = {"nightly": "0 3 * * *", "every-5-min": "*/5 * * * *", "month-end": "30 23 28-31 * mon-fri"}

PLAN_TEST = textwrap.dedent(
    """\
    mock_provider "google" {}
    mock_provider "archive" {}
    mock_provider "time" {}

    variables {
      project_id = "dashboard-project"
      region     = "europe-west1"
      slug       = "dash"
      source_dir = "."
      source_files = ["versions.tf"]
      jobs       = { %s }
      audit      = { interval_minutes = 30 }
    }

    run "dashboard" {
      command = plan
    }
    """
)


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict[str, dict]:
    """Every planned resource of the module, by address: {address: its planned values}."""
    workdir = tmp_path_factory.mktemp("dashboard") / "module"
    shutil.copytree(MODULE_DIR, workdir)
    jobs = ", ".join(f'"{job}" = {{ schedule = "{schedule}" }}' for job, schedule in JOBS.items())
    (workdir / "tests").mkdir()
    (workdir / "tests" / "dashboard.tftest.hcl").write_text(PLAN_TEST % jobs)
    result = terraform(workdir, "test", "-verbose", "-json")
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for line in result.stdout.splitlines():
        message = json.loads(line)
        if message.get("type") == "test_plan":
            changes = message["test_plan"]["resource_changes"]
            return {change["address"]: change["change"]["after"] for change in changes}
    raise AssertionError(f"no plan in the output of terraform test -verbose -json:\n{result.stdout[-3000:]}")


@pytest.fixture(scope="module")
def dashboard_json(planned) -> str:
    return planned["google_monitoring_dashboard.this"]["dashboard_json"]


def parse(text: str) -> dashboard_types.Dashboard:
    message = dashboard_types.Dashboard.pb(dashboard_types.Dashboard())
    json_format.Parse(text, message, ignore_unknown_fields=False)
    return dashboard_types.Dashboard.wrap(message)


def test_the_dashboard_is_the_monitoring_apis_dashboard_type(dashboard_json):
    dashboard = parse(dashboard_json)
    assert dashboard.display_name == "dash: scheduled runs"
    assert dashboard.mosaic_layout.columns == 48


def test_the_types_refuse_a_field_the_api_does_not_have(dashboard_json):
    """The check can fail: one misspelled field (dataSet for dataSets) is refused."""
    broken = dashboard_json.replace('"dataSets"', '"dataSet"', 1)
    with pytest.raises(json_format.ParseError, match="dataSet"):
        parse(broken)


def test_one_row_per_job_outcomes_missed_failures_and_duration(dashboard_json):
    tiles = parse(dashboard_json).mosaic_layout.tiles
    titles = sorted(tile.widget.title for tile in tiles)
    assert titles == sorted(
        f"{job}: {chart}"
        for job in JOBS
        for chart in (
            "deliveries by outcome, per hour",
            "runs the audit found missing or stuck",
            "failures and late skips, per hour",
            "work duration (p50, p95, p99)",
        )
    )
    rows = {tile.y_pos for tile in tiles}
    assert len(rows) == len(JOBS) and all(tile.x_pos + tile.width <= 48 for tile in tiles)
    for tile in tiles:
        job = tile.widget.title.split(": ")[0]
        for data_set in tile.widget.xy_chart.data_sets:
            assert f'metric.label.job="dash-{job}"' in data_set.time_series_query.time_series_filter.filter


def test_every_chart_reads_a_metric_the_module_creates(planned, dashboard_json):
    created = {
        f"logging.googleapis.com/user/{values['name']}"
        for address, values in planned.items()
        if address.startswith("google_logging_metric.")
    }
    charted = set(re.findall(r'metric\.type=\\"([^"\\]+)\\"', dashboard_json))
    assert charted and charted <= created, charted - created
    # Every outcome, the audit's findings and the duration distribution are charted: every metric of
    # the handler's log lines (not Scheduler's per-job attempt-failed metrics, which have their alerts).
    handler_metrics = {
        f"logging.googleapis.com/user/{values['name']}"
        for address, values in planned.items()
        if address.startswith("google_logging_metric.") and not address.startswith("google_logging_metric.scheduler_")
    }
    assert charted == handler_metrics, handler_metrics ^ charted


def test_the_duration_chart_reads_the_distribution_by_percentile(planned, dashboard_json):
    duration = planned["google_logging_metric.work_duration"]
    assert duration["metric_descriptor"][0]["value_type"] == "DISTRIBUTION"
    assert duration["value_extractor"] == "EXTRACT(jsonPayload.duration_ms)"
    tiles = [tile for tile in parse(dashboard_json).mosaic_layout.tiles if "work duration" in tile.widget.title]
    reducers = {
        data_set.time_series_query.time_series_filter.aggregation.cross_series_reducer.name
        for tile in tiles
        for data_set in tile.widget.xy_chart.data_sets
    }
    assert reducers == {"REDUCE_PERCENTILE_50", "REDUCE_PERCENTILE_95", "REDUCE_PERCENTILE_99"}
