# The cloud_run_job target: the function starts the Cloud Run job of module "cloud_run_job"
# (scheduled-dedup-cloud-run-job), which takes the core's runtime account, database and API wait, and gives the
# core the job's name and collections.

# What this target hands the core module (main.tf's local.target_* values): the PROXY_* name of what the function
# starts, the collections its code writes (TTL); the function follows each execution it starts (a failed or
# cancelled one is counted and alerts); the suffix of the target's own account.
locals {
  # Each its own local: Terraform orders by local, and the core's apis must not wait on this module's collections.
  target_function           = { environment_variables = module.cloud_run_job.environment_variables }
  target_ttl_collections    = module.cloud_run_job.ttl_collections
  target_apis               = []
  target_follows_executions = true
  target_project_grants     = module.cloud_run_job.project_grants
  target_accounts           = { target = "job" }
}

module "cloud_run_job" {
  source = "{{ cookiecutter.module_sources['scheduled-dedup-cloud-run-job'] }}"

  project_id                    = local.config.project
  region                        = local.config.region
  slug                          = local.config.slug
  labels                        = module.scheduled_dedup.labels
  runtime_service_account_email = module.scheduled_dedup.runtime_service_account_email
  apis_ready                    = module.scheduled_dedup.apis_ready
  retention_seconds             = module.scheduled_dedup.retention_seconds
{%- if cookiecutter.state_bucket %}
  service_account_email         = local.accounts.target
{%- endif %}

  firestore = {
    database   = module.scheduled_dedup.firestore_database
    collection = module.scheduled_dedup.firestore_collection
  }

  job = {
    image = var.job_image
  }
}

# Where these lived while one module held every target: an applied project keeps them.
moved {
  from = module.scheduled_dedup.google_service_account.job[0]
  to   = module.cloud_run_job.google_service_account.job
}

moved {
  from = module.scheduled_dedup.google_cloud_run_v2_job.this[0]
  to   = module.cloud_run_job.google_cloud_run_v2_job.this
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.datastore_user["job"]
  to   = module.cloud_run_job.google_project_iam_member.datastore_user
}

moved {
  from = module.scheduled_dedup.google_cloud_run_v2_job_iam_member.runtime_executor[0]
  to   = module.cloud_run_job.google_cloud_run_v2_job_iam_member.runtime_executor
}

output "cloud_run_job_name" {
  description = "The Cloud Run job started once per claimed run."
  value       = module.cloud_run_job.job_name
}

# No default: a placeholder image would apply cleanly, ignore DEDUP_RUN_ID and let runs be recorded completed.
variable "job_image" {
  description = "Container image of the Cloud Run job, required: build and push ../cloud_run_job/Dockerfile first (e.g. REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG), then pass it with -var or a *.tfvars file."
  type        = string
}

# Its project-level grants are scheduled-dedup-project's (main.tf says why): an applied project keeps them.
{%- if cookiecutter.state_bucket %}
removed {
  from = module.cloud_run_job.google_project_iam_member.datastore_user

  lifecycle {
    destroy = false
  }
}
{%- else %}
moved {
  from = module.cloud_run_job.google_project_iam_member.datastore_user
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.database_grants["job"]
}
{%- endif %}
