# `terraform test` for the scheduled-dedup module with this project's baked values, offline:
# mock providers answer every call, so nothing is created and no credentials are needed. With
# network and credentials the same runs work against the real providers (drop the mock_provider
# blocks), which also shows what mocks cannot: API-side value checks and permissions.
#
# The runs call ./modules/scheduled-dedup directly (not through main.tf) because a test can only
# assert on resources of the module it runs; root.tftest.hcl covers main.tf itself.

mock_provider "google" {}

mock_provider "archive" {
  mock_data "archive_file" {
    defaults = {
      output_md5  = "0123456789abcdef0123456789abcdef"
      output_path = "function-source.zip"
    }
  }
}

mock_provider "time" {}

# This project's ../config.yaml, passed as main.tf passes it (no job or timing is written here).
variables {
  project_id = yamldecode(file("../config.yaml")).project
  region     = yamldecode(file("../config.yaml")).region
  slug       = yamldecode(file("../config.yaml")).slug
  source_dir = ".."
  # Two of the handler's files: what the module does with the list (the bake's own list is main.tf's).
  source_files = ["main.py", "requirements.txt"]

  jobs = yamldecode(file("../config.yaml")).jobs

  timing = {
    attempt_deadline_seconds = yamldecode(file("../config.yaml")).defaults.attempt_deadline_seconds
    retention_seconds        = yamldecode(file("../config.yaml")).retention_seconds
  }

  retry = {
    for key in ["retry_count", "min_backoff_seconds", "max_backoff_seconds", "max_doublings", "max_retry_duration_seconds"] :
    key => yamldecode(file("../config.yaml")).defaults[key]
  }

  firestore = {
    database        = yamldecode(file("../config.yaml")).database
    collection      = yamldecode(file("../config.yaml")).collection
    create_database = {{ 'true' if cookiecutter.create_firestore_database else 'false' }}
  }
}

run "baked_values" {
  command = apply

  module {
    source = "./modules/scheduled-dedup"
  }

  override_resource {
    target = google_cloudfunctions2_function.this
    values = {
      # A nested block's computed attributes are overridden with an object (applied to each block).
      service_config = {
        uri     = "https://{{ cookiecutter.project_slug }}-mock-ew.a.run.app"
        service = "projects/{{ cookiecutter.gcp_project_id }}/locations/{{ cookiecutter.region }}/services/{{ cookiecutter.project_slug }}"
      }
    }
  }

  # --- Side by side: two bakes in one GCP project clash on no name (each carries the slug) ---
  assert {
    condition = alltrue(concat(
      [
        google_cloudfunctions2_function.this.name == var.slug,
        module.project[0].source_bucket == "${var.project_id}-${var.slug}-src",
        google_service_account.runtime[0].account_id == "${var.slug}-run",
        google_service_account.invoker[0].account_id == "${var.slug}-invoker",
        google_service_account.build[0].account_id == "${var.slug}-build",
      ],
      [for job in module.scheduler_jobs.jobs : startswith(job.name, "${var.slug}-")],
      [for metric in google_logging_metric.outcome : startswith(metric.name, "${var.slug}-")],
    ))
    error_message = "Every project-wide resource name must carry the slug, so two bakes apply side by side."
  }

  assert {
    # The TTL policies belong to this bake's own collections (default <slug>-runs): another bake's
    # Terraform never manages them.
    condition     = google_firestore_field.expire_at.collection == var.firestore.collection && length(google_firestore_field.extra_expire_at) == 0
    error_message = "TTL policies must be on this bake's own collections (and only the run records' without ttl_collections)."
  }

  # --- Scheduler: one job per entry, deadline aligned with the function, OIDC, retry_config ---

  assert {
    condition     = toset(keys(module.scheduler_jobs.jobs)) == toset(keys(var.jobs))
    error_message = "There must be exactly one Cloud Scheduler job per entry of var.jobs."
  }

  assert {
    condition = alltrue([
      for id, job in module.scheduler_jobs.jobs :
      job.name == "${var.slug}-${id}" && job.schedule == var.jobs[id].schedule && job.time_zone == var.jobs[id].time_zone && job.region == var.region
    ])
    error_message = "Scheduler jobs must be named <slug>-<job id> and carry the job's schedule, time zone and region."
  }

  assert {
    condition = alltrue([
      for id, job in module.scheduler_jobs.jobs :
      job.attempt_deadline == "${coalesce(var.jobs[id].attempt_deadline_seconds, var.timing.attempt_deadline_seconds)}s"
    ])
    error_message = "Every Scheduler job's attempt_deadline must be its own, else timing's."
  }

  assert {
    condition = google_cloudfunctions2_function.this.service_config[0].timeout_seconds == max(
      var.timing.attempt_deadline_seconds, [for job in module.scheduler_jobs.jobs : tonumber(trimsuffix(job.attempt_deadline, "s"))]...
    )
    error_message = "The function's timeout must be the largest attempt deadline, or Scheduler retries runs that are still going."
  }

  assert {
    condition = alltrue([
      for job in module.scheduler_jobs.jobs :
      length(job.http_target) == 1 && length(job.http_target[0].oidc_token) == 1
    ])
    error_message = "Every Scheduler job must have an http_target with an oidc_token."
  }

  assert {
    condition = alltrue([
      for job in module.scheduler_jobs.jobs :
      job.http_target[0].oidc_token[0].service_account_email == google_service_account.invoker[0].email &&
      job.http_target[0].oidc_token[0].audience == google_cloudfunctions2_function.this.service_config[0].uri &&
      job.http_target[0].uri == google_cloudfunctions2_function.this.service_config[0].uri &&
      job.http_target[0].http_method == "POST"
    ])
    error_message = "Every Scheduler job must POST to the function URI with an OIDC token of the invoker account whose audience is that URI."
  }

  assert {
    condition     = output.function_uri == "https://{{ cookiecutter.project_slug }}-mock-ew.a.run.app"
    error_message = "function_uri must be the URI of the function's Cloud Run service."
  }

  assert {
    condition = alltrue([
      for job in module.scheduler_jobs.jobs :
      job.http_target[0].headers == tomap({ "X-Scheduler-Project" = var.project_id, "X-Scheduler-Location" = var.region })
    ])
    error_message = "Every Scheduler job must send X-Scheduler-Project and X-Scheduler-Location (part of the dedup key), and no other header (X-Schedules-Deployed is the audit's)."
  }

  assert {
    condition = alltrue([
      for id, job in module.scheduler_jobs.jobs :
      job.retry_config[0].retry_count == coalesce(var.jobs[id].retry_count, var.retry.retry_count) &&
      job.retry_config[0].max_retry_duration == "${coalesce(var.jobs[id].max_retry_duration_seconds, var.retry.max_retry_duration_seconds)}s" &&
      job.retry_config[0].min_backoff_duration == "${coalesce(var.jobs[id].min_backoff_seconds, var.retry.min_backoff_seconds)}s" &&
      job.retry_config[0].max_backoff_duration == "${coalesce(var.jobs[id].max_backoff_seconds, var.retry.max_backoff_seconds)}s" &&
      job.retry_config[0].max_doublings == coalesce(var.jobs[id].max_doublings, var.retry.max_doublings)
    ])
    error_message = "Every Scheduler job's retry_config must carry the job's own numbers, else var.retry."
  }

  # --- Firestore: TTL on expire_at, no single-field indexes ---

  assert {
    condition = (
      google_firestore_field.expire_at.field == "expire_at" &&
      google_firestore_field.expire_at.collection == var.firestore.collection &&
      google_firestore_field.expire_at.database == var.firestore.database
    )
    error_message = "The TTL field must be expire_at on the runs collection of the configured database."
  }

  assert {
    condition     = length(google_firestore_field.expire_at.ttl_config) == 1
    error_message = "expire_at must carry a TTL policy (ttl_config), or run records are never deleted."
  }

  assert {
    condition     = length(google_firestore_field.expire_at.index_config) == 1 && length(google_firestore_field.expire_at.index_config[0].indexes) == 0
    error_message = "expire_at's single-field indexes must be turned off (empty index_config)."
  }

  # --- the function ---

  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].ingress_settings == "ALLOW_INTERNAL_ONLY"
    error_message = "The function must accept internal traffic only."
  }

  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].service_account_email == google_service_account.runtime[0].email
    error_message = "The function must run as the dedicated runtime account, never the default compute account."
  }

  assert {
    condition = (
      google_cloudfunctions2_function.this.build_config[0].runtime == "python312" &&
      google_cloudfunctions2_function.this.build_config[0].entry_point == "handle_scheduled_job"
    )
    error_message = "The function must be python312 with entry point handle_scheduled_job."
  }

  assert {
    condition     = length([for name in keys(google_cloudfunctions2_function.this.service_config[0].environment_variables) : name if startswith(name, "DEDUP_")]) == 0
    error_message = "The function reads its settings from config.yaml in its source: no DEDUP_* variable, no second copy."
  }

  assert {
    condition = (
      module.project[0].bucket.uniform_bucket_level_access == true &&
      module.project[0].bucket.public_access_prevention == "enforced" &&
      strcontains(google_storage_bucket_object.source.name, data.archive_file.source.output_md5)
    )
    error_message = "The source bucket must enforce uniform access and public-access prevention; the object name must carry the zip's md5."
  }

  # --- IAM: the exact role set of each service account, nothing public ---

  assert {
    condition = toset(concat(
      [for m in values(module.project[0].iam_members) : m.role if m.member == "serviceAccount:${google_service_account.runtime[0].email}"],
      [for m in [google_cloud_run_v2_service_iam_member.invoker[0]] : m.role if m.member == google_service_account.runtime[0].member],
    )) == toset(["roles/datastore.user"])
    error_message = "The runtime account must hold exactly roles/datastore.user (a proxy target's module adds the one role that starts its target)."
  }

  assert {
    condition = toset(concat(
      [for m in values(module.project[0].iam_members) : m.role if m.member == "serviceAccount:${google_service_account.invoker[0].email}"],
      [for m in [google_cloud_run_v2_service_iam_member.invoker[0]] : m.role if m.member == google_service_account.invoker[0].member],
    )) == toset(["roles/run.invoker"])
    error_message = "The invoker account must hold exactly roles/run.invoker."
  }

  assert {
    condition     = google_cloud_run_v2_service_iam_member.invoker[0].name == google_cloudfunctions2_function.this.service_config[0].service
    error_message = "roles/run.invoker must be granted on the function's own Cloud Run service, not the project."
  }

  assert {
    condition     = length(module.project[0].iam_members["runtime"].condition) == 1 && module.project[0].iam_members["runtime"].condition[0].expression == "resource.name == \"projects/${var.project_id}/databases/${var.firestore.database}\""
    error_message = "roles/datastore.user must be narrowed to the one Firestore database by an IAM condition."
  }

  assert {
    condition = alltrue([
      for member in concat(
        [for m in values(module.project[0].iam_members) : m.member],
        [google_cloud_run_v2_service_iam_member.invoker[0].member],
      ) : !contains(["allUsers", "allAuthenticatedUsers"], member)
    ])
    error_message = "No IAM grant may go to allUsers or allAuthenticatedUsers."
  }

  # The zip is an allow-list of files read as content (function.tf): no directory, so nothing else
  # in the checkout (google-github-actions/auth's gha-creds-*.json) can end up in it.
  assert {
    condition = (
      data.archive_file.source.source_dir == null && data.archive_file.source.source_file == null &&
      toset([for s in data.archive_file.source.source : s.filename]) == toset(var.source_files) &&
      length(data.archive_file.source.source) == length(var.source_files) &&
      alltrue([for s in data.archive_file.source.source : s.content == file("${var.source_dir}/${s.filename}")]) &&
      data.archive_file.source.output_file_mode == "0644"
    )
    error_message = "The function's zip must hold exactly source_files, read from source_dir, and never a directory."
  }

  # --- the build account: the roles Cloud Run functions' "Custom service account for Cloud Build" lists ---

  assert {
    condition = (
      google_service_account.build[0].account_id == "${var.slug}-build" &&
      google_cloudfunctions2_function.this.build_config[0].service_account == google_service_account.build[0].id
    )
    error_message = "The function must build as its own <slug>-build account (a new project's default build account may lack the roles)."
  }

  assert {
    condition = toset([for m in values(module.project[0].iam_members) : m.role if m.member == "serviceAccount:${google_service_account.build[0].email}"]) == toset(["roles/logging.logWriter", "roles/storage.objectViewer"]) && alltrue([
      for member in concat(
        [module.project[0].iam_members["runtime"].member],
        [google_cloud_run_v2_service_iam_member.invoker[0].member],
      ) : !contains([google_service_account.build[0].member, "serviceAccount:${google_service_account.build[0].email}"], member)
    ])
    error_message = "The build account must hold exactly roles/logging.logWriter and roles/storage.objectViewer on the project (artifactregistry.writer on the image repository only)."
  }

  # --- the function's images: the repository ../image-repository defines, made by the module (images.tf) ---

  assert {
    condition = (
      length(module.images) == 1 &&
      module.images[0].repository_id == "${var.slug}-images" &&
      google_cloudfunctions2_function.this.build_config[0].docker_repository == module.images[0].id &&
      module.images[0].writer_members == { build = google_service_account.build[0].member }
    )
    error_message = "Given no images_repository, the module makes <slug>-images (not gcf-artifacts, which has no cleanup policy), the function's images go there and the build account is its one writer."
  }

  # --- the database: created by the bake unless it answered to use an existing one ---

  assert {
    condition = (module.project[0].database != null) == var.firestore.create_database && alltrue([
      for db in module.project[0].database[*] :
      db.name == var.firestore.database && db.type == "FIRESTORE_NATIVE" && db.delete_protection_state == "DELETE_PROTECTION_ENABLED" && db.deletion_policy == "ABANDON"
    ])
    error_message = "create_database = true creates the named Native-mode database, delete-protected and abandoned (not deleted) on destroy."
  }

  # --- observability ---

  assert {
    condition = toset(keys(google_logging_metric.outcome)) == toset(["processed", "duplicate", "in_progress", "retryable_failure", "terminal_failure", "takeover", "store_unavailable", "misconfigured", "skipped_paused", "skipped_late", "skipped_overlap", "internal_error"]) && alltrue([
      for outcome, metric in google_logging_metric.outcome :
      strcontains(metric.filter, "jsonPayload.outcome=\"${outcome}\"") && strcontains(metric.filter, "resource.type=\"cloud_run_revision\"")
    ])
    error_message = "There must be one log-based metric per handler outcome, filtered on the function's logs."
  }

  assert {
    condition = (
      toset(keys(google_monitoring_alert_policy.outcome)) == toset(["terminal_failure", "retryable_failure", "store_unavailable", "misconfigured"]) &&
      alltrue([
        for outcome, policy in google_monitoring_alert_policy.outcome :
        policy.conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/${google_logging_metric.outcome[outcome].name}\" AND resource.type=\"cloud_run_revision\"" &&
        length(policy.notification_channels) == length(var.notification_channels)
      ]) &&
      alltrue([
        for outcome in ["terminal_failure", "store_unavailable", "misconfigured"] :
        google_monitoring_alert_policy.outcome[outcome].conditions[0].condition_threshold[0].threshold_value == 0
      ]) &&
      google_monitoring_alert_policy.outcome["retryable_failure"].conditions[0].condition_threshold[0].threshold_value == 3 &&
      google_logging_metric.outcome["store_unavailable"].name == "${var.slug}-store-unavailable"
    )
    error_message = "Alert on any terminal failure, Firestore outage or misconfiguration, and on retryable failures above the threshold, each from its own log-based metric; no notification channel by default."
  }

  assert {
    condition = (
      strcontains(google_logging_metric.scheduler_attempt_failed.filter, "resource.type=\"cloud_scheduler_job\"") &&
      strcontains(google_logging_metric.scheduler_attempt_failed.filter, "resource.labels.job_id=~\"^${var.slug}(-[a-z0-9][a-z0-9-]*|_audit)$\"") &&
      strcontains(google_logging_metric.scheduler_attempt_failed.filter, "AttemptFinished") &&
      strcontains(google_logging_metric.scheduler_attempt_failed.filter, "httpRequest.status=(401 OR 403 OR 404 OR 429 OR 502 OR 503 OR 504)") &&
      google_logging_metric.scheduler_attempt_failed.label_extractors["job"] == "EXTRACT(resource.labels.job_id)" &&
      google_monitoring_alert_policy.scheduler_attempt_failed[0].conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/${google_logging_metric.scheduler_attempt_failed.name}\" AND resource.type=\"cloud_scheduler_job\"" &&
      google_monitoring_alert_policy.scheduler_attempt_failed[0].conditions[0].condition_threshold[0].aggregations[0].group_by_fields == tolist(["metric.label.job"])
    )
    error_message = "One metric of every Scheduler job's failed attempts (from Scheduler's AttemptFinished log entries), the audit's included, labelled by job, and one alert on it grouped by job."
  }

}

run "alert_email_creates_a_channel" {
  command = apply

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    alert_email = "oncall@example.com"
  }

  assert {
    condition = (
      length(google_monitoring_notification_channel.email) == 1 &&
      google_monitoring_notification_channel.email[0].type == "email" &&
      google_monitoring_notification_channel.email[0].labels["email_address"] == "oncall@example.com" &&
      alltrue([
        for policy in concat(values(google_monitoring_alert_policy.outcome), google_monitoring_alert_policy.scheduler_attempt_failed) :
        contains(policy.notification_channels, google_monitoring_notification_channel.email[0].id)
      ])
    )
    error_message = "alert_email must create an e-mail channel that every alert policy notifies."
  }
}

run "rejects_a_malformed_alert_email" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    alert_email = "oncall at example.com"
  }

  expect_failures = [var.alert_email]
}

# Monitoring refuses an alerting policy whose alignment period is over 90,000 s (25 h).
run "accepts_a_25_hour_alert_window" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    alerting = { window_seconds = 90000 }
  }
}

run "rejects_an_alert_window_over_25_hours" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    alerting = { window_seconds = 90001 }
  }

  expect_failures = [var.alerting]
}

run "rejects_a_uuid_like_database_id" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    firestore = { database = "abcdef01-2345-6789-abcd-ef0123456789" }
  }

  expect_failures = [var.firestore]
}

# functions-framework's own stop stays off (it raises into the request's thread and can wedge gRPC:
# function.tf); CLOUD_RUN_TIMEOUT_SECONDS is then gunicorn's worker timeout, the backstop, at the
# function timeout; the handler stops the work itself at the attempt deadline (stop.py).
# tests/test_timeout.py and tests/test_stop.py serve the handler with these settings.
run "the_handler_stops_the_work_not_functions_framework" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  assert {
    condition = (
      google_cloudfunctions2_function.this.service_config[0].environment_variables["CLOUD_RUN_TIMEOUT_SECONDS"] == tostring(google_cloudfunctions2_function.this.service_config[0].timeout_seconds) &&
      google_cloudfunctions2_function.this.service_config[0].environment_variables["THREADED_TIMEOUT_ENABLED"] == "false" &&
      google_cloudfunctions2_function.this.service_config[0].environment_variables["THREADS"] == "2"
    )
    error_message = "The handler stops the work at each job's attempt deadline (stop.py): functions-framework's threaded timeout must be off (THREADED_TIMEOUT_ENABLED=\"false\"), CLOUD_RUN_TIMEOUT_SECONDS the function timeout (${google_cloudfunctions2_function.this.service_config[0].timeout_seconds} s, gunicorn's backstop): ${google_cloudfunctions2_function.this.service_config[0].environment_variables["CLOUD_RUN_TIMEOUT_SECONDS"]}, and THREADS above 1 (2 for one request at a time)."
  }
}

run "request_threads_follow_the_concurrency" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    function = {
      max_instance_request_concurrency = 8
      # A user's own value cannot switch the threaded timeout on: the module's settings win.
      environment_variables = { THREADS = "1", THREADED_TIMEOUT_ENABLED = "true" }
    }
  }

  assert {
    condition = (
      google_cloudfunctions2_function.this.service_config[0].environment_variables["THREADS"] == "8" &&
      google_cloudfunctions2_function.this.service_config[0].environment_variables["THREADED_TIMEOUT_ENABLED"] == "false"
    )
    error_message = "THREADS must be max_instance_request_concurrency (8 here) and THREADED_TIMEOUT_ENABLED \"false\", whatever function.environment_variables says."
  }
}

# What a proxy target's module hands the core through the root: the name of what the function
# starts, its collections and its APIs (here, those of a made-up target).
run "takes_a_proxy_targets_settings" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    function        = { environment_variables = { THING_NAME = "projects/p/locations/l/things/t" } }
    ttl_collections = ["{{ cookiecutter.firestore_collection }}_thing_a", "{{ cookiecutter.firestore_collection }}_thing_b"]
    apis            = ["pubsub.googleapis.com"]
  }

  assert {
    condition     = google_cloudfunctions2_function.this.service_config[0].environment_variables["THING_NAME"] == "projects/p/locations/l/things/t" && output.function_environment_variables["THING_NAME"] == "projects/p/locations/l/things/t"
    error_message = "function.environment_variables must reach the function (and the output)."
  }

  assert {
    condition = toset(keys(google_firestore_field.extra_expire_at)) == toset(var.ttl_collections) && alltrue([
      for field in google_firestore_field.extra_expire_at :
      field.field == "expire_at" && field.database == google_firestore_field.expire_at.database && length(field.ttl_config) == 1 && length(field.index_config) == 1 && length(field.index_config[0].indexes) == 0
    ])
    error_message = "Every collection of ttl_collections needs the run records' TTL on expire_at, without single-field indexes."
  }

  assert {
    condition     = contains(module.project[0].apis, "pubsub.googleapis.com") && contains(module.project[0].apis, "cloudfunctions.googleapis.com")
    error_message = "apis are enabled beside the module's own."
  }

  assert {
    condition     = toset([for s in data.archive_file.source.source : s.filename]) == toset(["main.py", "requirements.txt"])
    error_message = "A proxy target adds nothing to the function's zip: its code ships as its own resource."
  }
}

run "knows_no_proxy_target" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  assert {
    condition     = length([for name in keys(output.function_environment_variables) : name if startswith(name, "PROXY_")]) == 0
    error_message = "Without a proxy target's settings the function gets no PROXY_* name."
  }

  assert {
    condition     = length(google_logging_metric.execution_failed) == 0 && !contains(keys(google_monitoring_alert_policy.outcome), "execution_failed") && !contains(keys(google_logging_metric.audit), "overdue") && !contains(keys(google_monitoring_alert_policy.audit_finding), "overdue")
    error_message = "A function that starts no executions gets no metric or alert for failed or overdue ones."
  }
}

# A proxy target's function logs one line per ended execution (a proxy bake's executions module, log_end):
# jsonPayload.execution_outcome = succeeded | failed | cancelled | dead_lettered, jsonPayload.job = the followed run's
# job; each audit one line per execution past its job's max_execution_seconds (jsonPayload.audit_state = overdue).
run "counts_and_alerts_on_failed_executions" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    follows_executions = true
    audit = {
      interval_minutes = {{ cookiecutter.audit_interval_minutes }}
    }
  }

  assert {
    condition = (
      google_logging_metric.execution_failed[0].name == "${var.slug}-execution-failed" &&
      google_logging_metric.execution_failed[0].filter == "resource.type=\"cloud_run_revision\" AND resource.labels.service_name=\"${var.slug}\" AND jsonPayload.execution_outcome=(\"failed\" OR \"cancelled\" OR \"dead_lettered\")" &&
      google_logging_metric.execution_failed[0].label_extractors["job"] == "EXTRACT(jsonPayload.job)" &&
      contains([for label in google_logging_metric.execution_failed[0].metric_descriptor[0].labels : label.key], "job")
    )
    error_message = "One metric counts the function's failed, cancelled and dead-lettering execution lines (not succeeded ones), with a job label."
  }

  assert {
    condition = (
      google_monitoring_alert_policy.outcome["execution_failed"].conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/${var.slug}-execution-failed\" AND resource.type=\"cloud_run_revision\"" &&
      google_monitoring_alert_policy.outcome["execution_failed"].conditions[0].condition_threshold[0].threshold_value == 0 &&
      google_monitoring_alert_policy.outcome["execution_failed"].conditions[0].condition_threshold[0].comparison == "COMPARISON_GT" &&
      google_monitoring_alert_policy.outcome["execution_failed"].conditions[0].condition_threshold[0].aggregations[0].group_by_fields == tolist(["metric.label.job"]) &&
      google_monitoring_alert_policy.outcome["execution_failed"].severity == "ERROR" &&
      strcontains(google_monitoring_alert_policy.outcome["execution_failed"].documentation[0].content, "schedules-and-manual-runs.md")
    )
    error_message = "One alert policy, grouped by job, fires on any failed or cancelled execution and says how to re-run it."
  }

  assert {
    condition = (
      google_logging_metric.audit["overdue"].name == "${var.slug}-run-overdue" &&
      strcontains(google_logging_metric.audit["overdue"].filter, "jsonPayload.audit_state=\"overdue\"") &&
      google_monitoring_alert_policy.audit_finding["overdue"].conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/${var.slug}-run-overdue\" AND resource.type=\"cloud_run_revision\"" &&
      google_monitoring_alert_policy.audit_finding["overdue"].conditions[0].condition_threshold[0].aggregations[0].group_by_fields == tolist(["metric.label.job"]) &&
      strcontains(google_monitoring_alert_policy.audit_finding["overdue"].documentation[0].content, "max_execution_seconds")
    )
    error_message = "An execution past its job's max_execution_seconds (the audit's overdue line) has a metric and an alert, per job."
  }
}

run "rejects_an_unknown_overlap_rule" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      often = { schedule = "*/5 * * * *", overlap = "queue" }
    }
  }

  expect_failures = [var.jobs]
}

# --- shapes: the module refuses values out of their ranges at plan (the rules between numbers are rules.py's: tests/test_config.py, `make deploy`) ---

run "rejects_a_jobs_attempt_deadline_above_30_minutes" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      nightly = { schedule = "0 3 * * *", time_zone = "Etc/UTC", attempt_deadline_seconds = 1801 }
    }
  }

  expect_failures = [var.jobs]
}

run "a_jobs_own_deadline_and_retries_reach_its_scheduler_job_and_the_timeout" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      long  = { schedule = "0 2 * * *", time_zone = "Europe/Berlin", attempt_deadline_seconds = 600, retry_count = 3 }
      short = { schedule = "*/15 * * * *" }
    }
    timing = { attempt_deadline_seconds = 300 }
  }

  assert {
    condition = (
      module.scheduler_jobs.jobs["long"].attempt_deadline == "600s" &&
      module.scheduler_jobs.jobs["long"].retry_config[0].retry_count == 3 &&
      module.scheduler_jobs.jobs["short"].attempt_deadline == "300s" &&
      module.scheduler_jobs.jobs["short"].retry_config[0].retry_count == var.retry.retry_count &&
      google_cloudfunctions2_function.this.service_config[0].timeout_seconds == 600
    )
    error_message = "Each Scheduler job gets its own deadline and retries (else timing's and retry's); the function's timeout is the largest deadline."
  }
}

run "rejects_non_cron_schedule" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      nightly = { schedule = "every 24 hours", time_zone = "Etc/UTC" }
    }
  }

  expect_failures = [var.jobs]
}

# Quartz's "last day of the month" is no unix-cron: a letter where only numbers go. (An out-of-range value
# such as "0 24 * * *" is rules.py's and tests/test_config.py's to refuse: Terraform checks the shape.)
run "rejects_a_letter_in_a_numeric_cron_field" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      nightly = { schedule = "0 3 L * *", time_zone = "Etc/UTC" }
    }
  }

  expect_failures = [var.jobs]
}

run "rejects_retry_count_above_five" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    retry = {
      retry_count = 6
    }
  }

  expect_failures = [var.retry]
}

# --- create_database = false: an existing database, and no token in the state ---

run "uses_an_existing_database" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    firestore = { database = "existing-db", create_database = false }
  }

  assert {
    condition     = module.project[0].database == null && google_firestore_field.expire_at.database == "existing-db" && module.project[0].iam_members["runtime"].condition[0].expression == "resource.name == \"projects/${var.project_id}/databases/existing-db\""
    error_message = "With create_database = false the module creates no database and uses the named one."
  }
}

# --- The audit, max_lateness_seconds and the dashboard (issue 12) --------------------------------

run "audit_job_metrics_alert_and_dashboard" {
  command = apply

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      nightly = { schedule = "0 3 * * *", time_zone = "Etc/UTC", max_lateness_seconds = 3600 }
      madrid  = { schedule = "30 2 * * *", time_zone = "Europe/Madrid" }
    }
    audit = {
      interval_minutes = {{ cookiecutter.audit_interval_minutes }}
    }
  }

  override_resource {
    target = google_cloudfunctions2_function.this
    values = {
      service_config = {
        uri = "https://{{ cookiecutter.project_slug }}-mock-ew.a.run.app"
      }
    }
  }

  # When the last apply changed the schedules (history.tf): the audit's deliveries carry the two instants around
  # the change and the digest of the schedules, one line per Scheduler job by name (audit.schedules_digest).
  assert {
    condition     = module.audit_job.jobs["audit"].http_target[0].headers["X-Schedules-Deployed"] == "${time_static.schedules_changing.rfc3339} ${time_static.schedules_changed.rfc3339} ${sha256("${var.slug}-madrid|30 2 * * *|Europe/Madrid|end_of_gap|enabled\n${var.slug}-nightly|0 3 * * *|Etc/UTC|end_of_gap|enabled")}"
    error_message = "The audit's Scheduler job sends when the last apply changed the schedules, and their digest."
  }

  assert {
    condition = (
      module.audit_job.jobs["audit"].name == "${var.slug}_audit" &&
      module.audit_job.jobs["audit"].schedule == "{% if cookiecutter.audit_interval_minutes | int < 60 %}*/{{ cookiecutter.audit_interval_minutes }} * * * *{% else %}0 */{{ (cookiecutter.audit_interval_minutes | int) // 60 }} * * *{% endif %}" &&
      module.audit_job.jobs["audit"].time_zone == "Etc/UTC" &&
      module.audit_job.jobs["audit"].attempt_deadline == "${var.timing.attempt_deadline_seconds}s" &&
      module.audit_job.jobs["audit"].http_target[0].uri == google_cloudfunctions2_function.this.service_config[0].uri &&
      module.audit_job.jobs["audit"].http_target[0].oidc_token[0].service_account_email == google_service_account.invoker[0].email &&
      module.audit_job.jobs["audit"].http_target[0].headers["X-Scheduler-Project"] == var.project_id
    )
    error_message = "The audit is a Scheduler job of the same function, every audit.interval_minutes, with the jobs' OIDC identity, deadline and headers."
  }

  assert {
    condition     = module.audit_job.jobs["audit"].name == "${var.slug}_audit"
    error_message = "The audit's Scheduler job is <slug>_audit, the name config.py's Config.audit_job_name gives the function."
  }

  assert {
    condition = alltrue([
      for state in ["missing", "stuck"] :
      google_logging_metric.audit[state].name == "${var.slug}-run-${state}" &&
      strcontains(google_logging_metric.audit[state].filter, "jsonPayload.audit_state=\"${state}\"") &&
      google_logging_metric.audit[state].label_extractors["job"] == "EXTRACT(jsonPayload.job)"
    ]) && google_logging_metric.outcome["skipped_late"].name == "${var.slug}-skipped-late"
    error_message = "Missing and stuck runs (the audit's lines) and skipped_late deliveries each have a log-based metric, by job."
  }

  assert {
    condition = alltrue([
      for state in ["missing", "stuck"] :
      google_monitoring_alert_policy.audit_finding[state].conditions[0].condition_threshold[0].filter == "metric.type=\"logging.googleapis.com/user/${google_logging_metric.audit[state].name}\" AND resource.type=\"cloud_run_revision\"" &&
      google_monitoring_alert_policy.audit_finding[state].conditions[0].condition_threshold[0].aggregations[0].group_by_fields == tolist(["metric.label.job"])
      ]) && (
      google_monitoring_alert_policy.audit_finding["missing"].display_name == "${var.slug}: scheduled run missed" &&
      strcontains(google_monitoring_alert_policy.audit_finding["missing"].documentation[0].content, "scheduled_dedup_tools.runs backfill")
    )
    error_message = "Any missing or stuck run alerts, per job, with the runbook's backfill in the missing run's documentation."
  }

  assert {
    condition = (
      google_monitoring_alert_policy.audit_silent[0].conditions[0].condition_absent[0].duration == "${2 * {{ cookiecutter.audit_interval_minutes }} * 60}s" &&
      google_monitoring_alert_policy.audit_silent[0].conditions[0].condition_absent[0].filter == "metric.type=\"logging.googleapis.com/user/${google_logging_metric.audit_ran[0].name}\" AND resource.type=\"cloud_run_revision\""
    )
    error_message = "No audit summary for two audit intervals alerts: the audit itself stopped."
  }

  assert {
    condition = (
      google_logging_metric.work_duration.metric_descriptor[0].value_type == "DISTRIBUTION" &&
      google_logging_metric.work_duration.value_extractor == "EXTRACT(jsonPayload.duration_ms)" &&
      length(google_logging_metric.work_duration.bucket_options[0].exponential_buckets) == 1
    )
    error_message = "The work's duration is a distribution metric read from the outcome line's duration_ms."
  }

  assert {
    condition = (
      length(jsondecode(google_monitoring_dashboard.this.dashboard_json).mosaicLayout.tiles) == 6 &&
      alltrue([
        for tile in jsondecode(google_monitoring_dashboard.this.dashboard_json).mosaicLayout.tiles :
        try(tile.xPos, 0) + tile.width <= 48
      ]) &&
      jsondecode(google_monitoring_dashboard.this.dashboard_json).dashboardFilters == [{ labelKey = "job", filterType = "METRIC_LABEL" }]
    )
    error_message = "The dashboard has six charts whatever the jobs, inside its 48 columns, and a filter on the job label."
  }
}

# Issue 18: a paused job is paused in Scheduler and the function knows it; the deliveries queue routes every task
# to the function as the invoker (queue-level routing); the enqueuers, and the runtime only with catch_up, may queue.
run "deliveries_queue_and_paused_jobs" {
  command = apply

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = {
      nightly = { schedule = "0 3 * * *", time_zone = "Etc/UTC", paused = true }
      report  = { schedule = "30 8 * * *", time_zone = "Etc/UTC", max_lateness_seconds = 3600, catch_up = true }
    }
    task_queue = {
      enqueuers = ["user:ana@example.com", "group:oncall@example.com"]
    }
  }

  override_resource {
    target = google_cloudfunctions2_function.this
    values = {
      service_config = {
        uri = "https://{{ cookiecutter.project_slug }}-mock-ew.a.run.app"
      }
    }
  }

  assert {
    condition     = module.scheduler_jobs.jobs["nightly"].paused && !module.scheduler_jobs.jobs["report"].paused
    error_message = "A job paused in the configuration is paused in Scheduler, and only that one."
  }

  assert {
    condition = (
      google_cloud_tasks_queue.deliveries.name == "${var.slug}-deliveries" &&
      google_cloud_tasks_queue.deliveries.http_target[0].uri_override[0].host == "{{ cookiecutter.project_slug }}-mock-ew.a.run.app" &&
      google_cloud_tasks_queue.deliveries.http_target[0].uri_override[0].scheme == "HTTPS" &&
      google_cloud_tasks_queue.deliveries.http_target[0].uri_override[0].uri_override_enforce_mode == "ALWAYS" &&
      google_cloud_tasks_queue.deliveries.http_target[0].oidc_token[0].service_account_email == google_service_account.invoker[0].email &&
      google_cloud_tasks_queue.deliveries.http_target[0].oidc_token[0].audience == google_cloudfunctions2_function.this.service_config[0].uri &&
      google_cloud_tasks_queue.deliveries.retry_config[0].max_attempts == var.retry.retry_count + 1
    )
    error_message = "The deliveries queue sends every task to the function's URI with the invoker's OIDC token, retrying like Scheduler (the function knows its name from config.py's Config.task_queue)."
  }

  assert {
    condition = (
      toset([for grant in google_cloud_tasks_queue_iam_member.enqueuers : grant.member]) == toset(["user:ana@example.com", "group:oncall@example.com"]) &&
      alltrue([for grant in google_cloud_tasks_queue_iam_member.enqueuers : grant.role == "roles/cloudtasks.enqueuer"]) &&
      one(google_cloud_tasks_queue_iam_member.runtime_catch_up[*].member) == google_service_account.runtime[0].member
    )
    error_message = "The enqueuers, and the runtime (a job has catch_up), hold roles/cloudtasks.enqueuer on the queue."
  }
}

run "no_catch_up_grant_without_catch_up" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = { nightly = { schedule = "0 3 * * *" } }
  }

  assert {
    condition     = length(google_cloud_tasks_queue_iam_member.runtime_catch_up) == 0 && length(google_cloud_tasks_queue_iam_member.enqueuers) == 0
    error_message = "Without catch_up the runtime may not queue, and nobody is an enqueuer unless named."
  }
}

run "no_audit_without_var_audit" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  assert {
    condition     = length(module.audit_job.jobs) == 0 && length(google_monitoring_alert_policy.audit_finding) == 0 && length(google_monitoring_alert_policy.audit_silent) == 0 && length(google_logging_metric.audit_ran) == 0
    error_message = "A module used without var.audit deploys no audit job and no audit alerts."
  }
}

run "rejects_audit_interval_not_dividing_an_hour_or_a_day" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    audit = { interval_minutes = 7 }
  }

  expect_failures = [var.audit]
}

run "rejects_max_lateness_below_a_minute" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    jobs = { nightly = { schedule = "0 3 * * *", max_lateness_seconds = 59 } }
  }

  expect_failures = [var.jobs]
}

# The repository and its cleanup policies, as ../image-repository defines them for every bake (the
# module makes it here; a team bake's terraform/bootstrap makes it with the same module).
run "image_repository_keeps_the_newest_images" {
  command = apply

  module {
    source = "./modules/image-repository"
  }

  variables {
    location      = yamldecode(file("../config.yaml")).region
    repository_id = "${yamldecode(file("../config.yaml")).slug}-images"
    writers       = { build = "serviceAccount:builder@example-project.iam.gserviceaccount.com" }
  }

  assert {
    condition = (
      google_artifact_registry_repository.this.format == "DOCKER" &&
      google_artifact_registry_repository.this.location == var.location &&
      google_artifact_registry_repository.this.repository_id == var.repository_id
    )
    error_message = "The images go to a DOCKER repository in the function's region."
  }

  assert {
    condition = (
      google_artifact_registry_repository.this.cleanup_policy_dry_run == false &&
      length(google_artifact_registry_repository.this.cleanup_policies) == 2 &&
      length([
        for policy in google_artifact_registry_repository.this.cleanup_policies : policy
        if policy.action == "DELETE" && length(policy.most_recent_versions) == 0 && one(policy.condition).tag_state == "ANY" && can(regex("^[0-9]+s$", one(policy.condition).older_than))
      ]) == 1 &&
      [
        for policy in google_artifact_registry_repository.this.cleanup_policies : one(policy.most_recent_versions).keep_count
        if policy.action == "KEEP" && length(policy.condition) == 0
      ] == [2]
    )
    error_message = "The repository deletes every image version but the newest 2 of each image (the running one and the one before) (a delete policy on any tag state, its age in seconds as the API answers it, and a keep-most-recent policy), for real (no dry run)."
  }

  assert {
    condition = (
      length(google_artifact_registry_repository_iam_member.writers) == 1 &&
      google_artifact_registry_repository_iam_member.writers["build"].repository == google_artifact_registry_repository.this.name &&
      google_artifact_registry_repository_iam_member.writers["build"].location == google_artifact_registry_repository.this.location &&
      google_artifact_registry_repository_iam_member.writers["build"].role == "roles/artifactregistry.writer" &&
      google_artifact_registry_repository_iam_member.writers["build"].member == var.writers.build
    )
    error_message = "The build account writes images to this repository, granted on this repository only."
  }
}

run "image_repository_refuses_to_keep_no_image" {
  command = plan

  module {
    source = "./modules/image-repository"
  }

  variables {
    location      = yamldecode(file("../config.yaml")).region
    repository_id = "${yamldecode(file("../config.yaml")).slug}-images"
    images_kept   = 0
  }

  expect_failures = [var.images_kept]
}

# A team bake's terraform/bootstrap made the repository: the module makes none and pushes there.
run "uses_a_given_image_repository" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    images_repository = "projects/${var.project_id}/locations/${var.region}/repositories/${var.slug}-images"
  }

  assert {
    condition     = length(module.images) == 0 && google_cloudfunctions2_function.this.build_config[0].docker_repository == var.images_repository
    error_message = "Given images_repository, the module makes no repository (nor a grant on it) and the function's images go to the given one."
  }
}

run "rejects_an_image_repository_of_another_region" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    images_repository = "projects/${var.project_id}/locations/not-${var.region}/repositories/${var.slug}-images"
  }

  expect_failures = [var.images_repository]
}

# Issue 26: given project_setup (a team bake's root: the owner's bootstrap made what needs project-wide rights with
# scheduled-dedup-project), the module makes none of it, writes the source zip to the bucket it is given, and the
# database is the one it names.
run "project_made_by_the_owner" {
  command = plan

  module {
    source = "./modules/scheduled-dedup"
  }

  variables {
    project_setup = { source_bucket = "${var.project_id}-${var.slug}-src" }
  }

  assert {
    condition     = length(module.project) == 0 && google_storage_bucket_object.source.bucket == var.project_setup.source_bucket && google_cloudfunctions2_function.this.build_config[0].source[0].storage_source[0].bucket == var.project_setup.source_bucket && google_firestore_field.expire_at.database == var.firestore.database
    error_message = "Given project_setup, the module makes no APIs, bucket, project-level grant, database or audit configuration, and uses the bucket and database named."
  }
}
