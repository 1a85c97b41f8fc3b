# scheduled-dedup-workflow: the proxy target of the core module (../scheduled-dedup). After the
# function claims a run it starts one execution of this workflow with the run id in the argument;
# the workflow guards its side effect with a Firestore create-by-id keyed by the run id. The baked
# root passes environment_variables, ttl_collections and apis (outputs.tf) into the core module.
#
# Who holds what:
#   <slug>-wf   the workflow's identity: roles/datastore.user on the one Firestore database,
#               + roles/logging.logWriter in the project (sys.log)
#               + roles/workflows.viewer in the project (the guard reads its owner's execution)
#   <slug>-run  (the core's runtime account) roles/workflows.invoker in the project (see below)

locals {
  # The account's email, whoever made it (var.service_account_email: a team bake's bootstrap root).
  account_email  = var.service_account_email == null ? google_service_account.workflow[0].email : var.service_account_email
  account_member = var.service_account_email == null ? google_service_account.workflow[0].member : "serviceAccount:${var.service_account_email}"

  workflow_name = "${var.slug}-wf"

}

resource "google_service_account" "workflow" {
  count = var.service_account_email == null ? 1 : 0

  project      = var.project_id
  account_id   = "${var.slug}-wf"
  display_name = "${var.slug}: workflow"
  description  = "Runs the workflow the function starts once per claimed run."

  depends_on = [var.apis_ready]
}

resource "google_workflows_workflow" "this" {
  project             = var.project_id
  region              = var.region
  name                = local.workflow_name
  description         = "${var.slug}: started once per claimed scheduled run."
  service_account     = var.service_account_email == null ? google_service_account.workflow[0].id : "projects/${var.project_id}/serviceAccounts/${var.service_account_email}"
  call_log_level      = var.workflow.call_log_level
  source_contents     = var.workflow.source_contents
  labels              = var.labels
  deletion_protection = false

  user_env_vars = {
    DEDUP_PROJECT    = var.project_id
    DEDUP_DATABASE   = var.firestore.database
    DEDUP_COLLECTION = var.firestore.collection
    # The guards' expire_at: the TTL policy on <collection>_workflow deletes them after the retention.
    DEDUP_RETENTION_SECONDS = tostring(var.retention_seconds)
  }

  depends_on = [var.apis_ready]
}

# The workflow's project-level grants, each the narrowest that allows what it does, made with the core's project-level
# grants by ../scheduled-dedup-project (the root passes project_grants to the core, or a team bake's bootstrap makes
# them as the owner): granting on the project takes project-wide rights.
# - workflow: roles/datastore.user narrowed by an IAM condition to the one database (Firestore has no per-database
#   IAM resource; Firestore "Configure per-database access permissions").
# - workflow_log_writer: the sample workflow writes its own log entries with sys.log, as its service account. Writing
#   log entries is granted on the project (there is no narrower resource to write to); roles/logging.logWriter holds
#   logging.logEntries.create and nothing that reads.
# - workflow_executions_viewer: the guard of a run id names the execution that holds it; another execution of the run
#   id that meets it reads that execution (googleapis.workflowexecutions.v1...executions.get: workflows.executions.get)
#   to take the guard over once it has ended, or to wait while it runs (workflow.yaml). roles/workflows.viewer is the
#   narrowest predefined role with it, read-only (cloud.google.com/iam/docs/roles-permissions/workflows), and
#   project-level for the reason given for the runtime's grant below.
# - runtime_invoker: workflows.executions.create (start one), workflows.executions.get (follow it: the baked
#   executions.py) and .list (find the one a run started when the start call's answer was lost). Project-level
#   because Workflows has no IAM policy on a single workflow: the lowest level where any Workflows role can be granted
#   is the project (IAM "Workflows roles and permissions"), and Workflows does not take part in IAM Conditions'
#   resource attributes, so a resource.name condition could not narrow it either. roles/workflows.invoker is the
#   narrowest predefined role that holds both: executions and callbacks, nothing that reads or changes a workflow
#   (cloud.google.com/iam/docs/roles-permissions/workflows: workflows.executions.create, .get, .list, .cancel,
#   callbacks and step entries).
locals {
  project_grants = {
    workflow                   = { role = "roles/datastore.user", member = local.account_member, database = true }
    workflow_log_writer        = { role = "roles/logging.logWriter", member = local.account_member, database = false }
    workflow_executions_viewer = { role = "roles/workflows.viewer", member = local.account_member, database = false }
    runtime_invoker            = { role = "roles/workflows.invoker", member = "serviceAccount:${var.runtime_service_account_email}", database = false }
  }
}

# The account was a single resource before it became optional: an applied project keeps it.
moved {
  from = google_service_account.workflow
  to   = google_service_account.workflow[0]
}
