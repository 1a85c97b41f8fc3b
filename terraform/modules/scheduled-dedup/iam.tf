# Every service account and every grant of the module, in one place. Additive members only
# (*_iam_member), never authoritative bindings or policies: the module must not remove grants
# that something else made on the same project or service.
#
# Who holds what:
#   <slug>-run      the function's runtime identity: roles/datastore.user on the one Firestore database
#                   (a proxy target's module grants it the one role that starts its target)
#   <slug>-invoker  Cloud Scheduler's OIDC identity: roles/run.invoker on the function's Cloud Run service
#                   and roles/cloudtasks.enqueuer on the deliveries queue when a job has catch_up
#   <slug>-invoker  also the OIDC identity of every task the deliveries queue sends (tasks.tf)
#   var.task_queue.enqueuers  roles/cloudtasks.enqueuer on the deliveries queue: re-runs and backfills
#   <slug>-build    Cloud Build's identity for the function's builds: roles/logging.logWriter and
#                   roles/storage.objectViewer (the function sources only) in the project, roles/artifactregistry.writer on the
#                   image repository only (images.tf; granted by whoever makes the repository)
# Structured logs go to stdout/stderr, which needs no logging role.
# With var.service_accounts the three accounts are made elsewhere (a team bake's bootstrap root,
# variables.tf says why) and the module only uses them.

locals {
  makes_accounts = var.service_accounts == null
  # Each account's email, whoever made it; members and ids derive from it.
  account_emails = local.makes_accounts ? {
    runtime = google_service_account.runtime[0].email
    invoker = google_service_account.invoker[0].email
    build   = google_service_account.build[0].email
  } : var.service_accounts
  account_members = local.makes_accounts ? {
    runtime = google_service_account.runtime[0].member
    invoker = google_service_account.invoker[0].member
    build   = google_service_account.build[0].member
  } : { for name, email in var.service_accounts : name => "serviceAccount:${email}" }
  # The build account's resource name, which build_config takes.
  build_account_name = local.makes_accounts ? google_service_account.build[0].id : "projects/${var.project_id}/serviceAccounts/${var.service_accounts.build}"
}

resource "google_service_account" "runtime" {
  count = local.makes_accounts ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-run"
  display_name = "${var.slug}: scheduled-dedup function runtime"
  description  = "Runs the function that claims each scheduled run in Firestore."

  depends_on = [time_sleep.apis]
}

resource "google_service_account" "invoker" {
  count = local.makes_accounts ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-invoker"
  display_name = "${var.slug}: Cloud Scheduler invoker"
  description  = "Identity in the OIDC token Cloud Scheduler sends to the function."

  depends_on = [time_sleep.apis]
}

# The function's build account. Since July 2024 the default Cloud Build account of a new project
# may lack what a gen2 build needs, and in an organization with the policy
# iam.automaticIamGrantsForDefaultServiceAccounts it has no roles at all ("Could not build the
# function due to a missing permission on the build service account"; Cloud Build "Service account
# change" page; terraform-google-cloud-functions issue 129). So each bake builds as its own account
# with exactly the roles Cloud Run functions' "Custom service account for Cloud Build" page lists.
# Nobody is granted roles/iam.serviceAccountUser on it: only a deployer who already holds
# iam.serviceAccounts.actAs on it (an Owner or Editor of the project, or a grant on this one
# account) can deploy a function that builds as it.
resource "google_service_account" "build" {
  count = local.makes_accounts ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-build"
  display_name = "${var.slug}: function builds"
  description  = "Cloud Build runs the function's builds as this account."

  depends_on = [time_sleep.apis]
}

locals {
  # Cloud Run functions, "Custom service account for Cloud Build" (Grant permissions,
  # cloud.google.com/functions/docs/securing/build-custom-sa): logging.logWriter stores build logs;
  # storage.objectViewer reads the function's source. artifactregistry.writer, which stores the built
  # image, is granted on the image repository only (images.tf), not on the project.
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
  member  = local.account_members.build

  dynamic "condition" {
    for_each = contains(keys(local.build_conditions), each.key) ? [local.build_conditions[each.key]] : []
    content {
      title       = condition.value.title
      description = condition.value.description
      expression  = condition.value.expression
    }
  }
}

# IAM grants take effect within minutes, not at once (IAM "Access change propagation": usually
# about 2 minutes, sometimes 7 or more): a build started right after its grants fails with a missing
# permission, a delivery right after the runtime's grant with 403. The function waits for this.
resource "time_sleep" "grants" {
  create_duration = "${var.waits.iam_seconds}s"

  triggers = {
    build   = join(",", sort([for grant in google_project_iam_member.build : "${grant.role}${jsonencode(grant.condition)}"]))
    images  = local.images_repository
    runtime = google_project_iam_member.datastore_user.member
  }

  depends_on = [google_project_iam_member.build, module.images, google_project_iam_member.datastore_user]
}

# Firestore has no per-database IAM resource: roles are granted on the project. The IAM condition
# narrows the grant to this module's database, as Firestore documents for per-database access
# ("Configure per-database access permissions" in Firestore's "Create and manage databases" page:
# condition resource.name == "projects/PROJECT_ID/databases/DATABASE_ID").
resource "google_project_iam_member" "datastore_user" {
  project = var.project_id
  role    = "roles/datastore.user"
  member  = local.account_members.runtime

  condition {
    title       = "${var.slug}-runtime-firestore-db"
    description = "Only the Firestore database that holds ${var.slug}'s run records."
    expression  = "resource.name == \"${local.firestore_database_name}\""
  }
}

# Scheduler's identity may invoke the function's Cloud Run service and nothing else. Replaced only
# when that service changes (a re-created function gets a new service whose IAM policy starts
# empty): triggering on the whole function would re-create the grant on every deploy, and
# deliveries during the gap would get 403.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  project  = var.project_id
  location = var.region
  name     = google_cloudfunctions2_function.this.service_config[0].service
  role     = "roles/run.invoker"
  member   = local.account_members.invoker

  lifecycle {
    replace_triggered_by = [google_cloudfunctions2_function.this.service_config[0].service]
  }
}

# The Scheduler jobs wait for the invoker's grant to propagate (IAM "Access change propagation":
# usually about 2 minutes, sometimes 7 or more): a job created right after it can fire before Cloud
# Run honours it, and that delivery gets 403, an attempt failure that pages someone. Waits again only
# when the grant is made again (a re-created function's new service).
resource "time_sleep" "invoker" {
  create_duration = "${var.waits.iam_seconds}s"

  triggers = {
    service = google_cloud_run_v2_service_iam_member.invoker.name
    member  = google_cloud_run_v2_service_iam_member.invoker.member
  }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}

# The runtime's grant was one of a for_each over the accounts that use Firestore while this module
# also made the proxy targets' accounts: a bake applied then keeps its grant, instead of a
# destroy-and-create that would leave deliveries without access for a moment.
moved {
  from = google_project_iam_member.datastore_user["runtime"]
  to   = google_project_iam_member.datastore_user
}

# Who may queue a delivery (tools/runs.py rerun / backfill): roles/cloudtasks.enqueuer on the one queue, nothing
# more. The queue's own http_target gives every task its URL and the invoker's OIDC token (tasks.tf), so an
# enqueuer needs no iam.serviceAccounts.actAs on the invoker, and reaches nothing but the function.
resource "google_cloud_tasks_queue_iam_member" "enqueuers" {
  for_each = toset(var.task_queue.enqueuers)

  project  = var.project_id
  location = var.region
  name     = google_cloud_tasks_queue.deliveries.name
  role     = "roles/cloudtasks.enqueuer"
  member   = each.key
}

# The audit queues catch-ups as the function's runtime identity, only where some job asks for it.
resource "google_cloud_tasks_queue_iam_member" "runtime_catch_up" {
  count = anytrue([for job in values(var.jobs) : job.catch_up]) ? 1 : 0

  project  = var.project_id
  location = var.region
  name     = google_cloud_tasks_queue.deliveries.name
  role     = "roles/cloudtasks.enqueuer"
  member   = local.account_members.runtime
}

# The accounts were single resources before they became optional: an applied project keeps them.
moved {
  from = google_service_account.runtime
  to   = google_service_account.runtime[0]
}

moved {
  from = google_service_account.invoker
  to   = google_service_account.invoker[0]
}

moved {
  from = google_service_account.build
  to   = google_service_account.build[0]
}
