# One Cloud Scheduler job per entry of var.jobs, each POSTing with the invoker's OIDC token to the function, which
# dedups by (X-Scheduler-Project, X-Scheduler-Location, X-CloudScheduler-JobName, X-CloudScheduler-ScheduleTime).
# The core module's user jobs and its audit job are both made here (two calls): the audit's must be updated after
# the others (../history.tf), an order Terraform keeps between two resources but never between two instances of one.

resource "google_cloud_scheduler_job" "this" {
  for_each = var.jobs

  project     = var.target.project_id
  region      = var.target.region
  name        = each.value.name
  description = each.value.description
  paused      = each.value.paused

  # 5-field unix-cron only (checked in the core's variables.tf): Scheduler sends X-CloudScheduler-ScheduleTime,
  # constant across the retries of one scheduled run, for unix-cron schedules alone.
  schedule  = each.value.schedule
  time_zone = each.value.time_zone

  # The job's own deadline: its work is stopped then (settings.DedupConfig.stop_after), and the function's
  # timeout is the largest deadline (../main.tf), so Scheduler never gives up on a run the function still finishes.
  attempt_deadline = "${each.value.attempt_deadline_seconds}s"

  retry_config {
    retry_count          = each.value.retry_count
    max_retry_duration   = "${each.value.max_retry_duration_seconds}s"
    min_backoff_duration = "${each.value.min_backoff_seconds}s"
    max_backoff_duration = "${each.value.max_backoff_seconds}s"
    max_doublings        = each.value.max_doublings
  }

  http_target {
    http_method = "POST"
    uri         = var.target.uri

    # Scheduler sends no project or location of its own; the same job id in another project or
    # region must not share a dedup key. Headers are data, not authentication (the OIDC token is).
    headers = merge(each.value.headers, {
      "X-Scheduler-Project"  = var.target.project_id
      "X-Scheduler-Location" = var.target.region
    })

    oidc_token {
      service_account_email = var.target.invoker_email
      audience              = var.target.uri
    }
  }
}
