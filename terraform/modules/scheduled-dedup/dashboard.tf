# A Cloud Monitoring dashboard: one row per job (outcomes over time, missed and stuck runs,
# failures, how long the work takes), from the log-based metrics of monitoring.tf and audit.tf and
# the work-duration distribution below. The JSON is the Monitoring API's Dashboard type; the
# template's tests/test_dashboard.py parses it with google-cloud-monitoring-dashboards, which
# refuses unknown fields.

resource "google_logging_metric" "work_duration" {
  project     = var.project_id
  name        = "${var.slug}-work-duration"
  description = "${var.slug}: how long the work of a claimed run took (jsonPayload.duration_ms on the outcome line), by job and outcome."
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${local.function_name}\"",
    "jsonPayload.duration_ms:*",
  ])
  value_extractor = "EXTRACT(jsonPayload.duration_ms)"

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "DISTRIBUTION"
    unit         = "ms"
    display_name = "${var.slug} work duration"

    labels {
      key         = "job"
      value_type  = "STRING"
      description = "Cloud Scheduler job name (X-CloudScheduler-JobName)."
    }
    labels {
      key         = "outcome"
      value_type  = "STRING"
      description = "How the delivery ended: processed, terminal_failure, retryable_failure, superseded."
    }
  }

  label_extractors = {
    job     = "EXTRACT(jsonPayload.job)"
    outcome = "EXTRACT(jsonPayload.outcome)"
  }

  # Doubling buckets from 1 ms to 2^22 ms (70 min, past the longest function timeout, 60 min).
  bucket_options {
    exponential_buckets {
      num_finite_buckets = 23
      growth_factor      = 2
      scale              = 1
    }
  }

  depends_on = [time_sleep.apis]
}

locals {
  # Metric names from the slug (not the resources' attributes), so the JSON is known at plan time.
  dashboard_metric = {
    for name in concat(local.outcomes, ["run-missing", "run-stuck", "work-duration"]) :
    name => "logging.googleapis.com/user/${var.slug}-${replace(name, "_", "-")}"
  }

  # One chart: a stacked bar (or line) per series, each a metric filtered to one job.
  dashboard_series = {
    outcomes = [for outcome in local.outcomes : { metric = outcome, legend = outcome }]
    missed   = [{ metric = "run-missing", legend = "missing" }, { metric = "run-stuck", legend = "stuck" }]
    failures = [for outcome in ["terminal_failure", "retryable_failure", "store_unavailable", "skipped_late"] : { metric = outcome, legend = outcome }]
  }

  dashboard_columns = 48
  dashboard_tile    = { width = 12, height = 16 }

  dashboard_rows = [
    for row, id in sort(keys(var.jobs)) : concat(
      [
        for column, chart in ["outcomes", "missed", "failures"] : {
          xPos   = column * local.dashboard_tile.width
          yPos   = row * local.dashboard_tile.height
          width  = local.dashboard_tile.width
          height = local.dashboard_tile.height
          widget = {
            title = "${id}: ${chart == "outcomes" ? "deliveries by outcome, per hour" : chart == "missed" ? "runs the audit found missing or stuck" : "failures and late skips, per hour"}"
            xyChart = {
              chartOptions = { mode = "COLOR" }
              dataSets = [
                for series in local.dashboard_series[chart] : {
                  plotType       = "STACKED_BAR"
                  legendTemplate = series.legend
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "metric.type=\"${local.dashboard_metric[series.metric]}\" AND resource.type=\"cloud_run_revision\" AND metric.label.job=\"${var.slug}-${id}\""
                      aggregation = {
                        alignmentPeriod    = "3600s"
                        perSeriesAligner   = "ALIGN_SUM"
                        crossSeriesReducer = "REDUCE_SUM"
                      }
                    }
                  }
                }
              ]
              yAxis = { label = "runs", scale = "LINEAR" }
            }
          }
        }
      ],
      [
        {
          xPos   = 3 * local.dashboard_tile.width
          yPos   = row * local.dashboard_tile.height
          width  = local.dashboard_tile.width
          height = local.dashboard_tile.height
          widget = {
            title = "${id}: work duration (p50, p95, p99)"
            xyChart = {
              chartOptions = { mode = "COLOR" }
              dataSets = [
                for percentile in [50, 95, 99] : {
                  plotType       = "LINE"
                  legendTemplate = "p${percentile}"
                  timeSeriesQuery = {
                    timeSeriesFilter = {
                      filter = "metric.type=\"${local.dashboard_metric["work-duration"]}\" AND resource.type=\"cloud_run_revision\" AND metric.label.job=\"${var.slug}-${id}\""
                      aggregation = {
                        alignmentPeriod    = "3600s"
                        perSeriesAligner   = "ALIGN_DELTA"
                        crossSeriesReducer = "REDUCE_PERCENTILE_${percentile}"
                      }
                    }
                  }
                }
              ]
              yAxis = { label = "ms", scale = "LOG10" }
            }
          }
        }
      ],
    )
  ]

  dashboard_json = jsonencode({
    displayName  = "${var.slug}: scheduled runs"
    mosaicLayout = { columns = local.dashboard_columns, tiles = flatten(local.dashboard_rows) }
  })
}

resource "google_monitoring_dashboard" "this" {
  project        = var.project_id
  dashboard_json = local.dashboard_json

  depends_on = [time_sleep.apis]
}
