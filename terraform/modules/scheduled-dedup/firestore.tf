# Run records: one document per scheduled run in var.firestore.collection, deleted by a TTL policy
# on expire_at (the handler sets expire_at = max(claim time, schedule time) + retention_seconds).
# Without the TTL the collection grows forever.
#
# The database: a new project has none, and google_firestore_field fails on a project without one
# (404 "Project ... or database ... does not exist"). So by default (create_database = true) the
# module creates its own database, named by the bake from the slug (<slug>-db), which never collides
# with a (default) database other applications of the project already use. Cost: Firestore's free
# tier applies to one database per project, the first one created ("Quotas and limits"; the older
# "Firestore pricing" page says only (default) qualifies), so a named database next to an existing
# one is billed from the first read; TTL deletes are never free. create_database = false uses an
# existing database: the google provider (8.x) has no data source that reads a database, so plan
# cannot see that it is missing; the first apply then fails at google_firestore_field.expire_at with
# the API's 404 naming the database (docs/troubleshooting.md).

resource "google_firestore_database" "this" {
  count = var.firestore.create_database ? 1 : 0

  project          = var.project_id
  name             = var.firestore.database
  location_id      = coalesce(var.firestore.location_id, var.region)
  type             = "FIRESTORE_NATIVE"
  concurrency_mode = "PESSIMISTIC" # Firestore's default; the handler's writes are conditional, not transactions

  # delete_protection (default true): the database refuses deletion, and `terraform destroy` only
  # forgets it (deletion_policy ABANDON, the provider's default): the run records and the id stay,
  # so a later apply of the same bake meets 409 "already exists" until the database is imported or
  # deleted by hand (docs/operations.md). false: destroy deletes the database and its data.
  delete_protection_state = var.firestore.delete_protection ? "DELETE_PROTECTION_ENABLED" : "DELETE_PROTECTION_DISABLED"
  deletion_policy         = var.firestore.delete_protection ? "ABANDON" : "DELETE"

  depends_on = [time_sleep.apis]
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

  depends_on = [time_sleep.apis]
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

  depends_on = [time_sleep.apis]
}
