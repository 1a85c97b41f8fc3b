# Inputs of the scheduled-dedup module.
#
# The validation blocks below enforce the SAME rules as the bake hook, the template's hooks/rules.py
# (check_slug, check_project_id, check_region, check_jobs, check_timing, check_database,
# check_collection; of check_schedule, the cron's shape): a value the hook refuses, Terraform refuses too,
# so a baked project whose terraform/main.tf is edited later cannot drift into a broken timing.
# Change a rule in one place and change it in the other; the template's tests/test_terraform.py checks both.

variable "project_id" {
  description = "Google Cloud project to deploy into."
  type        = string

  validation {
    # rules.PROJECT_ID
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.project_id))
    error_message = "project_id: a GCP project id is 6-30 chars of lowercase letters, digits and hyphens, starts with a letter and does not end with a hyphen."
  }
}

variable "region" {
  description = "Region of the function, the Scheduler jobs, the source bucket and (when created) the Firestore database."
  type        = string

  validation {
    # rules.REGION
    condition     = can(regex("^[a-z]+-[a-z]+[0-9]{1,2}$", var.region))
    error_message = "region: must be a GCP region such as europe-west1 or us-central1."
  }
}

variable "slug" {
  description = "Short name every resource name derives from, so two projects baked from the template apply side by side in one GCP project. Service-account ids are '<slug>-run', '<slug>-invoker', '<slug>-build' (a proxy target's module adds '<slug>-job' or '<slug>-wf')."
  type        = string

  validation {
    # rules.SLUG: service-account ids are 6-30 chars and we add up to 8, hence 20 at most.
    condition     = can(regex("^[a-z][a-z0-9-]{1,18}[a-z0-9]$", var.slug))
    error_message = "slug: must be 3-20 chars of lowercase letters, digits and hyphens, start with a letter, end with a letter or digit."
  }
}

variable "jobs" {
  description = "Cloud Scheduler jobs, keyed by job id. Each becomes the Scheduler job '<slug>-<job id>'. Only 5-field unix-cron schedules: Cloud Scheduler guarantees the X-CloudScheduler-ScheduleTime header (the dedup key) for unix-cron alone."
  type = map(object({
    schedule    = string
    time_zone   = optional(string, "Etc/UTC")
    description = optional(string)
    paused      = optional(bool, false)
    # A delivery later than this after its schedule time is recorded skipped (2xx) and never runs the work.
    max_lateness_seconds = optional(number)
  }))
  nullable = false

  validation {
    # rules.check_max_lateness: a whole number of seconds, at least 60, or null (no limit).
    condition     = alltrue([for job in values(var.jobs) : try(job.max_lateness_seconds >= 60 && floor(job.max_lateness_seconds) == job.max_lateness_seconds, job.max_lateness_seconds == null)])
    error_message = "jobs: each max_lateness_seconds must be a whole number of seconds, at least 60 (omit it for no limit). Given: ${jsonencode({ for id, job in var.jobs : id => job.max_lateness_seconds })}."
  }

  validation {
    # rules.check_jobs
    condition     = length(var.jobs) > 0
    error_message = "jobs: must name at least one job, e.g. { nightly = { schedule = \"0 3 * * *\", time_zone = \"Etc/UTC\" } }."
  }

  validation {
    # rules.JOB_ID
    condition     = alltrue([for id in keys(var.jobs) : can(regex("^[a-z0-9][a-z0-9-]{0,39}$", id))])
    error_message = "jobs: each job id must be 1-40 chars of lowercase letters, digits and hyphens, starting with a letter or digit."
  }

  validation {
    # rules.check_schedule at a glance: five fields, each of the characters its field may hold (local.cron_shape).
    # The full grammar (each field's bounds and names, ranges not backwards, steps not 0) is the hook's, and
    # the baked tests/test_schedule_rules.py checks it, with the schedule rules, on the jobs in terraform/main.tf.
    condition     = alltrue([for job in values(var.jobs) : can(regex(local.cron_shape, job.schedule))])
    error_message = "jobs: each schedule must be 5-field unix-cron such as '0 3 * * *': minute, hour and day of month of digits and * , - /, month and day of week also of letters (jan-dec, sun-sat). Groc forms such as 'every 5 minutes' are refused because Cloud Scheduler only guarantees the X-CloudScheduler-ScheduleTime header for unix-cron. Given: ${jsonencode({ for id, job in var.jobs : id => job.schedule })}."
  }

  validation {
    # rules.check_time_zone checks against the IANA zone list; Terraform has none, so it checks the
    # shape here and Cloud Scheduler refuses an unknown zone at apply.
    condition     = alltrue([for job in values(var.jobs) : can(regex("^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$", job.time_zone))])
    error_message = "jobs: each time_zone must be an IANA time zone such as Etc/UTC or Europe/Madrid."
  }
}

variable "timing" {
  description = "Seconds. attempt_deadline: how long Cloud Scheduler waits for an answer (15-1800). function_timeout: >= attempt_deadline, <= 3600. lease: how long a claimed run stays locked, >= function_timeout + 30. retention: how long a run record lives (Firestore TTL), >= lease + the retry window."
  type = object({
    attempt_deadline_seconds = optional(number, 300)
    function_timeout_seconds = optional(number, 300)
    lease_seconds            = optional(number, 360)
    retention_seconds        = optional(number, 604800)
  })
  default  = {}
  nullable = false

  validation {
    # rules.parse_seconds: whole numbers.
    condition     = alltrue([for v in values(var.timing) : floor(v) == v])
    error_message = "timing: every value is a whole number of seconds."
  }

  validation {
    # rules.ATTEMPT_DEADLINE_RANGE: Cloud Scheduler HTTP targets accept 15 s to 30 min.
    condition     = var.timing.attempt_deadline_seconds >= 15 && var.timing.attempt_deadline_seconds <= 1800
    error_message = "timing.attempt_deadline_seconds=${var.timing.attempt_deadline_seconds}: must be 15-1800."
  }

  validation {
    # rules.MAX_FUNCTION_TIMEOUT_SECONDS and rules.check_timing (timeout >= deadline).
    condition     = var.timing.function_timeout_seconds >= var.timing.attempt_deadline_seconds && var.timing.function_timeout_seconds <= 3600
    error_message = "timing.function_timeout_seconds=${var.timing.function_timeout_seconds}: must be at least attempt_deadline_seconds (${var.timing.attempt_deadline_seconds}) and at most 3600, or Scheduler gives up on runs the function still finishes."
  }

  validation {
    # rules.LEASE_MARGIN_SECONDS (local.lease_margin_seconds here).
    condition     = var.timing.lease_seconds >= var.timing.function_timeout_seconds + local.lease_margin_seconds
    error_message = "timing.lease_seconds=${var.timing.lease_seconds}: must be at least function_timeout_seconds + ${local.lease_margin_seconds} (${var.timing.function_timeout_seconds + local.lease_margin_seconds}), or a retry takes over a run that is still going."
  }

  validation {
    # rules.check_timing: retention >= lease + rules.retry_window_seconds (local.retry_window_seconds here).
    # The formula is local.retry_window_seconds, spelled out (a validation cannot use a local
    # computed from its own variable).
    condition = var.timing.retention_seconds >= var.timing.lease_seconds + max(
      (var.retry.retry_count + 1) * var.timing.attempt_deadline_seconds + var.retry.retry_count * var.retry.max_backoff_seconds,
      var.retry.max_retry_duration_seconds > 0 ? var.retry.max_retry_duration_seconds + var.retry.max_backoff_seconds + var.timing.attempt_deadline_seconds : 0,
    )
    error_message = "timing.retention_seconds=${var.timing.retention_seconds}: must be at least lease_seconds + the retry window (${var.timing.lease_seconds} + ${max((var.retry.retry_count + 1) * var.timing.attempt_deadline_seconds + var.retry.retry_count * var.retry.max_backoff_seconds, var.retry.max_retry_duration_seconds > 0 ? var.retry.max_retry_duration_seconds + var.retry.max_backoff_seconds + var.timing.attempt_deadline_seconds : 0)}), or a late retry finds no record and runs again."
  }

  validation {
    # Also in the template's hooks/rules.py (check_timing, with retry_intervals_seconds): with retries, Cloud
    # Scheduler's waits before them must add up to more than the lease, or a run whose instance
    # crashed right after its claim meets 409 until Scheduler gives up, and never runs. The waits
    # start at min_backoff, double max_doublings times, then grow linearly by
    # min_backoff * 2^max_doublings, capped at max_backoff (10, 20, 40, 80, 160, 240, 300 for
    # 10 / 300 / 3). retry_count = 0 is exempt: no retry can recover a crash, an operator re-runs it.
    # Spelled out twice: a validation cannot use a local computed from its own variable. It sits
    # here, not under var.retry, because var.timing's validations read var.retry already (a
    # validation of var.retry reading var.timing would make a cycle); it names retry.retry_count,
    # the value to raise first.
    condition     = var.retry.retry_count <= 0 || sum(concat([0], [for i in range(var.retry.retry_count) : min(var.retry.max_backoff_seconds, i <= var.retry.max_doublings ? var.retry.min_backoff_seconds * pow(2, i) : var.retry.min_backoff_seconds * pow(2, var.retry.max_doublings) * (i - var.retry.max_doublings + 1))])) > var.timing.lease_seconds
    error_message = "retry.retry_count=${var.retry.retry_count}: the retries (${join("+", [for i in range(var.retry.retry_count) : min(var.retry.max_backoff_seconds, i <= var.retry.max_doublings ? var.retry.min_backoff_seconds * pow(2, i) : var.retry.min_backoff_seconds * pow(2, var.retry.max_doublings) * (i - var.retry.max_doublings + 1))])} = ${sum(concat([0], [for i in range(var.retry.retry_count) : min(var.retry.max_backoff_seconds, i <= var.retry.max_doublings ? var.retry.min_backoff_seconds * pow(2, i) : var.retry.min_backoff_seconds * pow(2, var.retry.max_doublings) * (i - var.retry.max_doublings + 1))]))} s) end before the lease (${var.timing.lease_seconds} s) expires, so a run whose instance crashed is never retried; raise retry_count or min_backoff_seconds, or shorten lease_seconds."
  }
}

variable "retry" {
  description = "Cloud Scheduler retry_config. max_retry_duration_seconds = 0 means only retry_count limits the retries. With retry_count > 0, the waits before the retries must add up to more than timing.lease_seconds."
  type = object({
    retry_count                = optional(number, 5)
    min_backoff_seconds        = optional(number, 30)
    max_backoff_seconds        = optional(number, 300)
    max_doublings              = optional(number, 3)
    max_retry_duration_seconds = optional(number, 0)
  })
  default  = {}
  nullable = false

  validation {
    # rules.parse_seconds: whole numbers, none negative.
    condition     = alltrue([for v in values(var.retry) : floor(v) == v && v >= 0])
    error_message = "retry: every value is a whole, non-negative number."
  }

  validation {
    # rules.MAX_RETRY_COUNT
    condition     = var.retry.retry_count <= 5
    error_message = "retry.retry_count=${var.retry.retry_count}: must be 0-5."
  }

  validation {
    # rules.MAX_BACKOFF_SECONDS and max_backoff >= min_backoff.
    condition     = var.retry.min_backoff_seconds <= 3600 && var.retry.max_backoff_seconds <= 3600 && var.retry.max_backoff_seconds >= var.retry.min_backoff_seconds
    error_message = "retry: min_backoff_seconds and max_backoff_seconds must be 0-3600, and max_backoff_seconds (${var.retry.max_backoff_seconds}) at least min_backoff_seconds (${var.retry.min_backoff_seconds})."
  }

  validation {
    # rules.check_timing: max_doublings 0-16.
    condition     = var.retry.max_doublings <= 16
    error_message = "retry.max_doublings=${var.retry.max_doublings}: must be 0-16."
  }
}

variable "firestore" {
  description = "Where run records live. create_database = true (the default: a new project has no database) creates the database in location_id (default: region); false uses an existing one, which plan reads and refuses unless it exists in Firestore Native mode (firestore.tf, data.http.existing_database). delete_protection: see firestore.tf."
  type = object({
    database          = optional(string, "(default)")
    collection        = optional(string, "scheduler_runs")
    create_database   = optional(bool, true)
    location_id       = optional(string)
    delete_protection = optional(bool, true)
  })
  default  = {}
  nullable = false

  validation {
    # rules.DATABASE_ID and rules.UUID_LIKE (Firestore REST projects.databases.create, databaseId:
    # 4-63 chars of [a-z0-9-], first a letter, last a letter or digit, not UUID-like; or (default)).
    condition     = can(regex("^(\\(default\\)|[a-z][a-z0-9-]{2,61}[a-z0-9])$", var.firestore.database)) && !can(regex("^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", var.firestore.database))
    error_message = "firestore.database: must be (default) or 4-63 chars of lowercase letters, digits and hyphens, starting with a letter, and not UUID-like."
  }

  validation {
    # rules.COLLECTION_ID (Firestore reserves ids of the form __name__).
    condition     = can(regex("^[A-Za-z0-9_-]{1,100}$", var.firestore.collection)) && !can(regex("^__.*__$", var.firestore.collection))
    error_message = "firestore.collection: must be 1-100 chars of letters, digits, '_' or '-', and not __like_this__ (reserved by Firestore)."
  }
}

variable "source_dir" {
  description = "Directory zipped as the function's source (the baked project root). terraform/, tests/, virtualenvs, caches and build output are left out."
  type        = string
}

variable "source_excludes" {
  description = "More paths or glob patterns (relative to source_dir) to leave out of the function's zip (a proxy target's module gives its code's)."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "function" {
  description = "The Cloud Run function (gen2) that receives Scheduler's deliveries and claims each run. It is built as the module's own <slug>-build account (iam.tf)."
  type = object({
    runtime                          = optional(string, "python312")
    entry_point                      = optional(string, "handle_scheduled_job")
    available_memory                 = optional(string, "256M")
    max_instance_count               = optional(number, 5)
    min_instance_count               = optional(number, 0)
    max_instance_request_concurrency = optional(number, 1)
    environment_variables            = optional(map(string), {})
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.function.max_instance_count >= 1 && var.function.min_instance_count >= 0 && var.function.min_instance_count <= var.function.max_instance_count
    error_message = "function: max_instance_count must be at least 1 and min_instance_count between 0 and max_instance_count."
  }

  validation {
    # The handler reads these itself; set them through the other variables.
    condition     = length([for k in keys(var.function.environment_variables) : k if startswith(k, "DEDUP_")]) == 0
    error_message = "function.environment_variables: names starting with DEDUP_ are set by the module."
  }
}

variable "apis" {
  description = "More project services to enable (behind enable_apis, before the apis wait) besides the module's own: a proxy target module's apis output."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "ttl_collections" {
  description = "More collections of the Firestore database whose documents carry expire_at (a proxy target module's ttl_collections output): each gets the same TTL policy as the run records."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "enable_apis" {
  description = "Enable the APIs the module needs (never disabled on destroy). Set false where a platform team manages project services."
  type        = bool
  default     = true
  nullable    = false
}

variable "notification_channels" {
  description = "Monitoring notification channel ids (projects/P/notificationChannels/N) the alert policies notify, besides the e-mail channel of alert_email. With neither, the policies open incidents and notify nobody (the check alerts_reach_someone says so at every plan)."
  type        = list(string)
  default     = []
  nullable    = false
}

variable "alert_email" {
  description = "E-mail address the alert policies notify (the module creates the e-mail notification channel). null or \"\": none."
  type        = string
  default     = null

  validation {
    # rules.EMAIL (the bake hook's check of the alert_email answer).
    condition     = var.alert_email == null || var.alert_email == "" || can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", var.alert_email))
    error_message = "alert_email: must be an e-mail address such as oncall@example.com, or empty for none."
  }
}

# metrics_seconds 600: issue 11102 documents the 404 "it could take up to 10 minutes to become available".
variable "waits" {
  description = "Seconds to wait for eventual consistency on a first apply: apis (after enabling project services), iam (after the build and runtime grants, before the function), metrics (after creating log-based metrics, before the alert policies that read them: up to 10 minutes, terraform-provider-google issue 11102). Each wait runs again only when what it waits for changes."
  type = object({
    apis_seconds    = optional(number, 60)
    iam_seconds     = optional(number, 120)
    metrics_seconds = optional(number, 600)
  })
  default  = {}
  nullable = false

  validation {
    condition     = alltrue([for v in values(var.waits) : floor(v) == v && v >= 0 && v <= 1800])
    error_message = "waits: every value is a whole number of seconds, 0-1800."
  }
}

variable "alerting" {
  description = "Log-based alerting. retryable_failure_threshold: alert when more retryable failures than this are logged within window_seconds. Terminal failures, store_unavailable (Firestore unreachable) and misconfigured (an invalid DEDUP_* setting) alert on any."
  type = object({
    enabled                     = optional(bool, true)
    retryable_failure_threshold = optional(number, 3)
    window_seconds              = optional(number, 3600)
    auto_close_seconds          = optional(number, 86400)
  })
  default  = {}
  nullable = false

  validation {
    condition     = var.alerting.retryable_failure_threshold >= 0 && var.alerting.window_seconds >= 60 && var.alerting.auto_close_seconds >= 1800
    error_message = "alerting: retryable_failure_threshold must be at least 0, window_seconds at least 60, auto_close_seconds at least 1800."
  }

  validation {
    # Monitoring API, Aggregation.alignment_period: "The maximum value of the alignment_period is
    # 104 weeks (2 years) for charts, and 90,000 seconds (25 hours) for alerting policies." The
    # window is the alert's alignment period; a longer one is refused at apply.
    condition     = var.alerting.window_seconds <= 90000 && floor(var.alerting.window_seconds) == var.alerting.window_seconds
    error_message = "alerting.window_seconds=${var.alerting.window_seconds}: must be whole seconds, at most 90000 (25 h, Monitoring's limit for an alerting policy's alignment period)."
  }
}

variable "labels" {
  description = "Labels added to every resource that takes them."
  type        = map(string)
  default     = {}
  nullable    = false
}

variable "audit" {
  description = "The audit (the baked audit.py): a Scheduler job of the same function that checks every job's expected runs against the run records every interval_minutes and logs each missing or stuck run. null: no audit job (the baked root always sets it). interval_minutes divides an hour or a day (5-720); with lease + the retry window it must fit in the audit's lookback, min(1 day, retention)."
  type = object({
    interval_minutes = optional(number, 60)
  })
  default = null

  validation {
    # rules.AUDIT_INTERVALS_MINUTES
    condition     = var.audit == null || try(contains([5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720], var.audit.interval_minutes), false)
    error_message = "audit.interval_minutes: must be one of 5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720."
  }

  validation {
    # rules.check_audit_interval: interval + lease + retry window <= min(1 day, retention) (the baked
    # audit.py's AUDIT_LOOKBACK), or a run could go missing between two audits. The retry window is
    # local.retry_window_seconds, spelled out (a validation cannot use a local computed from the variables).
    condition = var.audit == null || try(var.audit.interval_minutes * 60 + var.timing.lease_seconds + max(
      (var.retry.retry_count + 1) * var.timing.attempt_deadline_seconds + var.retry.retry_count * var.retry.max_backoff_seconds,
      var.retry.max_retry_duration_seconds > 0 ? var.retry.max_retry_duration_seconds + var.retry.max_backoff_seconds + var.timing.attempt_deadline_seconds : 0,
    ) <= min(86400, var.timing.retention_seconds), false)
    error_message = "audit.interval_minutes: the interval + lease + retry window must fit in the audit's lookback (min(1 day, retention_seconds)), or a run could go missing between two audits."
  }
}
