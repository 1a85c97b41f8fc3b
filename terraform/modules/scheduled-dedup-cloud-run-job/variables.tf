# Inputs of the scheduled-dedup-cloud-run-job module. The baked root passes the core module's
# (../scheduled-dedup) outputs in: the runtime account, the database, the retention, the labels,
# the API wait.

variable "project_id" {
  description = "Google Cloud project of the core module."
  type        = string
}

variable "region" {
  description = "Region of the job (the core module's region)."
  type        = string
}

variable "slug" {
  description = "The core module's slug: the job is '<slug>-job', its service account '<slug>-job'."
  type        = string
}

variable "labels" {
  description = "Labels of every resource that takes them (the core module's labels output)."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "firestore" {
  description = "Where the run records live (the core module's firestore_database and firestore_collection outputs); the job's own collections are '<collection>_job_<kind>' in the same database."
  type = object({
    database   = string
    collection = string
  })
  nullable = false
}

variable "retention_seconds" {
  description = "How long the job's own documents live (their expire_at): the core module's retention_seconds output."
  type        = number
}

variable "runtime_service_account_email" {
  description = "The function's runtime account (the core module's output): it starts executions of the job."
  type        = string
}

variable "service_account_email" {
  description = "The email of the Cloud Run job's identity when something else makes it (a team bake's bootstrap root, where the deployer may act as exactly this account; the core module's service_accounts says why). null: the module makes '<slug>-job'."
  type        = string
  default     = null

  validation {
    # A user-managed account's email: <account id>@<project id>.iam.gserviceaccount.com (rules.PROJECT_ID).
    condition     = var.service_account_email == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$", var.service_account_email))
    error_message = "service_account_email: must be a user-managed service account's email, <id>@<project>.iam.gserviceaccount.com. Given: ${jsonencode(var.service_account_email)}."
  }
}

variable "apis_ready" {
  description = "The core module's apis_ready output: the job and its account wait until the project's APIs have propagated."
  type        = string
}

variable "job" {
  description = "The Cloud Run job the function starts once per claimed run. image (required): the job's container, built and pushed from the baked cloud_run_job/Dockerfile (Google's sample job image would ignore DEDUP_RUN_ID while runs are recorded completed). task_timeout_seconds: per task, up to 24 h. item_lease_seconds: how long a task holds one item before another attempt may take it over."
  type = object({
    image                 = optional(string)
    max_retries           = optional(number, 3)
    task_timeout_seconds  = optional(number, 3600)
    item_lease_seconds    = optional(number, 600)
    task_count            = optional(number, 1)
    parallelism           = optional(number, 0)
    cpu                   = optional(string, "1")
    memory                = optional(string, "512Mi")
    environment_variables = optional(map(string), {})
  })
  nullable = false

  validation {
    condition     = var.job.image != null
    error_message = "job.image: required (build and push cloud_run_job/Dockerfile, then pass its image)."
  }

  validation {
    condition     = var.job.max_retries >= 0 && var.job.max_retries <= 10 && var.job.task_count >= 1 && var.job.parallelism >= 0
    error_message = "job: max_retries must be 0-10, task_count at least 1, parallelism at least 0."
  }

  validation {
    condition     = var.job.task_timeout_seconds >= 1 && var.job.task_timeout_seconds <= 86400 && var.job.item_lease_seconds >= 1
    error_message = "job: task_timeout_seconds must be 1-86400 and item_lease_seconds at least 1."
  }
}
