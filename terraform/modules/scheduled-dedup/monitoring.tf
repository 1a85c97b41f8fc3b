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

  depends_on = [terraform_data.apis]
}

locals {
  metric_filter = {
    for outcome, metric in google_logging_metric.outcome :
    outcome => "metric.type=\"logging.googleapis.com/user/${metric.name}\" AND resource.type=\"cloud_run_revision\""
  }

  # HTTP statuses the handler itself never answers with (it answers 200, 400, 409 or 500, each with
  # one outcome line): 401/403 (OIDC token or invoker grant wrong), 404 (ingress, or no such
  # service), 429/503 (no instance free), 502, 504 (function timeout). Those attempts leave no
  # outcome line, so only Scheduler's own log sees them.
  attempt_failure_statuses = [401, 403, 404, 429, 502, 503, 504]
}

# Deliveries that never reach the handler. Cloud Scheduler logs every attempt of every job itself
# (log cloudscheduler.googleapis.com/executions, resource.type "cloud_scheduler_job" with labels
# job_id and location): an AttemptFinished entry per attempt, with httpRequest.status holding the
# target's HTTP status, and, for a failed attempt, severity ERROR and jsonPayload.status (a
# google.rpc code name such as PERMISSION_DENIED). ONE metric for every job of this bake, the
# audit's own job included, labelled by job: it counts the failed attempts that either got one of
# the statuses above or no HTTP status at all (the target was unreachable, or Scheduler's attempt
# deadline passed first). Its size does not grow with var.jobs: the job ids are matched by their
# shape (Logging query language, regular expressions: `=~` is an RE2 match), not listed. A bake
# whose slug is this slug + "-..." in the same project and region would be counted too; its
# incidents name its own jobs.
resource "google_logging_metric" "scheduler_attempt_failed" {
  project     = var.project_id
  name        = "${var.slug}-attempt-failed"
  description = "${var.slug}: attempts of its Cloud Scheduler jobs (the audit's included) that failed before the handler could answer (no outcome line), by job."
  filter = join(" AND ", [
    "resource.type=\"cloud_scheduler_job\"",
    "resource.labels.job_id=~\"${local.scheduler_job_pattern}\"",
    "resource.labels.location=\"${var.region}\"",
    "jsonPayload.\"@type\"=\"type.googleapis.com/google.cloud.scheduler.logging.AttemptFinished\"",
    "severity>=ERROR",
    "(httpRequest.status=(${join(" OR ", local.attempt_failure_statuses)}) OR NOT httpRequest.status:*)",
  ])

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.slug} attempts that never reached the handler"

    labels {
      key         = "job"
      value_type  = "STRING"
      description = "Cloud Scheduler job id (<slug>-<job id>, or the audit's <slug>_audit)."
    }
  }

  label_extractors = {
    job = "EXTRACT(resource.labels.job_id)"
  }

  depends_on = [terraform_data.apis]
}

locals {
  # Every Scheduler job of this bake: "<slug>-<job id>" (scheduler.tf; a job id is rules.JOB_ID,
  # [a-z0-9][a-z0-9-]{0,39}) and the audit's "<slug>_audit" (audit.tf).
  scheduler_job_pattern = "^${var.slug}(-[a-z0-9][a-z0-9-]*|_audit)$"
}

# An alert policy that reads a log-based metric created seconds earlier fails with 404 "Cannot find
# metric(s) ... it could take up to 10 minutes to become available" (terraform-provider-google
# issue 11102, open; Cloud Foundation Fabric fixed the same in PR 3739). Every alert policy depends
# on this wait, which depends on every metric the policies read; re-created (and waits again) only
# when a metric is added or renamed.
resource "time_sleep" "metrics" {
  create_duration = "${var.waits.metrics_seconds}s"

  triggers = {
    metrics = join(",", sort(concat(
      [for metric in google_logging_metric.outcome : metric.name],
      [google_logging_metric.scheduler_attempt_failed.name],
      [for metric in google_logging_metric.audit : metric.name],
      google_logging_metric.audit_ran[*].name,
      google_logging_metric.execution_failed[*].name,
    )))
  }

  depends_on = [google_logging_metric.outcome, google_logging_metric.scheduler_attempt_failed, google_logging_metric.audit, google_logging_metric.audit_ran, google_logging_metric.execution_failed]
}

# Who hears of an incident: the e-mail channel of var.alert_email and var.notification_channels.
resource "google_monitoring_notification_channel" "email" {
  count = var.alert_email == null || var.alert_email == "" ? 0 : 1

  project      = var.project_id
  display_name = "${var.slug}: ${var.alert_email}"
  type         = "email"
  labels = {
    email_address = var.alert_email
  }
  user_labels = local.labels

  depends_on = [terraform_data.apis]
}

locals {
  # Empty: incidents open in Monitoring and nobody is told. The baked root's check
  # "alerts_reach_someone" warns at every plan (a check in this module could not be expected by
  # the root's terraform test, so the warning lives where `terraform plan` is run).
  notification_channels = concat(google_monitoring_notification_channel.email[*].id, var.notification_channels)
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
      content   = "The ${var.slug} handler refused to work because config.yaml breaks a rule, or the Firestore database it names (${var.firestore.database}) does not exist or is in Datastore mode, and answered 500. Every run fails the same way until a deploy fixes it; the log line (`jsonPayload.outcome=\"misconfigured\"`) names the key, its value and the rule, or the database and Firestore's answer."
    }
  } : {}
}

resource "google_monitoring_alert_policy" "outcome" {
  for_each = merge(local.alerts, local.execution_alerts)

  project               = var.project_id
  display_name          = "${var.slug}: ${each.value.title}"
  combiner              = "OR"
  severity              = each.value.severity
  notification_channels = local.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "more than ${each.value.threshold} ${each.key} in ${each.value.window}s"

    condition_threshold {
      filter          = merge(local.metric_filter, local.execution_metric_filter)[each.key]
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

  depends_on = [time_sleep.metrics]
}

# Any attempt of a job that never reached the handler: a person must look (a token, grant or
# ingress problem repeats on every run; a 429/503/504 may recover on a retry, but if every retry
# meets it the run is lost without one outcome line). One policy for every job: the group-by on
# the metric's job label gives each job its own time series, so an incident names the job.
resource "google_monitoring_alert_policy" "scheduler_attempt_failed" {
  count = var.alerting.enabled ? 1 : 0

  project               = var.project_id
  display_name          = "${var.slug}: a Scheduler job cannot reach the handler"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "any attempt failed before the handler answered, per job"

    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.scheduler_attempt_failed.name}\" AND resource.type=\"cloud_scheduler_job\""
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
    content   = "An attempt of a ${var.slug} Cloud Scheduler job (the incident's `job` label names it; `${var.slug}_audit` is the audit) failed before the handler answered, so no outcome line exists for it. In Logs Explorer: `resource.type=\"cloud_scheduler_job\" resource.labels.job_id=\"<job>\" severity>=ERROR`; `httpRequest.status` says why (401/403: OIDC token or invoker grant; 404: ingress or service; 429/503: no instance; 504: function timeout; none: unreachable or attempt deadline). Runbook: docs/operations.md."
  }

  depends_on = [time_sleep.metrics]
}
