# The audit: a Scheduler job of the same function whose work is the baked audit.py. Every
# var.audit.interval_minutes it reads the records of every job's expected runs over the last
# min(1 day, retention) in one batched read, and logs one line per missing or stuck run
# (jsonPayload.audit_state, .job, .schedule_time, .run_id) and a summary line. Its own deliveries
# go through the same claim as every other job's, so a retried audit runs once.

locals {
  # The name Scheduler sends (X-CloudScheduler-JobName). An underscore cannot appear in a job id
  # (rules.JOB_ID), so no user job's "<slug>-<id>" can take it. Also the baked config.py's Config.audit_job_name.
  audit_job_name = "${var.slug}_audit"
  # rules.AUDIT_INTERVALS_MINUTES divide an hour or a day, so the cron is exact.
  audit_schedule = var.audit == null ? null : (
    var.audit.interval_minutes < 60 ? "*/${var.audit.interval_minutes} * * * *" : "0 */${var.audit.interval_minutes / 60} * * *"
  )

  # What the audit logs per run: a log-based metric and an alert each (both lose a run if nobody acts).
  # A proxy bake's audit also reports each execution past its job's max_execution_seconds (the baked executions.py:
  # audit_state "overdue", logged by every audit while the execution runs).
  audit_findings = merge({
    missing = "runs the audit found missing: no record, lease and retry window long past (scheduled run missed)"
    stuck   = "runs the audit found stuck: in_progress with an expired lease"
    }, var.follows_executions ? {
    overdue = "runs the audit found overdue: started, their execution running past the job's max_execution_seconds"
  } : {})

  audit_alerts = merge({
    missing = {
      title   = "scheduled run missed"
      content = "The ${var.slug} audit found a scheduled run with no record although its lease and every Scheduler retry are long past: it never ran, and nothing will run it by itself. Runbook: docs/operations.md, \"A scheduled run was missed\". List them with `python -m scheduled_dedup_tools.runs missed --since ... --until ...`, fix the cause (paused or deleted Scheduler job, IAM, ingress, an outage longer than the retries), then `python -m scheduled_dedup_tools.runs backfill` the same window; each run executes once. Logs: `jsonPayload.audit_state=\"missing\"`."
    }
    stuck = {
      title   = "scheduled run stuck"
      content = "The ${var.slug} audit found a run still `in_progress` although its lease has expired: the instance that claimed it died (crash, out of memory, a deploy) and no retry took it over before Scheduler gave up. Its work may have run in part. Runbook: docs/operations.md, \"Find stuck runs\". Logs: `jsonPayload.audit_state=\"stuck\"` (the line names the job, schedule time and run_id); decide from the work's own effects whether it must run again, then `python -m scheduled_dedup_tools.runs backfill` its window: the delivery takes the run over."
    }
    }, var.follows_executions ? {
    overdue = {
      title   = "execution overdue"
      content = "The ${var.slug} audit found a run still `started` whose execution (a Cloud Run job or Workflows execution the function started) has run longer than its job's max_execution_seconds (config.yaml; a day by default): it hangs, or the bound is too short for it. Every audit reports it again while it runs, and keeps its record past the retention so that its end is still recorded. Runbook: docs/operations.md, \"An execution never ends\". Logs: `jsonPayload.audit_state=\"overdue\"` (`jsonPayload.execution` names it); `python -m scheduled_dedup_tools.runs stuck` lists it. Look at the execution in the console; cancel it if it hangs (its run is then recorded failed, and a re-run starts a new one), or raise the job's max_execution_seconds if it is only slow. Meanwhile `overlap: skip` skips the job's runs."
    }
  } : {})

  # The dead man's switch: the audit logs one summary line per run (audit.py: jsonPayload.audit_until, always set).
  # No summary for two audit intervals means the audit stopped (its Scheduler job paused or deleted,
  # or every delivery failing before the code): then nothing reports missed runs either. Two
  # intervals, not one, so a single late or retried audit does not page. MetricAbsence.duration:
  # "The minimum value of this field is 120 seconds. Larger values that are a multiple of a minute
  # ... are supported" (Monitoring API v3, AlertPolicy.Condition.MetricAbsence); interval_minutes is
  # 5-720 (variables.tf), so this is 600-86400 s, whole minutes, within the 90,000 s (25 h) Monitoring
  # allows an alerting policy's alignment period (variables.tf, var.alerting).
  audit_silence_seconds = var.audit == null ? null : 2 * var.audit.interval_minutes * 60
}

# The audit's Scheduler job, made as every job is (./scheduler-jobs), by a call of its own: its header follows the
# other jobs (history.tf), and one resource's instances cannot be ordered among themselves.
module "audit_job" {
  source = "./scheduler-jobs"

  target = local.scheduler_target
  jobs = var.audit == null ? {} : {
    # The same delivery settings as the jobs (scheduler.tf): the timing and retry rules hold for it too.
    audit = merge(var.retry, {
      name                     = local.audit_job_name
      description              = "${var.slug}: audit of every job's expected runs against the run records (audit.py), deduplicated like the jobs."
      schedule                 = local.audit_schedule
      time_zone                = "Etc/UTC"
      attempt_deadline_seconds = var.timing.attempt_deadline_seconds
      headers = {
        # When the last apply changed the schedules, and which (history.tf): the audit dates a change by it.
        "X-Schedules-Deployed" = local.schedules_deployed
      }
    })
  }

  depends_on = [
    terraform_data.apis,
    # No delivery before the invoker may call the function (the grant, then its propagation: iam.tf).
    time_sleep.invoker,
  ]
}

# The audit's job was google_cloud_scheduler_job.audit[0] here, before ./scheduler-jobs made it: an applied project
# keeps it.
moved {
  from = google_cloud_scheduler_job.audit[0]
  to   = module.audit_job.google_cloud_scheduler_job.this["audit"]
}

resource "google_logging_metric" "audit" {
  for_each = local.audit_findings

  project     = var.project_id
  name        = "${var.slug}-run-${each.key}"
  description = "${var.slug}: ${each.value}, by job; each audit reports each such run of its lookback again."
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${local.function_name}\"",
    "jsonPayload.audit_state=\"${each.key}\"",
  ])

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.slug} run ${each.key}"

    labels {
      key         = "job"
      value_type  = "STRING"
      description = "The audited run's Scheduler job name (<slug>-<job id>)."
    }
  }

  label_extractors = {
    job = "EXTRACT(jsonPayload.job)"
  }

  depends_on = [terraform_data.apis]
}

# The audit's summary lines: what the dead man's switch below watches.
resource "google_logging_metric" "audit_ran" {
  count = var.audit == null ? 0 : 1

  project     = var.project_id
  name        = "${var.slug}-audit-ran"
  description = "${var.slug}: audits that finished (the audit's summary line); none for two audit intervals means the audit stopped."
  filter = join(" AND ", [
    "resource.type=\"cloud_run_revision\"",
    "resource.labels.service_name=\"${local.function_name}\"",
    "jsonPayload.audit_until:*",
  ])

  metric_descriptor {
    metric_kind  = "DELTA"
    value_type   = "INT64"
    unit         = "1"
    display_name = "${var.slug} audits"
  }

  depends_on = [terraform_data.apis]
}

# One policy per finding, grouped by job: an incident names the job whose run was missed or is stuck.
resource "google_monitoring_alert_policy" "audit_finding" {
  for_each = var.alerting.enabled && var.audit != null ? local.audit_alerts : {}

  project               = var.project_id
  display_name          = "${var.slug}: ${each.value.title}"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "the audit found a ${each.key} run, per job"

    condition_threshold {
      filter          = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.audit[each.key].name}\" AND resource.type=\"cloud_run_revision\""
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
    content   = each.value.content
  }

  # A log-based metric is 404 for up to 10 minutes after its creation (monitoring.tf, time_sleep.metrics).
  depends_on = [time_sleep.metrics]
}

# The watchdog watched: fires when no audit has finished for local.audit_silence_seconds. The
# series are summed across revisions (a deploy starts a new revision, whose series replaces the
# old one's: without the reducer the old series' silence would fire after every deploy).
resource "google_monitoring_alert_policy" "audit_silent" {
  count = var.alerting.enabled && var.audit != null ? 1 : 0

  project               = var.project_id
  display_name          = "${var.slug}: the audit stopped"
  combiner              = "OR"
  severity              = "ERROR"
  notification_channels = local.notification_channels
  user_labels           = local.labels

  conditions {
    display_name = "no audit summary for ${local.audit_silence_seconds}s (two audit intervals)"

    condition_absent {
      filter   = "metric.type=\"logging.googleapis.com/user/${google_logging_metric.audit_ran[0].name}\" AND resource.type=\"cloud_run_revision\""
      duration = "${local.audit_silence_seconds}s"

      aggregations {
        alignment_period     = "300s"
        per_series_aligner   = "ALIGN_SUM"
        cross_series_reducer = "REDUCE_SUM"
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
    content   = "No ${var.slug} audit has logged its summary line for two audit intervals: the audit stopped, so missed and stuck runs are no longer reported. Runbook: docs/operations.md, \"The audit stopped\". Check its Scheduler job `${local.audit_job_name}` (paused? deleted? `gcloud scheduler jobs describe ${local.audit_job_name} --location ${var.region}`), its attempts (`resource.type=\"cloud_scheduler_job\" resource.labels.job_id=\"${local.audit_job_name}\"`) and the function's logs for `jsonPayload.job=\"${local.audit_job_name}\"`."
  }

  depends_on = [time_sleep.metrics]
}

# The missed-run policy was google_monitoring_alert_policy.run_missed (one per module): keep it on upgrade.
moved {
  from = google_monitoring_alert_policy.run_missed[0]
  to   = google_monitoring_alert_policy.audit_finding["missing"]
}
