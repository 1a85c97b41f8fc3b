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
# existing database (below: checked at apply, not at plan).

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

# create_database = false: the database is not read at plan. The google provider (8.x) has no data
# source for a Firestore database, and the check this module made instead (data "http" calling the
# Firestore Admin API with data.google_client_config's access token in an Authorization header)
# stored the deployer's token in the state: the http provider keeps request_headers there, not
# marked sensitive, and in CI the planner reads that state (terraform-provider-google issues 11451
# and 15247 on tokens in state; no ephemeral variant exists yet to replace them: google provider
# issue 24318 and terraform-provider-http issue 508 / PR 576 are open). So a missing database, or one in Datastore mode, is met at apply, by the
# first resource in it (google_firestore_field: 404 "Project or database does not exist"; see
# docs/operations.md, "The first deploy"), and nothing secret is in the state.

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

# var.ttl_collections: collections a sibling module's code writes in the same database (a proxy
# target's checkpoints or guards), each document with expire_at and the same retention.
resource "google_firestore_field" "extra_expire_at" {
  for_each = toset(var.ttl_collections)

  project    = var.project_id
  database   = local.firestore_database
  collection = each.key
  field      = "expire_at"

  ttl_config {}
  index_config {}

  depends_on = [time_sleep.apis]
}

# The name these had while the module chose the collections by target: an applied project keeps them.
moved {
  from = google_firestore_field.target_expire_at
  to   = google_firestore_field.extra_expire_at
}
