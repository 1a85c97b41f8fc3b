output "function_uri" {
  description = "URI Cloud Scheduler posts to (also the OIDC audience)."
  value       = module.scheduled_dedup.function_uri
}

output "runtime_service_account_email" {
  description = "The function's runtime identity (roles/datastore.user on the one database)."
  value       = module.scheduled_dedup.runtime_service_account_email
}

output "build_service_account_email" {
  description = "The identity Cloud Build builds the function as (roles: logs writer, Artifact Registry writer, object viewer)."
  value       = module.scheduled_dedup.build_service_account_email
}

output "alert_notification_channels" {
  description = "Where alerts go; empty: incidents open in Cloud Monitoring and nobody is notified (set alert_email)."
  value       = module.scheduled_dedup.alert_notification_channels
}

output "invoker_service_account_email" {
  description = "The identity in Scheduler's OIDC tokens (roles/run.invoker on the function only)."
  value       = module.scheduled_dedup.invoker_service_account_email
}

output "scheduler_job_names" {
  description = "Cloud Scheduler job names by job id."
  value       = module.scheduled_dedup.scheduler_job_names
}

output "firestore_database" {
  description = "Firestore database holding the run records."
  value       = module.scheduled_dedup.firestore_database
}

output "firestore_collection" {
  description = "Collection with one record per scheduled run (TTL on expire_at)."
  value       = module.scheduled_dedup.firestore_collection
}

output "log_metric_names" {
  description = "Log-based metric per handler outcome."
  value       = module.scheduled_dedup.log_metric_names
}
{%- if cookiecutter.target == "cloud_run_job" %}

output "cloud_run_job_name" {
  description = "The Cloud Run job started once per claimed run."
  value       = module.cloud_run_job.job_name
}
{%- endif %}
{%- if cookiecutter.target == "workflow" %}

output "workflow_name" {
  description = "The workflow started once per claimed run."
  value       = module.workflow.workflow_name
}
{%- endif %}

output "audit_job_name" {
  description = "The audit's Cloud Scheduler job (docs/operations.md: a scheduled run was missed)."
  value       = module.scheduled_dedup.audit_job_name
}

output "dashboard_id" {
  description = "The Cloud Monitoring dashboard of this project's scheduled runs."
  value       = module.scheduled_dedup.dashboard_id
}

output "task_queue" {
  description = "The deliveries queue: `python tools/runs.py rerun|backfill --queue \"$(terraform -chdir=terraform output -raw task_queue)\"`."
  value       = module.scheduled_dedup.task_queue
}
