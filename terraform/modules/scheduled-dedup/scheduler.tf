# One Cloud Scheduler job per entry of var.jobs. Each delivers at least once; the function dedups
# by (X-Scheduler-Project, X-Scheduler-Location, X-CloudScheduler-JobName, X-CloudScheduler-ScheduleTime).

resource "google_cloud_scheduler_job" "this" {
  for_each = var.jobs

  project     = var.project_id
  region      = var.region
  name        = "${var.slug}-${each.key}"
  description = coalesce(each.value.description, "${var.slug}: scheduled run of ${each.key}, deduplicated by the function.")
  paused      = each.value.paused

  # 5-field unix-cron only (checked in variables.tf): Scheduler sends X-CloudScheduler-ScheduleTime,
  # constant across the retries of one scheduled run, for unix-cron schedules alone.
  schedule  = each.value.schedule
  time_zone = each.value.time_zone

  # Aligned with the function: attempt deadline <= function timeout (validated), so Scheduler does not
  # give up on, and retry, a run the function is still allowed to finish.
  attempt_deadline = "${var.timing.attempt_deadline_seconds}s"

  retry_config {
    retry_count          = var.retry.retry_count
    max_retry_duration   = "${var.retry.max_retry_duration_seconds}s"
    min_backoff_duration = "${var.retry.min_backoff_seconds}s"
    max_backoff_duration = "${var.retry.max_backoff_seconds}s"
    max_doublings        = var.retry.max_doublings
  }

  http_target {
    http_method = "POST"
    uri         = google_cloudfunctions2_function.this.service_config[0].uri

    # Scheduler sends no project or location of its own; the same job id in another project or
    # region must not share a dedup key. Headers are data, not authentication (the OIDC token is).
    headers = {
      "X-Scheduler-Project"  = var.project_id
      "X-Scheduler-Location" = var.region
    }

    oidc_token {
      service_account_email = google_service_account.invoker.email
      audience              = google_cloudfunctions2_function.this.service_config[0].uri
    }
  }

  depends_on = [
    time_sleep.apis,
    # No delivery before the invoker may call the function (the grant, then its propagation: iam.tf).
    time_sleep.invoker,
  ]
}
