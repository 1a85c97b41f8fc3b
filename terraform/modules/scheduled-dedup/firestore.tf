# Run records: one document per scheduled run in var.firestore.collection, deleted by a TTL policy
# on expire_at (the handler sets expire_at = max(claim time, schedule time) + retention_seconds).
# Without the TTL the collection grows forever.
#
# The database (create_database = true: the module's own, named by the bake from the slug) is made with what needs
# project-wide rights, by ../scheduled-dedup-project (project.tf), whose main.tf says why and what it costs.

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
  # The database id, from module.project when it makes the database (an implicit dependency).
  firestore_database = local.makes_project ? module.project[0].firestore_database : var.firestore.database
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

  depends_on = [terraform_data.apis]
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

  depends_on = [terraform_data.apis]
}

# The name these had while the module chose the collections by target: an applied project keeps them.
moved {
  from = google_firestore_field.target_expire_at
  to   = google_firestore_field.extra_expire_at
}
