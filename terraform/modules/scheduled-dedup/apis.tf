# Project services the module needs, behind var.enable_apis. Never disabled on destroy: another
# project (or anything else) in the same GCP project may still use them.

locals {
  apis = concat(
    [
      "artifactregistry.googleapis.com", # gen2 functions store their build here
      "cloudbuild.googleapis.com",       # builds the function from source
      "cloudfunctions.googleapis.com",
      # Project IAM grants (google_project_iam_member) go through the Resource Manager API; a new
      # project does not have it enabled (terraform-google-project-factory issue 717).
      "cloudresourcemanager.googleapis.com",
      "cloudscheduler.googleapis.com",
      "cloudtasks.googleapis.com", # the deliveries queue: re-runs, backfills, catch-ups (tasks.tf)
      "firestore.googleapis.com",
      "iam.googleapis.com", # service accounts; the custom build account needs it (Cloud Run functions "Custom service account for Cloud Build")
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "run.googleapis.com", # gen2 functions run as Cloud Run services; also Cloud Run jobs
      "storage.googleapis.com",
    ],
    var.apis,
  )
  # Not needed: eventarc (only event-triggered functions use it; this is an HTTP function) and
  # pubsub (Scheduler's HTTP targets do not go through Pub/Sub).
}

resource "google_project_service" "this" {
  for_each = var.enable_apis ? toset(local.apis) : toset([])

  project            = var.project_id
  service            = each.key
  disable_on_destroy = false
}

# An enabled API answers before it has propagated: resources created right after
# `services.enable` returns can still meet "API not enabled" / 403 for a while. Everything that
# calls one of these APIs depends on this wait, not on google_project_service directly
# (checked on every bake's `terraform graph`, test_graph_ordering).
# Re-created (and so waits again) only when the set of APIs changes.
resource "time_sleep" "apis" {
  create_duration = "${var.waits.apis_seconds}s"

  triggers = {
    apis = join(",", sort(keys(google_project_service.this)))
  }

  depends_on = [google_project_service.this]
}
