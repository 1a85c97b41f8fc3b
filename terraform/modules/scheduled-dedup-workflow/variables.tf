# Inputs of the scheduled-dedup-workflow module. The baked root passes the core module's
# (../scheduled-dedup) outputs in: the runtime account, the database, the retention, the labels,
# the API wait.

variable "project_id" {
  description = "Google Cloud project of the core module."
  type        = string
}

variable "region" {
  description = "Region of the workflow (the core module's region)."
  type        = string
}

variable "slug" {
  description = "The core module's slug: the workflow is '<slug>-wf', its service account '<slug>-wf'."
  type        = string
}

variable "labels" {
  description = "Labels of every resource that takes them (the core module's labels output)."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "firestore" {
  description = "Where the run records live (the core module's firestore_database and firestore_collection outputs); the workflow's guards are in '<collection>_workflow' in the same database."
  type = object({
    database   = string
    collection = string
  })
  nullable = false
}

variable "retention_seconds" {
  description = "How long the workflow's guards live (their expire_at): the core module's retention_seconds output."
  type        = number
}

variable "runtime_service_account_email" {
  description = "The function's runtime account (the core module's output): it starts executions of the workflow."
  type        = string
}

variable "service_account_email" {
  description = "The email of the workflow's identity when something else makes it (a team bake's bootstrap root, where the deployer may act as exactly this account; the core module's service_accounts says why). null: the module makes '<slug>-wf'."
  type        = string
  default     = null

  validation {
    # A user-managed account's email: <account id>@<project id>.iam.gserviceaccount.com (rules.PROJECT_ID).
    condition     = var.service_account_email == null || can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$", var.service_account_email))
    error_message = "service_account_email: must be a user-managed service account's email, <id>@<project>.iam.gserviceaccount.com. Given: ${jsonencode(var.service_account_email)}."
  }
}

variable "apis_ready" {
  description = "The core module's apis_ready output: the workflow and its account wait until the project's APIs have propagated."
  type        = string
}

variable "workflow" {
  description = "The workflow the function starts once per claimed run. source_contents (required): the workflow's YAML (the baked workflow/ directory holds a sample that dedups by run id)."
  type = object({
    source_contents = optional(string)
    call_log_level  = optional(string, "LOG_ERRORS_ONLY")
  })
  nullable = false

  validation {
    condition     = var.workflow.source_contents != null
    error_message = "workflow.source_contents: required (the workflow's YAML, e.g. file(\"../workflow/workflow.yaml\"))."
  }
}
