# The deliveries queue: a Cloud Tasks queue that delivers re-runs, backfills (scheduled_dedup_tools.runs, from a laptop) and the
# audit's catch-ups to the function, as the invoker, with the same headers as a Scheduler delivery.
#
# Why Cloud Tasks: the function's ingress is internal only (function.tf). Cloud Run's "Restrict network ingress"
# (cloud.google.com/run/docs/securing/ingress) and Cloud Run functions' "Configure network settings" count Cloud
# Scheduler, Cloud Tasks, Eventarc and Workflows of the same project (or VPC Service Controls perimeter) as
# internal; a laptop is not. Of those, Cloud Tasks alone takes one HTTP request with headers we choose, on demand,
# from anyone granted roles/cloudtasks.enqueuer on one queue: no VM in the VPC, no one-off Scheduler job, no
# Workflows definition to deploy. docs/schedules-and-manual-runs.md says so for users.
#
# Queue-level routing (Cloud Tasks "Configure queue routing, limits, and retries"): the queue's http_target sets
# the URL and the OIDC token of every task, overriding the task's own, so an enqueuer cannot aim a task elsewhere
# nor needs iam.serviceAccounts.actAs on the invoker (only whoever configures the queue, i.e. the deployer).

locals {
  # Also the baked config.py's Config.task_queue. A deleted queue's name cannot be reused for 7 days.
  task_queue_name = "${var.slug}-deliveries"
  task_queue_id   = "projects/${var.project_id}/locations/${var.region}/queues/${local.task_queue_name}"
  function_host   = trimsuffix(trimprefix(google_cloudfunctions2_function.this.service_config[0].uri, "https://"), "/")
  # Cloud Tasks' RetryConfig grows its waits as Scheduler's does (min_backoff, max_doublings, then linearly, at
  # most max_backoff; cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues#retryconfig).
  task_retry = {
    for key in keys(var.retry) : key => max(var.retry[key], [for job in values(local.jobs) : job[key]]...)
  }
}

resource "google_cloud_tasks_queue" "deliveries" {
  project  = var.project_id
  location = var.region
  name     = local.task_queue_name

  # The function answers a delivery whose run another attempt holds with 409 until that lease ends, as it
  # answers Scheduler. One queue carries every job's tasks, so it retries with the largest of each number over
  # the jobs (local.task_retry): each wait, and their count, is at least that job's own, whose waits the
  # baked rules.py has checked to outlast the job's lease (check_timing), so a long job's task outlasts its lease.
  retry_config {
    max_attempts       = local.task_retry.retry_count + 1
    max_retry_duration = "${local.task_retry.max_retry_duration_seconds}s"
    min_backoff        = "${local.task_retry.min_backoff_seconds}s"
    max_backoff        = "${local.task_retry.max_backoff_seconds}s"
    max_doublings      = local.task_retry.max_doublings
  }

  rate_limits {
    # No more deliveries at once than the function has instances: a backfill of many runs queues, it does not 429.
    max_concurrent_dispatches = var.function.max_instance_count * var.function.max_instance_request_concurrency
  }

  http_target {
    http_method = "POST"

    uri_override {
      scheme                    = "HTTPS"
      host                      = local.function_host
      uri_override_enforce_mode = "ALWAYS"

      path_override {
        path = "/"
      }
    }

    oidc_token {
      service_account_email = local.account_emails.invoker
      audience              = google_cloudfunctions2_function.this.service_config[0].uri
    }
  }

  # Every attempt in Cloud Logging (resource.type="cloud_tasks_queue"): who queued what is in the audit logs.
  stackdriver_logging_config {
    sampling_ratio = 1.0
  }

  depends_on = [
    terraform_data.apis,
    # No delivery before the invoker may call the function.
    google_cloud_run_v2_service_iam_member.invoker,
  ]
}

# Who queued a task is on record in Cloud Tasks' Data Access audit log (DATA_WRITE), which ../scheduled-dedup-project
# turns on for the project (project.tf; var.task_queue.data_access_logs).
