# Inputs of the Scheduler jobs module, which the core module (..) calls twice: once for var.jobs, once for the audit.

variable "target" {
  description = "Where every job delivers: project_id and region (of the jobs, and the X-Scheduler-Project and X-Scheduler-Location headers every delivery carries), the function's uri (each job POSTs there; its OIDC token's audience) and invoker_email, the account whose OIDC token each delivery carries (the core module's <slug>-invoker, or service_accounts.invoker)."
  type = object({
    project_id    = string
    region        = string
    uri           = string
    invoker_email = string
  })
  nullable = false
}

variable "jobs" {
  description = "The Scheduler jobs, keyed by a key known at plan (a job id, or audit). Every number is resolved by the caller (the core module: a job's own, else timing's and retry's). headers: more headers for the function; they cannot replace X-Scheduler-Project or X-Scheduler-Location."
  type = map(object({
    name                       = string
    description                = string
    schedule                   = string
    time_zone                  = string
    paused                     = optional(bool, false)
    attempt_deadline_seconds   = number
    retry_count                = number
    max_retry_duration_seconds = number
    min_backoff_seconds        = number
    max_backoff_seconds        = number
    max_doublings              = number
    headers                    = optional(map(string), {})
  }))
  nullable = false
}
