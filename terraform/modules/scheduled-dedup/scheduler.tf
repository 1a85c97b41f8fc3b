# One Cloud Scheduler job per entry of var.jobs. Each delivers at least once; the function dedups
# by (X-Scheduler-Project, X-Scheduler-Location, X-CloudScheduler-JobName, X-CloudScheduler-ScheduleTime).

resource "google_cloud_scheduler_job" "this" {
  for_each = local.jobs

  project     = var.project_id
  region      = var.region
  name        = "${var.slug}-${each.key}"
  description = coalesce(each.value.description, "${var.slug}: scheduled run of ${each.key}, deduplicated by the function.")
  paused      = each.value.paused

  # 5-field unix-cron only (checked in variables.tf): Scheduler sends X-CloudScheduler-ScheduleTime,
  # constant across the retries of one scheduled run, for unix-cron schedules alone.
  schedule  = each.value.schedule
  time_zone = each.value.time_zone

  # The job's own deadline: its work is stopped then (settings.DedupConfig.stop_after), and the function's
  # timeout is the largest deadline (main.tf), so Scheduler never gives up on a run the function still finishes.
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
    uri         = google_cloudfunctions2_function.this.service_config[0].uri

    # Scheduler sends no project or location of its own; the same job id in another project or
    # region must not share a dedup key. Headers are data, not authentication (the OIDC token is).
    headers = {
      "X-Scheduler-Project"  = var.project_id
      "X-Scheduler-Location" = var.region
    }

    oidc_token {
      service_account_email = local.account_emails.invoker
      audience              = google_cloudfunctions2_function.this.service_config[0].uri
    }
  }

  depends_on = [
    terraform_data.apis,
    # No delivery before the invoker may call the function (the grant, then its propagation: iam.tf).
    time_sleep.invoker,
  ]
}
