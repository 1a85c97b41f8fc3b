variable "project_id" {
  description = "Google Cloud project of the bake."
  type        = string
}

variable "region" {
  description = "The function's region: its source bucket's location, and the database's unless firestore.location_id says otherwise."
  type        = string
}

variable "slug" {
  description = "The bake's slug: every name derives from it (../scheduled-dedup's var.slug)."
  type        = string
}

variable "labels" {
  description = "Labels of the source bucket (../scheduled-dedup passes its own, with scheduled-dedup = slug)."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "apis" {
  description = "More project services to enable besides the module's own: a proxy target module's apis output."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "enable_apis" {
  description = "Enable the APIs (never disabled on destroy). false where a platform team manages project services."
  type        = bool
  default     = true
  nullable    = false
}

variable "apis_wait_seconds" {
  description = "Seconds to wait after enabling the APIs, before creating what calls them (an enabled API takes a while to propagate)."
  type        = number
  default     = 60
  nullable    = false

  validation {
    condition     = var.apis_wait_seconds >= 0 && var.apis_wait_seconds <= 1800 && floor(var.apis_wait_seconds) == var.apis_wait_seconds
    error_message = "apis_wait_seconds=${var.apis_wait_seconds}: must be a whole number of seconds, 0-1800."
  }
}

variable "firestore" {
  description = "The database of the run records (../scheduled-dedup's var.firestore: database, create_database, location_id, delete_protection; firestore.tf there says why)."
  type = object({
    database          = string
    create_database   = optional(bool, true)
    location_id       = optional(string)
    delete_protection = optional(bool, true)
  })
  nullable = false
}

variable "service_accounts" {
  description = "Emails of the function's runtime and build accounts, which get the project-level grants (main.tf)."
  type = object({
    runtime = string
    build   = string
  })
  nullable = false
}

variable "grants" {
  description = "More project-level grants: a proxy target module's project_grants output (key => role, member and, with database = true, a condition on the one Firestore database)."
  type = map(object({
    role     = string
    member   = string
    database = optional(bool, false)
  }))
  default  = {}
  nullable = false
}

variable "data_access_logs" {
  description = "Turn on Cloud Tasks' DATA_WRITE Data Access audit logs for the project (who queued each task: ../scheduled-dedup's tasks.tf)."
  type        = bool
  default     = true
  nullable    = false
}
