# target = cloud_run_job: the function is an idempotent proxy. After it claims a run it starts one
# execution of this job, passing the run id in the container overrides; the job's tasks checkpoint
# per item and write each output put-if-absent keyed by (run id, item id).

resource "google_cloud_run_v2_job" "this" {
  count = var.target == "cloud_run_job" ? 1 : 0

  project             = var.project_id
  location            = var.region
  name                = local.job_name
  labels              = local.labels
  deletion_protection = false

  template {
    task_count  = var.cloud_run_job.task_count
    parallelism = var.cloud_run_job.parallelism
    labels      = local.labels

    template {
      service_account = google_service_account.job[0].email
      max_retries     = var.cloud_run_job.max_retries
      timeout         = "${var.cloud_run_job.task_timeout_seconds}s"

      containers {
        image = var.cloud_run_job.image

        resources {
          limits = {
            cpu    = var.cloud_run_job.cpu
            memory = var.cloud_run_job.memory
          }
        }

        dynamic "env" {
          # What the job's code reads; the proxy adds DEDUP_RUN_ID and DEDUP_SCHEDULE_TIME per execution.
          for_each = merge(var.cloud_run_job.environment_variables, {
            DEDUP_PROJECT           = var.project_id
            DEDUP_LOCATION          = var.region
            DEDUP_DATABASE          = var.firestore.database
            DEDUP_COLLECTION        = var.firestore.collection
            DEDUP_RETENTION_SECONDS = tostring(var.timing.retention_seconds)
            # The job must know Cloud Run's retry budget to tell a task's last attempt.
            JOB_MAX_RETRIES   = tostring(var.cloud_run_job.max_retries)
            JOB_LEASE_SECONDS = tostring(var.cloud_run_job.item_lease_seconds)
          })
          content {
            name  = env.key
            value = env.value
          }
        }
      }
    }
  }

  depends_on = [time_sleep.apis]
}
