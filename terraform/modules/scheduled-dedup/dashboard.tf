# A Cloud Monitoring dashboard of a FIXED size, whatever the number of jobs: six charts (outcomes,
# missed and stuck runs, failures, attempts that never reached the handler, work duration, audits)
# from the log-based metrics of monitoring.tf and audit.tf and the work-duration distribution below,
# and a dashboard filter on the metrics' `job` label that narrows every chart to one job. A dashboard
# holds at most 100 widgets (Cloud Monitoring quotas and limits, "Dashboards": widgets per
# dashboard), which one row per job passed at 26 jobs. The JSON is the Monitoring API's Dashboard
# type, checked by parsing it with google-cloud-monitoring-dashboards, which refuses unknown fields.

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

  depends_on = [terraform_data.apis]
}

locals {
  # Metric names from the slug (not the resources' attributes), so the JSON is known at plan time.
  dashboard_metric = {
    for name in concat(local.outcomes, ["run-missing", "run-stuck", "work-duration", "attempt-failed", "audit-ran"]) :
    name => "logging.googleapis.com/user/${var.slug}-${replace(name, "_", "-")}"
  }

  # Each chart: its title, y axis and series; a series is a metric (a key of dashboard_metric) summed
  # over every job (by_job false: the job filter narrows it) or split by job (one line per job).
  dashboard_charts = concat(
    [
      {
        title  = "deliveries by outcome, per hour"
        y_axis = { label = "deliveries", scale = "LINEAR" }
        series = [for outcome in local.outcomes : { metric = outcome, legend = outcome, by_job = false }]
      },
      {
        title  = "runs the audit found missing or stuck, by job"
        y_axis = { label = "runs", scale = "LINEAR" }
        series = [for state in ["missing", "stuck"] : { metric = "run-${state}", legend = state, by_job = true }]
      },
      {
        title  = "failures and late skips, by job, per hour"
        y_axis = { label = "deliveries", scale = "LINEAR" }
        series = [for outcome in ["terminal_failure", "retryable_failure", "store_unavailable", "skipped_late"] : { metric = outcome, legend = outcome, by_job = true }]
      },
      {
        title  = "attempts that never reached the handler, by job, per hour"
        y_axis = { label = "attempts", scale = "LINEAR" }
        series = [{ metric = "attempt-failed", legend = "failed attempts", by_job = true }]
      },
      {
        title  = "work duration (p50, p95, p99)"
        y_axis = { label = "ms", scale = "LOG10" }
        series = [for percentile in [50, 95, 99] : { metric = "work-duration", legend = "p${percentile}", by_job = false, percentile = percentile }]
      },
    ],
    var.audit == null ? [] : [
      {
        title  = "audits finished, per hour"
        y_axis = { label = "audits", scale = "LINEAR" }
        series = [{ metric = "audit-ran", legend = "audits", by_job = false }]
      },
    ],
  )

  dashboard_columns = 48
  dashboard_tile    = { width = 24, height = 16 }

  dashboard_tiles = [
    for index, chart in local.dashboard_charts : merge(
      { width = local.dashboard_tile.width, height = local.dashboard_tile.height },
      # The API omits zero-valued fields and the provider's diff does not suppress them, so an
      # xPos or yPos of 0 shows as a change on every plan (terraform-provider-google issues 24650
      # and 16173, open; magic-modules PR 18515, which would suppress it, closed unmerged): a zero
      # position is left out, which the API reads as 0.
      { for key, value in {
        xPos = (index % 2) * local.dashboard_tile.width
        yPos = floor(index / 2) * local.dashboard_tile.height
      } : key => value if value != 0 },
      {
        widget = {
          title = chart.title
          xyChart = {
            chartOptions = { mode = "COLOR" }
            dataSets = [
              for series in chart.series : {
                plotType       = can(series.percentile) ? "LINE" : "STACKED_BAR"
                legendTemplate = series.by_job ? "$${metric.labels.job} ${series.legend}" : series.legend
                timeSeriesQuery = {
                  timeSeriesFilter = {
                    filter = "metric.type=\"${local.dashboard_metric[series.metric]}\" AND resource.type=\"${series.metric == "attempt-failed" ? "cloud_scheduler_job" : "cloud_run_revision"}\""
                    aggregation = merge(
                      {
                        alignmentPeriod    = "3600s"
                        perSeriesAligner   = can(series.percentile) ? "ALIGN_DELTA" : "ALIGN_SUM"
                        crossSeriesReducer = can(series.percentile) ? "REDUCE_PERCENTILE_${series.percentile}" : "REDUCE_SUM"
                      },
                      # An empty groupByFields would be one more field the API omits (above).
                      { for key, value in { groupByFields = ["metric.label.job"] } : key => value if series.by_job },
                    )
                  }
                }
              }
            ]
            yAxis = chart.y_axis
          }
        }
      },
    )
  ]

  dashboard_json = jsonencode({
    displayName  = "${var.slug}: scheduled runs"
    mosaicLayout = { columns = local.dashboard_columns, tiles = local.dashboard_tiles }
    # A pinned filter on the metric label `job`: with no templateVariable it applies to every widget
    # whose data has that label (Dashboard API, DashboardFilter.template_variable: "If omitted, the
    # dashboard filter will be applied to all relevant widgets"; Monitoring docs, "Pinned filters and
    # variables on a custom dashboard" and "Create and manage dashboards by API: Dashboard filters").
    dashboardFilters = [{ labelKey = "job", filterType = "METRIC_LABEL" }]
  })
}

resource "google_monitoring_dashboard" "this" {
  project        = var.project_id
  dashboard_json = local.dashboard_json

  depends_on = [terraform_data.apis]
}
