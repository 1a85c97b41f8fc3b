# scheduled-dedup: Cloud Scheduler jobs -> one gen2 Cloud Run function that claims each scheduled
# run in Firestore (at-least-once deliveries, exactly-once effects), with least-privilege service
# accounts, a Firestore TTL on run records and log-based metrics per outcome.
#
# Files: project.tf (what needs project-wide rights: ../scheduled-dedup-project), apis.tf (the APIs' readiness),
# firestore.tf (TTL), iam.tf (every service account and grant on one resource), function.tf (zip, function), scheduler.tf (jobs), tasks.tf (the
# deliveries queue: re-runs, backfill, catch-up), audit.tf (the audit job), history.tf (the schedules deployed), monitoring.tf (metrics, alerts), dashboard.tf, outputs.tf.
#
# It knows no proxy target: a sibling module, called only by a bake of its target, makes what
# the function starts, and the baked root passes the sibling's environment variables, collections,
# APIs in here (var.function.environment_variables, var.ttl_collections,
# var.apis); the sibling takes runtime_service_account_email, firestore_*,
# labels and apis_ready from outputs.tf.

locals {
  # Each job's Scheduler numbers: its own, else var.timing's and var.retry's (a lookup, never a formula: the
  # baked rules.py resolves and checks the same numbers from config.yaml before Terraform runs).
  jobs = {
    for id, job in var.jobs : id => merge(job, {
      attempt_deadline_seconds   = coalesce(job.attempt_deadline_seconds, var.timing.attempt_deadline_seconds)
      retry_count                = coalesce(job.retry_count, var.retry.retry_count)
      min_backoff_seconds        = coalesce(job.min_backoff_seconds, var.retry.min_backoff_seconds)
      max_backoff_seconds        = coalesce(job.max_backoff_seconds, var.retry.max_backoff_seconds)
      max_doublings              = coalesce(job.max_doublings, var.retry.max_doublings)
      max_retry_duration_seconds = coalesce(job.max_retry_duration_seconds, var.retry.max_retry_duration_seconds)
    })
  }
  # The function serves every job: its timeout is the largest deadline (each job's work stops at its own).
  function_timeout_seconds = max(var.timing.attempt_deadline_seconds, [for job in values(local.jobs) : job.attempt_deadline_seconds]...)

  # --- unix-cron's shape, for the validation of var.jobs (the grammar is the baked rules.py's) ---
  # Minute, hour and day of month hold digits and * , - /; month and day of week also names (jan-dec,
  # sun-sat). ASCII only, and white space as rules.cron_fields splits on: RE2's \s is [\t\n\f\r ].
  cron_numbers = "[0-9*,/-]+"
  cron_names   = "[0-9A-Za-z*,/-]+"
  cron_shape   = "^\\s*${join("\\s+", [local.cron_numbers, local.cron_numbers, local.cron_numbers, local.cron_names, local.cron_names])}\\s*$"

  # --- names: all derive from the slug, so two baked projects share one GCP project ---
  function_name = var.slug

  labels = merge(var.labels, { "scheduled-dedup" = var.slug })

  # Outcomes the handler logs as jsonPayload.outcome (one structured JSON line per delivery).
  outcomes = ["processed", "duplicate", "in_progress", "retryable_failure", "terminal_failure", "takeover", "store_unavailable", "misconfigured", "skipped_paused", "skipped_late", "skipped_overlap", "internal_error"]
}
