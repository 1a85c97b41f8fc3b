# scheduled-dedup-cloud-run-job: the proxy target of the core module (../scheduled-dedup). After the
# function claims a run it starts one execution of this job, passing the run id in the container
# overrides; the job's tasks checkpoint per item and write each output put-if-absent keyed by
# (run id, item id). The baked root passes environment_variables and ttl_collections (outputs.tf)
# into the core module.
#
# Who holds what:
#   <slug>-job  the job's identity: roles/datastore.user on the one Firestore database,
#               + roles/run.viewer on this one job (a task asks whether an item's holder has ended)
#   <slug>-run  (the core's runtime account) roles/run.jobsExecutorWithOverrides and roles/run.viewer
#               on this one job

locals {
  # The account's email, whoever made it (var.service_account_email: a team bake's bootstrap root).
  account_email  = var.service_account_email == null ? google_service_account.job[0].email : var.service_account_email
  account_member = var.service_account_email == null ? google_service_account.job[0].member : "serviceAccount:${var.service_account_email}"

  job_name = "${var.slug}-job"
  # The job's full resource name, built here: the job's own attributes cannot feed its environment.
  job_full_name = "projects/${var.project_id}/locations/${var.region}/jobs/${local.job_name}"


  # What cloud_run_job/store.py writes, each document with expire_at (the core module puts the TTL
  # policy on them): checkpoints, artifacts, outputs and dead letters.
  collections = [for suffix in ["runs", "items", "artifacts", "outputs", "dead_letters"] : "${var.firestore.collection}_job_${suffix}"]
}

resource "google_service_account" "job" {
  count = var.service_account_email == null ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-job"
  display_name = "${var.slug}: Cloud Run job"
  description  = "Runs the Cloud Run job the function starts once per claimed run."

  depends_on = [var.apis_ready]
}

resource "google_cloud_run_v2_job" "this" {
  project             = var.project_id
  location            = var.region
  name                = local.job_name
  labels              = var.labels
  deletion_protection = false

  template {
    task_count  = var.job.task_count
    parallelism = var.job.parallelism
    labels      = var.labels

    template {
      service_account = local.account_email
      max_retries     = var.job.max_retries
      timeout         = "${var.job.task_timeout_seconds}s"

      containers {
        image = var.job.image

        resources {
          limits = {
            cpu    = var.job.cpu
            memory = var.job.memory
          }
        }

        dynamic "env" {
          # What cloud_run_job/ reads; the proxy adds DEDUP_RUN_ID and DEDUP_SCHEDULE_TIME per execution.
          for_each = merge(var.job.environment_variables, {
            DEDUP_PROJECT           = var.project_id
            DEDUP_LOCATION          = var.region
            DEDUP_DATABASE          = var.firestore.database
            DEDUP_COLLECTION        = var.firestore.collection
            DEDUP_RETENTION_SECONDS = tostring(var.retention_seconds)
            # The job must know Cloud Run's retry budget to tell a task's last attempt.
            JOB_MAX_RETRIES   = tostring(var.job.max_retries)
            JOB_LEASE_SECONDS = tostring(var.job.item_lease_seconds)
            # Whose executions a task reads when another execution of its run holds an item (cloud_run_job/holders.py).
            PROXY_JOB_NAME = local.job_full_name
          })
          content {
            name  = env.key
            value = env.value
          }
        }
      }
    }
  }

  depends_on = [var.apis_ready]
}

# The job's one project-level grant, roles/datastore.user narrowed by an IAM condition to the one database (Firestore
# has no per-database IAM resource; Firestore "Configure per-database access permissions"), is made with the core's
# project-level grants by ../scheduled-dedup-project (the root passes project_grants to the core, or a team bake's
# bootstrap makes it as the owner): granting on the project takes project-wide rights.
locals {
  project_grants = {
    job = { role = "roles/datastore.user", member = local.account_member, database = true }
  }
}

# What the function's runtime account does with this one job, each by the narrowest predefined role
# that allows it, granted on the job alone:
# - executor: start an execution with the run id in its container overrides (run.jobs.run,
#   run.jobs.runWithOverrides, run.executions.cancel);
# - viewer: follow each execution it started until it ends, and find the one a run started when the
#   start call's answer was lost (the baked executions module: Executions.GetExecution needs
#   run.executions.get, ListExecutions run.executions.list, cloud.google.com/run/docs/reference/rest/v2/
#   projects.locations.jobs.executions/get, which the executor role lacks). On the job, roles/run.viewer
#   reads only that job, its executions and tasks (cloud.google.com/iam/docs/roles-permissions/run:
#   "Cloud Run Viewer ... Lowest-level resources where you can grant this role: ... Cloud Run job").
locals {
  runtime_roles = {
    executor = "roles/run.jobsExecutorWithOverrides"
    viewer   = "roles/run.viewer"
  }
}

resource "google_cloud_run_v2_job_iam_member" "runtime" {
  for_each = local.runtime_roles

  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_job.this.name
  role     = each.value
  member   = "serviceAccount:${var.runtime_service_account_email}"
}

# Two executions of one run id can meet at an item (a re-run after a cancelled one whose task died holding
# it): the task reads the holder's execution (Executions.GetExecution: run.executions.get) to take the item
# over once it has ended rather than fail every attempt for the lease's length (cloud_run_job/holders.py).
# roles/run.viewer on this one job, as the runtime's viewer grant above.
resource "google_cloud_run_v2_job_iam_member" "job_viewer" {
  project  = var.project_id
  location = var.region
  name     = google_cloud_run_v2_job.this.name
  role     = "roles/run.viewer"
  member   = local.account_member
}

# Where the executor grant lived before the viewer grant joined it: an applied project keeps it.
moved {
  from = google_cloud_run_v2_job_iam_member.runtime_executor
  to   = google_cloud_run_v2_job_iam_member.runtime["executor"]
}

# The account was a single resource before it became optional: an applied project keeps it.
moved {
  from = google_service_account.job
  to   = google_service_account.job[0]
}
