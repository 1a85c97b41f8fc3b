# Project services the module needs, behind var.enable_apis. Never disabled on destroy: another
# project baked from the template (or anything else) in the same GCP project may still use them.

locals {
  apis = concat(
    [
      "artifactregistry.googleapis.com", # gen2 functions store their build here
      "cloudbuild.googleapis.com",       # builds the function from source
      "cloudfunctions.googleapis.com",
      "cloudscheduler.googleapis.com",
      "firestore.googleapis.com",
      "iam.googleapis.com",
      "logging.googleapis.com",
      "monitoring.googleapis.com",
      "run.googleapis.com", # gen2 functions run as Cloud Run services; also Cloud Run jobs
      "storage.googleapis.com",
    ],
    var.target == "workflow" ? ["workflows.googleapis.com"] : [],
  )
}

resource "google_project_service" "this" {
  for_each = var.enable_apis ? toset(local.apis) : toset([])

  project            = var.project_id
  service            = each.key
  disable_on_destroy = false
}
