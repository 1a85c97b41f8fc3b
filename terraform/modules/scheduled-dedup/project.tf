# What needs project-wide rights to make (the APIs, the source bucket, the project-level grants, the database, Cloud
# Tasks' audit logs) is ../scheduled-dedup-project's, defined there once. Without var.project_setup the module calls
# it here: whoever applies holds those rights (a solo bake's owner, one `make deploy`). With it, a project owner made
# them once (a team bake's terraform/bootstrap calls that module) and this module makes none: the CI deployer then
# needs no storage.admin, resourcemanager.projectIamAdmin or serviceusage.serviceUsageAdmin (IAM "Understanding
# roles": each reaches every bucket, grant or service of the project).

locals {
  makes_project = var.project_setup == null
  # Where the function's source zips go: module.project's bucket, or the one the owner made (the same name).
  source_bucket = local.makes_project ? module.project[0].source_bucket : var.project_setup.source_bucket
}

module "project" {
  source = "../scheduled-dedup-project"
  count  = local.makes_project ? 1 : 0

  project_id        = var.project_id
  region            = var.region
  slug              = var.slug
  labels            = local.labels
  apis              = var.apis
  enable_apis       = var.enable_apis
  apis_wait_seconds = var.waits.apis_seconds
  firestore = {
    database          = var.firestore.database
    create_database   = var.firestore.create_database
    location_id       = var.firestore.location_id
    delete_protection = var.firestore.delete_protection
  }
  service_accounts = {
    runtime = local.account_emails.runtime
    build   = local.account_emails.build
  }
  grants           = var.project_grants
  data_access_logs = var.task_queue.data_access_logs
}
