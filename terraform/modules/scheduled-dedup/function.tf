# The handler: a gen2 Cloud Run function built from the baked project's own source.

# The function's source, by allow-list: exactly var.source_files, each read from var.source_dir.
# Never the directory: in CI the checkout is source_dir, and google-github-actions/auth writes the
# job's credentials there as gha-creds-<random>.json (its src/main.ts, createCredentialsFile; its
# README: add it to .gitignore and .dockerignore), which a deny-list of excludes would zip and deploy.
#
# Reproducible: `source` blocks go through the archive provider's ArchiveMultiple
# (hashicorp/terraform-provider-archive, internal/provider/zip_archiver.go), which sorts the names and
# writes each entry with zip.Writer.Create: no file mode, no modification time, so the zip (and its
# md5, in the object's name) depends on the names and contents alone, whatever the checkout's modes,
# times or umask. source_dir/source_file instead copy each file's mode from the disk
# (zip.FileInfoHeader), so a laptop's 0664 and CI's 0644 made two zips of the same code.
# output_file_mode pins the mode too, should the archive ever be built from files again.
data "archive_file" "source" {
  type             = "zip"
  output_file_mode = "0644"
  # Under .terraform/: ignored by every Terraform .gitignore and never one of the zipped files.
  output_path = "${path.root}/.terraform/scheduled-dedup/${var.slug}-function-source.zip"

  dynamic "source" {
    for_each = toset(var.source_files)
    content {
      filename = source.value
      content  = file("${var.source_dir}/${source.value}")
    }
  }
}

resource "google_storage_bucket_object" "source" {
  # The md5 in the name makes every code change a new object, which changes the function's
  # build_config and so redeploys it; an unchanged tree plans no change.
  name   = "${var.slug}/function-source-${data.archive_file.source.output_md5}.zip"
  bucket = local.source_bucket
  source = data.archive_file.source.output_path
}

resource "google_cloudfunctions2_function" "this" {
  project     = var.project_id
  location    = var.region
  name        = local.function_name
  description = "${var.slug}: claims each Cloud Scheduler run in Firestore, then runs its work once."
  labels      = local.labels

  build_config {
    runtime     = var.function.runtime
    entry_point = var.function.entry_point
    # Full resource name (projects/P/serviceAccounts/EMAIL), as build_config expects.
    service_account = local.build_account_name
    # projects/P/locations/R/repositories/REPO: the repository with the cleanup policies (images.tf).
    docker_repository = local.images_repository

    source {
      storage_source {
        bucket = local.source_bucket
        object = google_storage_bucket_object.source.name
      }
    }
  }

  service_config {
    timeout_seconds                  = local.function_timeout_seconds
    available_memory                 = var.function.available_memory
    max_instance_count               = var.function.max_instance_count
    min_instance_count               = var.function.min_instance_count
    max_instance_request_concurrency = var.function.max_instance_request_concurrency
    # var.function.available_cpu, else: more than one request at a time needs a whole CPU (below 1 vCPU "Maximum
    # concurrency must be set to 1", https://cloud.google.com/run/docs/configuring/cpu; variables.tf refuses less);
    # at 1, the CPU the memory's tier gives (256M: 0.167 vCPU, https://cloud.google.com/functions/docs/configuring/memory).
    available_cpu                  = var.function.available_cpu != null ? var.function.available_cpu : (var.function.max_instance_request_concurrency > 1 ? "1" : null)
    service_account_email          = local.account_emails.runtime
    all_traffic_on_latest_revision = true

    # Internal only. Cloud Scheduler in the same project (or VPC Service Controls perimeter) counts
    # as internal traffic when it calls the default run.app URL, which is the URI the jobs use:
    # Cloud Run "Restrict network ingress" (cloud.google.com/run/docs/securing/ingress), setting
    # "Internal", which lists Cloud Scheduler among the Google Cloud products allowed; for Cloud Run
    # functions, "Configure network settings" says internal-only functions accept requests from
    # Cloud Scheduler, Cloud Tasks, Eventarc, Workflows and BigQuery in the same project or perimeter.
    # Everything else gets a 404 before IAM is even asked; IAM (roles/run.invoker) still applies.
    ingress_settings = "ALLOW_INTERNAL_ONLY"

    environment_variables = merge(
      # The API adds LOG_EXECUTION_ID=true to gen2 functions (execution ids in logs); declaring it
      # avoids a permanent diff on every plan (same choice as Cloud Foundation Fabric's modules).
      { LOG_EXECUTION_ID = "true" },
      var.function.environment_variables,
      {
        # The work is stopped by the handler itself: it runs in a process of its own that main.py kills
        # at the job's attempt deadline less the release margin (stop.py, config.Config.stop_after),
        # then releases the claim and answers. functions-framework's own stop stays off: with
        # THREADED_TIMEOUT_ENABLED "true" (and THREADS > 1, CLOUD_RUN_TIMEOUT_SECONDS > 0) its gthread
        # worker runs each request under request_timeout.ThreadingTimeout, which raises an exception
        # into the request's thread (PyThreadState_SetAsyncExc) at an arbitrary instruction; inside
        # gRPC client code that leaves the channel's lock held for ever and wedges the instance
        # (functions-framework 3.10.2: functions_framework/_http/gunicorn.py GunicornApplication,
        # functions_framework/request_timeout.py).
        # Off, CLOUD_RUN_TIMEOUT_SECONDS becomes gunicorn's worker `timeout`, kept as the last-resort
        # backstop: the arbiter kills a worker whose main loop has stopped for that long (a whole
        # process, never a thread mid-call). The gthread worker's main loop beats while requests run,
        # so it never ends a request that runs long (the timeout proofs). Set to the function timeout
        # (the largest job deadline): whether the platform sets the variable is not documented
        # (GoogleCloudPlatform/functions-framework-go PR 244 leaves it open).
        CLOUD_RUN_TIMEOUT_SECONDS = tostring(local.function_timeout_seconds)
        THREADED_TIMEOUT_ENABLED  = "false"
        # A thread per request the instance takes at once (functions-framework's default is 4 per CPU
        # it sees), and never just one: with one, gunicorn's sync worker makes the timeout above a
        # per-request kill of the whole worker, with nothing logged or released. WORKERS stays 1.
        THREADS = tostring(max(2, var.function.max_instance_request_concurrency))
        # No DEDUP_* setting: the function reads the jobs, their timing and its database from config.yaml,
        # which its zipped source carries (source_dir), the same file this Terraform's root read.
      },
    )
  }

  depends_on = [
    terraform_data.apis,
    # The build account's grants (and the runtime account's database grant) have propagated:
    # the build runs as <slug>-build the moment this resource is created.
    time_sleep.grants,
    # The instant before a schedule change, for the audit's history (history.tf); the Scheduler jobs follow
    # the function (they call its uri).
    time_static.schedules_changing,
  ]
}
