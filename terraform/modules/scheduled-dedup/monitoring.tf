# Observability from the handler's structured logs: one JSON line per delivery on stdout with
# jsonPayload.outcome (one of local.outcomes), jsonPayload.run_id, jsonPayload.attempt_id and
# jsonPayload.job. A gen2 function logs as its Cloud Run service (resource.type cloud_run_revision,
# service name = function name).

resource "google_logging_metric" "outcome" {
  for_each = toset(local.outcomes)

  project     = var.project_id
  name        = "${var.slug}-${replace(each.key, "_", "-")}"
  description = "${var.slug}: deliveries the handler logged with outcome ${each.key}, by job."
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${local.function_name}\"",
    "jsonPayload.outcome=\"${each.key}\"",
  ])

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.slug} ${each.key}"

    labels {
      key         = "job"
      value_type  = "STRING"
      description = "Cloud Scheduler job id (X-CloudScheduler-JobName)."
    }
  }

  label_extractors = {
    job = "EXTRACT(jsonPayload.job)"
  }

  depends_on = [google_project_service.this]
}

locals {
  metric_filter = {
    for outcome, metric in google_logging_metric.outcome :
    outcome => "metric.type=\"logging.googleapis.com/user/${metric.name}\" AND resource.type=\"cloud_run_revision\""
  }
}

resource "google_monitoring_alert_policy" "terminal_failure" {
  count = var.alerting.enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.slug}: scheduled run failed for good"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "terminal_failure logged"

    condition_threshold {
      filter          = local.metric_filter["terminal_failure"]
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.job"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "${var.alerting.auto_close_seconds}s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "A run of a ${var.slug} Cloud Scheduler job ended in a terminal failure: it is recorded `failed` in Firestore (${var.firestore.collection}) and Scheduler will not retry it. Find it in Logs Explorer with `jsonPayload.outcome=\"terminal_failure\"` and read `jsonPayload.run_id`."
  }
}

resource "google_monitoring_alert_policy" "retryable_failures" {
  count = var.alerting.enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.slug}: scheduled runs keep failing and retrying"
  combiner              = "OR"
  severity              = "WARNING"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "more than ${var.alerting.retryable_failure_threshold} retryable failures in ${var.alerting.window_seconds}s"

    condition_threshold {
      filter          = local.metric_filter["retryable_failure"]
      comparison      = "COMPARISON_GT"
      threshold_value = var.alerting.retryable_failure_threshold
      duration        = "0s"

      aggregations {
        alignment_period     = "${var.alerting.window_seconds}s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.job"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "${var.alerting.auto_close_seconds}s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "Runs of a ${var.slug} Cloud Scheduler job failed with retryable errors more than ${var.alerting.retryable_failure_threshold} times within ${var.alerting.window_seconds}s. Scheduler retries them until its retry_config runs out; look for `jsonPayload.outcome=\"retryable_failure\"`."
  }
}

# Firestore unreachable (500 store_unavailable): the run's state is unknown, so its work does not
# run. If the outage outlasts Scheduler's retries the run never runs and nothing else is logged,
# so any occurrence alerts.
resource "google_monitoring_alert_policy" "store_unavailable" {
  count = var.alerting.enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.slug}: Firestore unreachable"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "store_unavailable logged"

    condition_threshold {
      filter          = local.metric_filter["store_unavailable"]
      comparison      = "COMPARISON_GT"
      threshold_value = 0
      duration        = "0s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
        group_by_fields      = ["metric.label.job"]
      }

      trigger {
        count = 1
      }
    }
  }

  alert_strategy {
    auto_close = "${var.alerting.auto_close_seconds}s"
  }

  documentation {
    mime_type = "text/markdown"
    content   = "The ${var.slug} handler could not reach Firestore (database ${var.firestore.database}) and answered 500 without running the work. Scheduler retries the run; if the outage outlasts its retry_config, that run never runs. Look for `jsonPayload.outcome=\"store_unavailable\"` (the line names the error, e.g. DeadlineExceeded)."
  }
}
