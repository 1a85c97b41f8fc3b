output "environment_variables" {
  description = "For the core module's function.environment_variables: the job's full resource name, which the proxy (job.py) passes to RunJob."
  value = {
    PROXY_JOB_NAME = "projects/${var.project_id}/locations/${var.region}/jobs/${google_cloud_run_v2_job.this.name}"
  }
}

output "ttl_collections" {
  description = "For the core module's ttl_collections: the collections the job writes (each document with expire_at)."
  value       = local.collections
}

output "job_name" {
  description = "The Cloud Run job the function starts."
  value       = google_cloud_run_v2_job.this.name
}

output "service_account_email" {
  description = "The job's identity."
  value       = local.account_email
}

output "project_grants" {
  description = "For the core module's project_grants: the job account's roles/datastore.user on the one database (../scheduled-dedup-project makes it)."
  value       = local.project_grants
}
