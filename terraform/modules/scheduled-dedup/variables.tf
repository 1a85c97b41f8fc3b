# Inputs of the scheduled-dedup module.
#
# The validation blocks below check SHAPES only (ids, ranges, the cron's five fields), each as the baked
# rules.py does (FIELDS, checked by check_field; check_jobs).
# The rules between numbers (lease, retries, retention, the audit's lookback, each job's schedule) live once,
# in rules.py: the bake, config.py, the project's tests and `make deploy` (before Terraform) run them.

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
  description = "Short name every resource name derives from, so two projects apply side by side in one GCP project. Service-account ids are '<slug>-run', '<slug>-invoker', '<slug>-build' (a proxy target's module adds '<slug>-job' or '<slug>-wf')."
  type        = string

  validation {
    # rules.SLUG: service-account ids are 6-30 chars and we add up to 8, hence 20 at most.
    condition     = can(regex("^[a-z][a-z0-9-]{1,18}[a-z0-9]$", var.slug))
    error_message = "slug: must be 3-20 chars of lowercase letters, digits and hyphens, start with a letter, end with a letter or digit."
  }
}

# The deployer needs iam.serviceAccounts.actAs on each of these. IAM Conditions cannot narrow a
# project-wide roles/iam.serviceAccountUser to some accounts (IAM "Configure resource-based access"
# lists the services whose resource.name a condition can test; IAM is not one of them), and a
# project-wide roles/iam.serviceAccountAdmin lets the deployer grant itself actAs on every account
# of the project. So a team's bootstrap makes these accounts and grants the deployer actAs on each
# (a team bake's bootstrap root), and passes them here.
variable "service_accounts" {
  description = "The emails of the function's runtime, invoker and build accounts when something else makes them (a team bake's bootstrap root: the deployer may act as exactly these). null: the module makes '<slug>-run', '<slug>-invoker' and '<slug>-build'."
  type = object({
    runtime = string
    invoker = string
    build   = string
  })
  default = null

  validation {
    # A user-managed account's email: <account id>@<project id>.iam.gserviceaccount.com (rules.PROJECT_ID).
    condition = var.service_accounts == null || try(alltrue([
      for email in [var.service_accounts.runtime, var.service_accounts.invoker, var.service_accounts.build] :
      can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]@[a-z][a-z0-9-]{4,28}[a-z0-9]\\.iam\\.gserviceaccount\\.com$", email))
    ]), false)
    error_message = "service_accounts: runtime, invoker and build must each be a user-managed service account's email, <id>@<project>.iam.gserviceaccount.com. Given: ${jsonencode(var.service_accounts)}."
  }
}

variable "images_repository" {
  description = "The Docker repository the function's images go to when something else makes it (a team bake's bootstrap root, with ../image-repository: the deployer then needs no Artifact Registry role), as projects/P/locations/REGION/repositories/R; its maker grants the build account roles/artifactregistry.writer on it. null: the module makes '<slug>-images' (images.tf)."
  type        = string
  default     = null

  validation {
    # Cloud Functions API, BuildConfig.docker_repository: "projects/{project}/locations/{location}/repositories/{repository}";
    # "Cross-location repositories are not supported": the function's region.
    condition     = var.images_repository == null || can(regex("^projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/locations/${var.region}/repositories/[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.images_repository))
    error_message = "images_repository=${jsonencode(var.images_repository)}: must be projects/<project>/locations/${var.region}/repositories/<id>, a repository in the function's region."
  }
}

variable "jobs" {
  description = "Cloud Scheduler jobs, keyed by job id. Each becomes the Scheduler job '<slug>-<job id>'. Only 5-field unix-cron schedules: Cloud Scheduler guarantees the X-CloudScheduler-ScheduleTime header (the dedup key) for unix-cron alone. paused: paused in Scheduler, its fire times audited paused. catch_up: the audit queues a missing run on the deliveries queue while within max_lateness_seconds (>= 60), past which a delivery is recorded skipped and never runs the work. overlap (proxy targets: skip or start, null: skip): what a new run does while the job's previous execution still runs. A timing number left null is var.timing's or var.retry's (the baked root passes config.yaml's jobs)."
  type = map(object({
    schedule    = string
    time_zone   = optional(string, "Etc/UTC")
    description = optional(string)
    # Paused in Scheduler; the audit reports its fire times `paused`, never `missing` (audit.py).
    paused = optional(bool, false)
    # The audit delivers a missing run itself through the deliveries queue (tasks.tf) while within max_lateness_seconds.
    catch_up = optional(bool, false)
    # A delivery later than this after its schedule time is recorded skipped (2xx) and never runs the work.
    max_lateness_seconds = optional(number)
    # A wall-clock time daylight saving skips: run once at the end of the gap, or skip it (schedules.py).
    dst_gap = optional(string, "end_of_gap")
    # Proxy targets: what a new run does while the job's previous execution still runs; null: "skip".
    overlap = optional(string)
    # The job's own timing (config.yaml); null: var.timing's and var.retry's (local.jobs looks them up).
    attempt_deadline_seconds   = optional(number)
    retry_count                = optional(number)
    min_backoff_seconds        = optional(number)
    max_backoff_seconds        = optional(number)
    max_doublings              = optional(number)
    max_retry_duration_seconds = optional(number)
  }))
  nullable = false

  validation {
    # rules.JOB_CHOICES["dst_gap"]
    condition     = alltrue([for job in values(var.jobs) : contains(["end_of_gap", "skip"], job.dst_gap)])
    error_message = "jobs: each dst_gap must be end_of_gap or skip. Given: ${jsonencode({ for id, job in var.jobs : id => job.dst_gap })}."
  }

  validation {
    # rules.JOB_CHOICES (the baked config.py refuses any other value in config.yaml).
    condition     = alltrue([for job in values(var.jobs) : job.overlap == null || contains(["skip", "start"], coalesce(job.overlap, "skip"))])
    error_message = "jobs: each overlap must be \"skip\" (a new run is recorded skipped while the job's previous execution still runs) or \"start\" (it starts anyway). Given: ${jsonencode({ for id, job in var.jobs : id => job.overlap })}."
  }

  validation {
    # rules.check_max_lateness: a whole number of seconds, at least 60, or null (no limit).
    condition     = alltrue([for job in values(var.jobs) : try(job.max_lateness_seconds >= 60 && floor(job.max_lateness_seconds) == job.max_lateness_seconds, job.max_lateness_seconds == null)])
    error_message = "jobs: each max_lateness_seconds must be a whole number of seconds, at least 60 (omit it for no limit). Given: ${jsonencode({ for id, job in var.jobs : id => job.max_lateness_seconds })}."
  }

  validation {
    # The same ranges as var.timing's and var.retry's (rules.ATTEMPT_DEADLINE_RANGE, MAX_RETRY_COUNT,
    # MAX_BACKOFF_SECONDS, parse_seconds), on the numbers a job sets for itself.
    condition = alltrue([for job in values(var.jobs) : alltrue([
      job.attempt_deadline_seconds == null || try(job.attempt_deadline_seconds >= 15 && job.attempt_deadline_seconds <= 1800, false),
      alltrue([for v in [job.attempt_deadline_seconds, job.retry_count, job.min_backoff_seconds, job.max_backoff_seconds, job.max_doublings, job.max_retry_duration_seconds] : v == null || try(v >= 0 && floor(v) == v, false)]),
      job.retry_count == null || try(job.retry_count <= 5, false),
      job.max_doublings == null || try(job.max_doublings <= 16, false),
      alltrue([for v in [job.min_backoff_seconds, job.max_backoff_seconds] : v == null || try(v <= 3600, false)]),
      job.min_backoff_seconds == null || job.max_backoff_seconds == null || try(job.max_backoff_seconds >= job.min_backoff_seconds, false),
    ])])
    error_message = "jobs: a job's own attempt_deadline_seconds must be 15-1800, retry_count 0-5, min_backoff_seconds and max_backoff_seconds 0-3600 (max at least min), max_doublings 0-16, max_retry_duration_seconds whole and non-negative."
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
    # The full grammar (each field's bounds and names, ranges not backwards, steps not 0) is the baked rules.py's:
    # `python config.py` and the baked tests/test_config.py check it, with the schedule rules, on config.yaml.
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

variable "task_queue" {
  description = "The deliveries queue (tasks.tf) that carries re-runs, backfills and catch-ups to the function. enqueuers: principals (user:, group:, serviceAccount:, principal:, principalSet:) granted roles/cloudtasks.enqueuer on that one queue: they may re-run and backfill runs from a laptop with scheduled_dedup_tools.runs (docs/operations.md). data_access_logs: turn on Cloud Tasks' DATA_WRITE Data Access audit logs for the project, which record who queued each task; false where the project's audit configuration is made elsewhere (a team bake's bootstrap root, as the project owner)."
  type = object({
    enqueuers        = optional(list(string), [])
    data_access_logs = optional(bool, true)
  })
  default  = {}
  nullable = false

  validation {
    # IAM principal identifiers ("Principal identifiers" in IAM's docs): a type prefix, a colon, an identity.
    condition     = alltrue([for member in var.task_queue.enqueuers : can(regex("^(user|group|serviceAccount|domain|principal|principalSet):[^:\\s]+$", member))])
    error_message = "task_queue.enqueuers: each must be an IAM principal such as user:ana@example.com, group:oncall@example.com or serviceAccount:ops@p.iam.gserviceaccount.com. Given: ${jsonencode(var.task_queue.enqueuers)}."
  }
}

variable "timing" {
  description = "Seconds. attempt_deadline: how long Cloud Scheduler waits for an answer (15-1800), for the audit job and every job that sets none; the function's timeout is the largest deadline. retention: how long a run record lives (Firestore TTL). The rules between the numbers (lease, retries, retention, each job's schedule) are the baked rules.py's, checked by `make deploy` before Terraform runs."
  type = object({
    attempt_deadline_seconds = optional(number, 300)
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
}

variable "retry" {
  description = "Cloud Scheduler retry_config. max_retry_duration_seconds = 0 means only retry_count limits the retries. With retry_count > 0, the waits before the retries must add up to more than the lease (the baked rules.py checks it)."
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
  description = "Where run records live. create_database = true (the default: a new project has no database) creates the database in location_id (default: region); false uses an existing one, which must exist in Firestore Native mode (not read at plan: firestore.tf says why; the first apply fails on a missing one). delete_protection: see firestore.tf."
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
    # rules.DATABASE_ID (Firestore REST projects.databases.create, databaseId:
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
  description = "Directory the function's source files are read from (the baked project root)."
  type        = string
}

variable "source_files" {
  description = "The function's source, by allow-list: every file of the zip, as a path relative to source_dir (the handler's modules, its configuration file, requirements.txt). Nothing else in source_dir is ever zipped (function.tf)."
  type        = list(string)
  nullable    = false

  validation {
    # A path that leaves source_dir (.., absolute) or names a directory cannot be one zip entry.
    condition     = length(var.source_files) > 0 && alltrue([for f in var.source_files : f != "" && !startswith(f, "/") && !endswith(f, "/") && !contains(split("/", f), "..")])
    error_message = "source_files=${jsonencode(var.source_files)}: must list at least one file, each a path relative to source_dir without \"..\", a leading or a trailing \"/\"."
  }
}

variable "function" {
  description = "The Cloud Run function (gen2) that receives Scheduler's deliveries and claims each run. It is built as the module's own <slug>-build account (iam.tf), into the image repository, which keeps the newest images_kept versions of each image (images.tf). available_cpu: vCPUs as Cloud Run writes them (0.08-1, or a whole number up to 8); null gives \"1\" above one request per instance, else the share of the memory's tier; more than one request per instance needs at least \"1\"."
  type = object({
    runtime                          = optional(string, "python312")
    entry_point                      = optional(string, "handle_scheduled_job")
    available_memory                 = optional(string, "256M")
    max_instance_count               = optional(number, 5)
    min_instance_count               = optional(number, 0)
    max_instance_request_concurrency = optional(number, 1)
    environment_variables            = optional(map(string), {})
    # null: ../image-repository's default (2). Only where the module makes the repository.
    images_kept = optional(number)
    # vCPUs per instance, as Cloud Run writes them ("0.5", "1", "2"). null: a whole CPU ("1") above one request at a
    # time, else the share the memory's tier gives (256M: 0.167; function.tf).
    available_cpu = optional(string)
  })
  default  = {}
  nullable = false

  validation {
    # The repository's maker sets how many images stay (images.tf): here, nothing would read it.
    condition     = var.function.images_kept == null || var.images_repository == null
    error_message = "function.images_kept=${coalesce(var.function.images_kept, 0)}: set only when the module makes the image repository (images_repository is given: its maker keeps the images)."
  }

  validation {
    condition     = var.function.max_instance_count >= 1 && var.function.min_instance_count >= 0 && var.function.min_instance_count <= var.function.max_instance_count
    error_message = "function: max_instance_count must be at least 1 and min_instance_count between 0 and max_instance_count."
  }

  validation {
    # A shape check: Cloud Run takes 1 to 1,000 requests at a time per instance
    # (https://cloud.google.com/run/docs/about-concurrency); rules.check_function says the same.
    condition     = var.function.max_instance_request_concurrency >= 1 && var.function.max_instance_request_concurrency <= 1000 && floor(var.function.max_instance_request_concurrency) == var.function.max_instance_request_concurrency
    error_message = "function.max_instance_request_concurrency=${var.function.max_instance_request_concurrency}: must be a whole number from 1 to 1000 (Cloud Run's limit per instance)."
  }

  validation {
    # Cloud Run takes 0.08 to 1 vCPU (steps of 0.001), above 1 a whole number, at most 8
    # (https://cloud.google.com/run/docs/configuring/cpu, "Set and update vCPU limits"); rules.check_function says the same.
    condition     = var.function.available_cpu == null || try(tonumber(var.function.available_cpu) >= 0.08 && tonumber(var.function.available_cpu) <= 8 && (tonumber(var.function.available_cpu) <= 1 || floor(tonumber(var.function.available_cpu)) == tonumber(var.function.available_cpu)), false)
    error_message = "function.available_cpu=${jsonencode(var.function.available_cpu)}: must be a number of vCPUs from 0.08 to 1, or a whole number from 1 to 8 (Cloud Run's limits)."
  }

  validation {
    # Below 1 vCPU Cloud Run's "Maximum concurrency must be set to 1" (https://cloud.google.com/run/docs/configuring/cpu):
    # refused here, at plan, rather than by the API at apply; rules.check_function says the same.
    condition     = var.function.max_instance_request_concurrency <= 1 || var.function.available_cpu == null || try(tonumber(var.function.available_cpu) >= 1, true)
    error_message = "function.available_cpu=${jsonencode(var.function.available_cpu)}: max_instance_request_concurrency ${var.function.max_instance_request_concurrency} needs a whole CPU (\"1\" or more): below 1 vCPU Cloud Run takes one request at a time."
  }

  validation {
    # The handler reads these itself; set them through the other variables.
    condition     = length([for k in keys(var.function.environment_variables) : k if startswith(k, "DEDUP_")]) == 0
    error_message = "function.environment_variables: names starting with DEDUP_ are read by nothing: the function's settings are config.yaml's."
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
    # The shape the bake hook checks the alert_email answer for.
    condition     = var.alert_email == null || var.alert_email == "" || can(regex("^[^@\\s]+@[^@\\s]+\\.[^@\\s]+$", var.alert_email))
    error_message = "alert_email: must be an e-mail address such as oncall@example.com, or empty for none."
  }
}

# metrics_seconds 600: issue 11102 documents the 404 "it could take up to 10 minutes to become available".
variable "waits" {
  description = "Seconds to wait for eventual consistency on a first apply: apis (after enabling project services), iam (after the build and runtime grants, before the function; after the invoker grant, before the Scheduler jobs), metrics (after creating log-based metrics, before the alert policies that read them: up to 10 minutes, terraform-provider-google issue 11102). Each wait runs again only when what it waits for changes."
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
  description = "Log-based alerting. retryable_failure_threshold: alert when more retryable failures than this are logged within window_seconds. Terminal failures, store_unavailable (Firestore unreachable) and misconfigured (an invalid config.yaml, or a job without work) alert on any."
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

}

variable "follows_executions" {
  description = "The function is a proxy target's (a Cloud Run job or a Workflows execution): it starts an execution per run and follows it (a proxy bake's executions module), logging one line per ended execution. true: a log-based metric counts the failed and cancelled executions by job, and an alert fires on any (executions.tf). The baked root sets it for the proxy targets."
  type        = bool
  default     = false
  nullable    = false
}

variable "project_setup" {
  description = "null: the module makes what needs project-wide rights itself, with ../scheduled-dedup-project (project.tf). Given: a project owner made it once with that module (a team bake's terraform/bootstrap): the module makes none of it, and enable_apis, apis, project_grants, firestore.create_database, firestore.location_id, firestore.delete_protection and task_queue.data_access_logs are that call's, not read here. source_bucket: the function's source bucket that module made (<project>-<slug>-src)."
  type = object({
    source_bucket = string
  })
  default = null
}

variable "project_grants" {
  description = "A proxy target module's project-level grants (its project_grants output: key => role, member, database), which ../scheduled-dedup-project makes with the module's own (project.tf)."
  type = map(object({
    role     = string
    member   = string
    database = optional(bool, false)
  }))
  default  = {}
  nullable = false
}
