# Run records: one document per scheduled run in var.firestore.collection, deleted by a TTL policy
# on expire_at (the handler sets expire_at = max(claim time, schedule time) + retention_seconds).
# Without the TTL the collection grows forever.

resource "google_firestore_database" "this" {
  count = var.firestore.create_database ? 1 : 0

  project                 = var.project_id
  name                    = var.firestore.database
  location_id             = coalesce(var.firestore.location_id, var.region)
  type                    = "FIRESTORE_NATIVE"
  concurrency_mode        = "PESSIMISTIC" # Firestore's default; the handler's writes are conditional, not transactions
  delete_protection_state = var.firestore.delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = var.firestore.delete_protection ? "ABANDON" : "DELETE"

  depends_on = [google_project_service.this]
}

locals {
  # The database id, taken from the created resource when there is one (an implicit dependency).
  firestore_database = var.firestore.create_database ? google_firestore_database.this[0].name : var.firestore.database
}

resource "google_firestore_field" "expire_at" {
  project    = var.project_id
  database   = local.firestore_database
  collection = var.firestore.collection
  field      = "expire_at"

  # TTL policy: Firestore deletes a document some time (typically within 24 h) after expire_at.
  ttl_config {}

  # No single-field indexes on expire_at: nothing queries it, and indexing a monotonically
  # increasing timestamp is what Firestore warns against (hotspots); it also saves index writes.
  index_config {}

  depends_on = [google_project_service.this]
}

locals {
  # Collections the target's own code writes, each document with expire_at (same retention):
  # cloud_run_job/store.py keeps checkpoints, artifacts, outputs and dead letters; the sample
  # workflow keeps one guard document per run.
  target_collections = {
    function      = []
    cloud_run_job = [for suffix in ["runs", "items", "artifacts", "outputs", "dead_letters"] : "${var.firestore.collection}_job_${suffix}"]
    workflow      = ["${var.firestore.collection}_workflow"]
  }[var.target]
}

resource "google_firestore_field" "target_expire_at" {
  for_each = toset(local.target_collections)

  project    = var.project_id
  database   = local.firestore_database
  collection = each.key
  field      = "expire_at"

  ttl_config {}
  index_config {}

  depends_on = [google_project_service.this]
}
