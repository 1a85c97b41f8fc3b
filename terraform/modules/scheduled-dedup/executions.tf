# Proxy targets (var.follows_executions): the function starts a Cloud Run job or Workflows execution
# per run and follows it (a proxy bake's executions module): once an execution has ended, the run is recorded
# completed or failed and the function logs one line with jsonPayload.execution_outcome (succeeded,
# failed, cancelled, or dead_lettered: a Cloud Run job execution that succeeded although its tasks
# dead-lettered items) and the followed run's jsonPayload.job. None of those but succeeded is retried by
# nobody: one metric counts them by job and outcome, and one alert policy, grouped by job, fires on any
# (google_monitoring_alert_policy.outcome["execution_failed"], monitoring.tf). An execution that never ends
# is the audit's finding "overdue" (audit.tf).

resource "google_logging_metric" "execution_failed" {
  count = var.follows_executions ? 1 : 0

  project     = var.project_id
  name        = "${var.slug}-execution-failed"
  description = "${var.slug}: executions the function started that failed, were cancelled or dead-lettered items, by job (the run is recorded failed)."
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${local.function_name}\"",
    "jsonPayload.execution_outcome=(\"failed\" OR \"cancelled\" OR \"dead_lettered\")",
  ])

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.slug} failed executions"

    labels {
      key         = "job"
      value_type  = "STRING"
      description = "Cloud Scheduler job id of the run whose execution failed."
    }

    labels {
      key         = "execution_outcome"
      value_type  = "STRING"
      description = "failed, cancelled or dead_lettered."
    }
  }

  label_extractors = {
    job               = "EXTRACT(jsonPayload.job)"
    execution_outcome = "EXTRACT(jsonPayload.execution_outcome)"
  }

  depends_on = [terraform_data.apis]
}

locals {
  # The alert: one more entry of monitoring.tf's alert policies per outcome (google_monitoring_alert_policy.outcome).
  execution_alerts = var.follows_executions && var.alerting.enabled ? {
    execution_failed = {
      title     = "execution failed"
      severity  = "ERROR"
      threshold = 0
      window    = 300
      content   = "An execution the ${var.slug} function started (a Cloud Run job or Workflows execution) failed or was cancelled, or (a Cloud Run job) succeeded with items dead-lettered; nothing retries it. Its run is recorded `failed` in Firestore (${var.firestore.collection}) with the reason in `last_error` (and `dead_letters`, how many items). In Logs Explorer: `jsonPayload.execution_outcome=(\"failed\" OR \"cancelled\" OR \"dead_lettered\")`; `jsonPayload.execution` names the execution, `jsonPayload.run_id` the run. Dead letters: `python -m cloud_run_job verify <run_id>` names the items. Runbook: docs/operations.md; re-run it: docs/schedules-and-manual-runs.md."
    }
  } : {}
  execution_metric_filter = {
    for metric in google_logging_metric.execution_failed :
    "execution_failed" => "metric.type=\"logging.googleapis.com/user/${metric.name}\" AND resource.type=\"cloud_run_revision\""
  }
}
