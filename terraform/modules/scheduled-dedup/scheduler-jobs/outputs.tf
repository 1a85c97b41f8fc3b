output "jobs" {
  description = "The Scheduler jobs, by the keys of var.jobs: the whole resources (name, schedule, http_target, ...)."
  value       = google_cloud_scheduler_job.this
}
