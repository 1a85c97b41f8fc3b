output "function_uri" {
  description = "URI Cloud Scheduler posts to (also the OIDC audience)."
  value       = module.scheduled_dedup.function_uri
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

output "log_metric_names" {
  description = "Log-based metric per handler outcome."
  value       = module.scheduled_dedup.log_metric_names
}

output "task_queue" {
  description = "The deliveries queue: `python -m scheduled_dedup_tools.runs rerun|backfill --queue \"$(terraform -chdir=terraform output -raw task_queue)\"`."
  value       = module.scheduled_dedup.task_queue
}
