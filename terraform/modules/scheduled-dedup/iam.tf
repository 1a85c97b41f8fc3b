# Every service account and every grant of the module, in one place. Additive members only
# (*_iam_member), never authoritative bindings or policies: the module must not remove grants
# that something else made on the same project or service.
#
# Who holds what:
#   <slug>-run      the function's runtime identity: roles/datastore.user on the one Firestore database
#                   (a proxy target's module grants it the one role that starts its target)
#   <slug>-invoker  Cloud Scheduler's OIDC identity: roles/run.invoker on the function's Cloud Run service (with
#                   var.project_setup, roles/run.servicesInvoker on the project, the owner's: see the grant below)
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

  depends_on = [terraform_data.apis]
}

resource "google_service_account" "invoker" {
  count = local.makes_accounts ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-invoker"
  display_name = "${var.slug}: Cloud Scheduler invoker"
  description  = "Identity in the OIDC token Cloud Scheduler sends to the function."

  depends_on = [terraform_data.apis]
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

  depends_on = [terraform_data.apis]
}

# The build account's project-level grants (logging.logWriter; storage.objectViewer on the function sources only)
# and the runtime's datastore.user on the one database: ../scheduled-dedup-project makes them (project.tf).

# IAM grants take effect within minutes, not at once (IAM "Access change propagation": usually
# about 2 minutes, sometimes 7 or more): a build started right after its grants fails with a missing
# permission, a delivery right after the runtime's grant with 403. The function waits for this.
resource "time_sleep" "grants" {
  create_duration = "${var.waits.iam_seconds}s"

  triggers = {
    # The build account's and the runtime's project-level grants (module.project's; made elsewhere, long before).
    grants = local.makes_project ? module.project[0].grants_ready : "made by the project owner"
    images = local.images_repository
  }

  depends_on = [module.images]
}

# Scheduler's identity may invoke the function's Cloud Run service and nothing else. Replaced only
# when that service changes (a re-created function gets a new service whose IAM policy starts
# empty): triggering on the whole function would re-create the grant on every deploy, and
# deliveries during the gap would get 403.
# Not with var.project_setup: granting on the service takes run.services.setIamPolicy, which no IAM condition can
# narrow to one service (Cloud Run is not among the services whose resource.name a condition can test: IAM "Resource
# attributes for IAM Conditions"), so a team bake's CI deployer would set the IAM policy of every service of the
# project. The owner's bootstrap grants the invoker roles/run.servicesInvoker on the project instead (invoke services,
# no jobs: IAM "Cloud Run roles and permissions"), once, before the function exists: only who may act as the invoker
# (the deployer, on this bake's accounts alone, and the owners) can aim its tokens at another service.
resource "google_cloud_run_v2_service_iam_member" "invoker" {
  count = local.makes_project ? 1 : 0

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

  # The owner's project-level grant was made long before (var.project_setup): one wait, never again.
  triggers = local.makes_project ? {
    service = google_cloud_run_v2_service_iam_member.invoker[0].name
    member  = google_cloud_run_v2_service_iam_member.invoker[0].member
  } : { grant = "made on the project by its owner" }

  depends_on = [google_cloud_run_v2_service_iam_member.invoker]
}

# Who may queue a delivery (scheduled_dedup_tools.runs rerun / backfill): roles/cloudtasks.enqueuer on the one queue, nothing
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

# The invoker's grant was a single resource before a team bake's owner made it on the project: an applied project
# keeps it (a team bake's: README, "Upgrading a team bake").
moved {
  from = google_cloud_run_v2_service_iam_member.invoker
  to   = google_cloud_run_v2_service_iam_member.invoker[0]
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

# The runtime's database grant was keyed by account (["runtime"]) before the proxy targets' modules made their own;
# it now lives in ../scheduled-dedup-project, where the bake's root moves (a solo bake) or forgets (a team bake) it.
moved {
  from = google_project_iam_member.datastore_user["runtime"]
  to   = google_project_iam_member.datastore_user
}
