# One Cloud Scheduler job per entry of var.jobs, made by ./scheduler-jobs (the one definition of a Scheduler job,
# which the audit's job uses too: audit.tf). Each delivers at least once; the function dedups by (X-Scheduler-Project,
# X-Scheduler-Location, X-CloudScheduler-JobName, X-CloudScheduler-ScheduleTime).

locals {
  # Where every Scheduler job delivers, the audit's too (audit.tf).
  scheduler_target = {
    project_id    = var.project_id
    region        = var.region
    uri           = google_cloudfunctions2_function.this.service_config[0].uri
    invoker_email = local.account_emails.invoker
  }
}

module "scheduler_jobs" {
  source = "./scheduler-jobs"

  target = local.scheduler_target
  jobs = {
    for id, job in local.jobs : id => merge(job, {
      name        = "${var.slug}-${id}"
      description = coalesce(job.description, "${var.slug}: scheduled run of ${id}, deduplicated by the function.")
    })
  }

  depends_on = [
    terraform_data.apis,
    # No delivery before the invoker may call the function (the grant, then its propagation: iam.tf).
    time_sleep.invoker,
  ]
}

# The jobs were google_cloud_scheduler_job.this here, before ./scheduler-jobs made them: an applied project keeps them.
moved {
  from = google_cloud_scheduler_job.this
  to   = module.scheduler_jobs.google_cloud_scheduler_job.this
}
