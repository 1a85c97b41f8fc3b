output "function_uri" {
  description = "URI of the function's Cloud Run service; Scheduler posts there and uses it as the OIDC audience."
  value       = google_cloudfunctions2_function.this.service_config[0].uri
}

output "function_name" {
  description = "Name of the function (and of its Cloud Run service)."
  value       = google_cloudfunctions2_function.this.name
}

output "runtime_service_account_email" {
  description = "The function's runtime identity."
  value       = local.account_emails.runtime
}

output "function_environment_variables" {
  description = "The function's environment: functions-framework's settings (the threaded timeout off; no DEDUP_* setting: config.yaml), with var.function.environment_variables (a proxy target's PROXY_* name)."
  value       = google_cloudfunctions2_function.this.service_config[0].environment_variables
}

output "build_service_account_email" {
  description = "The identity Cloud Build builds the function as (<slug>-build)."
  value       = local.account_emails.build
}

output "alert_notification_channels" {
  description = "Notification channels the alert policies notify; empty: incidents open and nobody is told."
  value       = local.notification_channels
}

output "invoker_service_account_email" {
  description = "The identity in Scheduler's OIDC tokens."
  value       = local.account_emails.invoker
}

output "scheduler_job_names" {
  description = "Cloud Scheduler job names (the X-CloudScheduler-JobName the handler sees), by job id."
  value       = { for id, job in module.scheduler_jobs.jobs : id => job.name }
}

output "firestore_database" {
  description = "Firestore database id that holds the run records."
  value       = local.firestore_database
}

output "firestore_collection" {
  description = "Collection with one record per scheduled run (TTL on expire_at)."
  value       = google_firestore_field.expire_at.collection
}

output "source_bucket" {
  description = "Bucket holding the function's source zips."
  value       = local.source_bucket
}

output "log_metric_names" {
  description = "Log-based metric per handler outcome."
  value       = { for outcome, metric in google_logging_metric.outcome : outcome => metric.name }
}

output "scheduler_attempt_metric_name" {
  description = "The log-based metric counting the Scheduler attempts (every job's and the audit's) that never reached the handler, by its job label."
  value       = google_logging_metric.scheduler_attempt_failed.name
}

output "audit_job_name" {
  description = "The audit's Scheduler job name (X-CloudScheduler-JobName of its runs), or null without var.audit."
  value       = one([for job in values(module.audit_job.jobs) : job.name])
}

output "dashboard_id" {
  description = "The Cloud Monitoring dashboard (projects/P/dashboards/ID): a fixed set of charts (outcomes, missed and stuck runs, failures, attempts that never reached the handler, work duration, audits) with a job filter."
  value       = google_monitoring_dashboard.this.id
}

output "dashboard_json" {
  description = "The dashboard's definition (the Monitoring API's Dashboard type, as JSON)."
  value       = local.dashboard_json
}

# What a proxy target's module (a sibling of this one) takes.

output "labels" {
  description = "The labels of every resource the module makes (var.labels and scheduled-dedup = slug), for a sibling module's resources."
  value       = local.labels
}

output "retention_seconds" {
  description = "How long a run record lives (timing.retention_seconds): a sibling module's documents get the same expire_at."
  value       = var.timing.retention_seconds
}

output "apis_ready" {
  description = "Known once the project's APIs (the module's and var.apis) have propagated: a sibling module's resources depend on it."
  value       = terraform_data.apis.output
}

output "task_queue" {
  description = "The deliveries queue (projects/P/locations/L/queues/Q): scheduled_dedup_tools.runs rerun and backfill --queue queue there."
  value       = google_cloud_tasks_queue.deliveries.id
}
