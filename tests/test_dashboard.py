"""The module's Cloud Monitoring dashboard (dashboard.tf), checked offline against the Monitoring API's own types.

`terraform test -verbose -json` plans the module with mock providers and prints the plan, which holds
the dashboard_json Terraform would send. google-cloud-monitoring-dashboards' Dashboard type parses it
with json_format.Parse(ignore_unknown_fields=False): a misspelled or misplaced field fails here, not
at apply. The charts' metric types must be the log-based metrics the same plan creates.
"""

from __future__ import annotations

import json
import re

import pytest
from google.cloud.monitoring_dashboard_v1 import types as dashboard_types
from google.protobuf import json_format
from module_plan import hcl_jobs, plan_runs

pytestmark = pytest.mark.terraform

JOBS = {"nightly": "0 3 * * *", "every-5-min": "*/5 * * * *", "month-end": "30 23 28-31 * mon-fri"}

# Cloud Monitoring quotas and limits (https://cloud.google.com/monitoring/quotas), "Dashboards":
# at most 100 widgets on a dashboard.
WIDGETS_PER_DASHBOARD = 100


@pytest.fixture(scope="module")
def planned(tmp_path_factory) -> dict[str, dict]:
    """Every planned resource of the module, by address: {address: its planned values}."""
    variables = f"    jobs  = {hcl_jobs(JOBS)}\n    audit = {{ interval_minutes = 30 }}"
    return plan_runs(tmp_path_factory.mktemp("dashboard"), {"dashboard": variables})["dashboard"]


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
    assert len(dashboard.mosaic_layout.tiles) <= WIDGETS_PER_DASHBOARD


def test_the_types_refuse_a_field_the_api_does_not_have(dashboard_json):
    """The check can fail: one misspelled field (dataSet for dataSets) is refused."""
    broken = dashboard_json.replace('"dataSets"', '"dataSet"', 1)
    with pytest.raises(json_format.ParseError, match="dataSet"):
        parse(broken)


CHARTS = [
    "deliveries by outcome, per hour",
    "runs the audit found missing or stuck, by job",
    "failures and late skips, by job, per hour",
    "attempts that never reached the handler, by job, per hour",
    "work duration (p50, p95, p99)",
    "audits finished, per hour",
]


def test_a_fixed_set_of_charts_with_a_job_filter(dashboard_json):
    """Issue 19 item 10: one row per job passed the 100-widget limit at 26 jobs. The charts are the
    same whatever the jobs, side by side inside the 48 columns, and a pinned filter on the metric
    label `job` narrows them all to one job."""
    dashboard = parse(dashboard_json)
    tiles = dashboard.mosaic_layout.tiles
    assert [tile.widget.title for tile in tiles] == CHARTS
    assert all(tile.x_pos + tile.width <= 48 for tile in tiles)
    places = {(tile.x_pos, tile.y_pos) for tile in tiles}
    assert len(places) == len(tiles), "two tiles at one place"
    (job_filter,) = dashboard.dashboard_filters
    assert job_filter.label_key == "job"
    assert job_filter.filter_type == dashboard_types.DashboardFilter.FilterType.METRIC_LABEL
    # No template variable: the filter applies to every widget whose data has the label.
    assert not job_filter.template_variable
    for tile in tiles:
        for data_set in tile.widget.xy_chart.data_sets:
            assert "metric.label.job" not in data_set.time_series_query.time_series_filter.filter


def zero_valued(value, path="$") -> list[str]:
    """Every field of a JSON document holding its type's zero (0, "", false, [], {}): the API omits them."""
    if isinstance(value, dict):
        found = [] if value or path == "$" else [path]
        return found + [hit for key, item in value.items() for hit in zero_valued(item, f"{path}.{key}")]
    if isinstance(value, list):
        found = [] if value else [path]
        return found + [hit for index, item in enumerate(value) for hit in zero_valued(item, f"{path}[{index}]")]
    return [path] if value in (0, "", False) else []


def test_no_field_holds_a_zero_the_api_would_omit(dashboard_json):
    """Issue 19 item 5: the Monitoring API omits zero-valued fields (a tile at xPos/yPos 0 comes back
    without them) and the provider's diff does not suppress them (terraform-provider-google #24650
    and #16173, open; magic-modules PR #18515, which would have, closed unmerged): a zero in the JSON
    is a change on every plan."""
    assert zero_valued(json.loads(dashboard_json)) == []
    # The check can fail: the first tile at an explicit (0, 0) is found.
    document = json.loads(dashboard_json)
    document["mosaicLayout"]["tiles"][0] |= {"xPos": 0, "yPos": 0}
    assert zero_valued(document) == ["$.mosaicLayout.tiles[0].xPos", "$.mosaicLayout.tiles[0].yPos"]
    # ... and an absent position is the API's 0: the first tile still sits at the origin.
    first = parse(dashboard_json).mosaic_layout.tiles[0]
    assert (first.x_pos, first.y_pos) == (0, 0)


def test_every_chart_reads_a_metric_the_module_creates(planned, dashboard_json):
    created = {
        f"logging.googleapis.com/user/{values['name']}"
        for address, values in planned.items()
        if address.startswith("google_logging_metric.")
    }
    charted = set(re.findall(r'metric\.type=\\"([^"\\]+)\\"', dashboard_json))
    # Every log-based metric of the module is charted, and nothing else.
    assert charted == created, charted ^ created


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
