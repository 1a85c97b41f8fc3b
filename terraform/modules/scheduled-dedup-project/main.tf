# scheduled-dedup-project: what a bake needs that takes project-wide rights to make, once per bake: the APIs, the
# function's source bucket, the project-level grants (the build account's, the runtime's on the one database, a proxy
# target's), the Firestore database and Cloud Tasks' audit-log configuration. One concern, one module (as Cloud
# Foundation Fabric splits a project's services and IAM from what runs in it):
# - ../scheduled-dedup calls it (project.tf) when it is given no var.project_setup: a solo bake's owner makes
#   everything with one `make deploy`;
# - a team bake's terraform/bootstrap calls it, run once by a project owner, and its root passes
#   ../scheduled-dedup the bucket's name (var.project_setup): the CI deployer then holds no right that reaches the
#   whole project (no storage.admin, resourcemanager.projectIamAdmin, serviceusage.serviceUsageAdmin).

locals {
  # The names ../scheduled-dedup derives the same way (its main.tf): a bake's names all derive from the slug.
  bucket_name             = "${var.project_id}-${var.slug}-src"
  firestore_database_name = "projects/${var.project_id}/databases/${var.firestore.database}"
  build_member            = "serviceAccount:${var.service_accounts.build}"
  runtime_member          = "serviceAccount:${var.service_accounts.runtime}"
}

# Project services, behind var.enable_apis. Never disabled on destroy: another project (or anything else) in the
# same GCP project may still use them.
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
  create_duration = "${var.apis_wait_seconds}s"

  triggers = {
    apis = join(",", sort(keys(google_project_service.this)))
  }

  depends_on = [google_project_service.this]
}

resource "google_storage_bucket" "source" {
  # checkov:skip=CKV_GCP_62: Access logs for a bucket that only holds deploy artifacts would need a second bucket; Cloud Audit Logs already record who wrote or read objects.
  project                     = var.project_id
  name                        = local.bucket_name
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = true # only build inputs live here; `terraform destroy` must not stall on them
  labels                      = var.labels

  versioning {
    enabled = true
  }

  # Each deploy writes a new object (its name carries the zip's md5) and Terraform deletes the one
  # before, which versioning keeps as a noncurrent version for a rollback by hand; this rule removes
  # those a week later. No rule on age: Object Lifecycle Management's `age` matches live objects too
  # (cloud.google.com/storage/docs/lifecycle, "Age"), so an `age = 30` Delete removed the deployed
  # source a month after each deploy, and the next plan wanted it back (a redeploy).
  lifecycle_rule {
    condition {
      days_since_noncurrent_time = 7
      with_state                 = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [time_sleep.apis]
}

locals {
  # Cloud Run functions, "Custom service account for Cloud Build" (Grant permissions,
  # cloud.google.com/functions/docs/securing/build-custom-sa): logging.logWriter stores build logs;
  # storage.objectViewer reads the function's source. artifactregistry.writer, which stores the built
  # image, is granted on the image repository only (../scheduled-dedup's images.tf, or a team bake's bootstrap), not on the project.
  build_roles = toset(["roles/logging.logWriter", "roles/storage.objectViewer"])
  # The source is all the build reads of Cloud Storage: the function's code "is stored in a separate source
  # bucket", gcf-v2-sources-<project number>-<region> (Cloud Run functions "Build process overview",
  # cloud.google.com/functions/docs/building), made by the first deploy, whence the build fetches it
  # (terraform-google-cloud-functions issue 129 names that bucket); the image goes to Artifact Registry. So the
  # grant is the project's, as a bucket made by Google cannot be granted on before it exists, under a condition
  # on those buckets' names (and this bake's own upload bucket, local.bucket_name): not every bucket of the
  # project, which a package run at build time could otherwise read. Cloud Storage names buckets and their
  # objects projects/_/buckets/B[/objects/O] for IAM Conditions (IAM "Resource attributes for IAM Conditions",
  # cloud.google.com/iam/docs/conditions-resource-attributes).
  build_conditions = {
    "roles/storage.objectViewer" = {
      title       = "${var.slug}-function-sources-only"
      description = "The function sources only: Cloud Functions' gcf-v2-sources-* buckets and ${local.bucket_name}."
      expression  = "resource.name.startsWith('projects/_/buckets/gcf-v2-sources-') || resource.name == 'projects/_/buckets/${local.bucket_name}' || resource.name.startsWith('projects/_/buckets/${local.bucket_name}/')"
    }
  }
}

resource "google_project_iam_member" "build" {
  for_each = local.build_roles

  project = var.project_id
  role    = each.key
  member  = local.build_member

  dynamic "condition" {
    for_each = contains(keys(local.build_conditions), each.key) ? [local.build_conditions[each.key]] : []
    content {
      title       = condition.value.title
      description = condition.value.description
      expression  = condition.value.expression
    }
  }
}

# Firestore has no per-database IAM resource: roles are granted on the project. The IAM condition
# narrows the grant to this module's database, as Firestore documents for per-database access
# ("Configure per-database access permissions" in Firestore's "Create and manage databases" page:
# condition resource.name == "projects/PROJECT_ID/databases/DATABASE_ID").
resource "google_project_iam_member" "datastore_user" {
  project = var.project_id
  role    = "roles/datastore.user"
  member  = local.runtime_member

  condition {
    title       = "${var.slug}-runtime-firestore-db"
    description = "Only the Firestore database that holds ${var.slug}'s run records."
    expression  = "resource.name == \"${local.firestore_database_name}\""
  }
}

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

# Who queued a task is on record only in Cloud Tasks' Data Access audit log: CreateTask needs cloudtasks.tasks.create,
# a DATA_WRITE permission, and Data Access logs are off by default (Cloud Tasks "Audit logging",
# cloud.google.com/tasks/docs/audit-logging; "Enable Data Access audit logs",
# cloud.google.com/logging/docs/audit/configure-data-access). The X-Rerun-By header is whatever the caller wrote; the
# entry's protoPayload.authenticationInfo.principalEmail is who called. scheduled_dedup_tools.runs prints the query.
# Project-level, and authoritative for the service (google_project_iam_audit_config): two bakes of one project set the
# same block, so they agree; setting it needs resourcemanager.projects.setIamPolicy, an owner's right, which is why a
# team bake's bootstrap makes it (this module, as the owner).
resource "google_project_iam_audit_config" "cloud_tasks" {
  count = var.data_access_logs ? 1 : 0

  project = var.project_id
  service = "cloudtasks.googleapis.com"

  audit_log_config {
    log_type = "DATA_WRITE"
  }

  # After the APIs, as everything made in the project: a team bake's bootstrap has just created that project.
  depends_on = [time_sleep.apis]
}

# A proxy target's project-level grants (its module's project_grants output: the target's account on the one
# database, a workflow's log writer and execution reader, the runtime's invoker), made here for the same reason: those
# on the database under the same condition as the runtime's, the others as they are.
resource "google_project_iam_member" "database_grants" {
  for_each = { for key, grant in var.grants : key => grant if grant.database }

  project = var.project_id
  role    = each.value.role
  member  = each.value.member

  condition {
    title       = "${var.slug}-${each.key}-firestore-db"
    description = "Only the Firestore database that holds ${var.slug}'s run records."
    expression  = "resource.name == \"${local.firestore_database_name}\""
  }
}

resource "google_project_iam_member" "grants" {
  for_each = { for key, grant in var.grants : key => grant if !grant.database }

  project = var.project_id
  role    = each.value.role
  member  = each.value.member
}
