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

locals {
  # One alert policy per outcome that needs a person. Any occurrence alerts where nothing else will
  # happen by itself: a terminal failure is never retried; an outage (store_unavailable) or a bad
  # setting (misconfigured) that outlasts Scheduler's retries loses the run without another line.
  alerts = var.alerting.enabled ? {
    terminal_failure = {
      title     = "scheduled run failed for good"
      severity  = "ERROR"
      threshold = 0
      window    = 300
      content   = "A run of a ${var.slug} Cloud Scheduler job ended in a terminal failure: it is recorded `failed` in Firestore (${var.firestore.collection}) and Scheduler will not retry it. Find it in Logs Explorer with `jsonPayload.outcome=\"terminal_failure\"` and read `jsonPayload.run_id`."
    }
    retryable_failure = {
      title     = "scheduled runs keep failing and retrying"
      severity  = "WARNING"
      threshold = var.alerting.retryable_failure_threshold
      window    = var.alerting.window_seconds
      content   = "Runs of a ${var.slug} Cloud Scheduler job failed with retryable errors more than ${var.alerting.retryable_failure_threshold} times within ${var.alerting.window_seconds}s. Scheduler retries them until its retry_config runs out; look for `jsonPayload.outcome=\"retryable_failure\"`."
    }
    store_unavailable = {
      title     = "Firestore unreachable"
      severity  = "ERROR"
      threshold = 0
      window    = 300
      content   = "The ${var.slug} handler could not reach Firestore (database ${var.firestore.database}) and answered 500 without running the work. Scheduler retries the run; if the outage outlasts its retry_config, that run never runs. Look for `jsonPayload.outcome=\"store_unavailable\"` (the line names the error, e.g. DeadlineExceeded)."
    }
    misconfigured = {
      title     = "handler misconfigured"
      severity  = "ERROR"
      threshold = 0
      window    = 300
      content   = "The ${var.slug} handler refused to work because a DEDUP_* setting is invalid, or the Firestore database it names (${var.firestore.database}) does not exist or is in Datastore mode, and answered 500. Every run fails the same way until a deploy fixes it; the log line (`jsonPayload.outcome=\"misconfigured\"`) names the variable, its value and the rule, or the database and Firestore's answer."
    }
  } : {}
}

resource "google_monitoring_alert_policy" "outcome" {
  for_each = local.alerts

  project               = var.project_id
  display_name          = "${var.slug}: ${each.value.title}"
  combiner              = "OR"
  severity              = each.value.severity
  notification_channels = var.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "more than ${each.value.threshold} ${each.key} in ${each.value.window}s"

    condition_threshold {
      filter          = local.metric_filter[each.key]
      comparison      = "COMPARISON_GT"
      threshold_value = each.value.threshold
      duration        = "0s"

      aggregations {
        alignment_period     = "${each.value.window}s"
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
    content   = each.value.content
  }
}
