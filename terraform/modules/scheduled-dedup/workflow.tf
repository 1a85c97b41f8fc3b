# target = workflow: the function is an idempotent proxy. After it claims a run it starts one
# execution of this workflow with the run id in the argument; the workflow guards its side effect
# with a Firestore create-by-id keyed by the run id.

resource "google_workflows_workflow" "this" {
  count = var.target == "workflow" ? 1 : 0

  project             = var.project_id
  region              = var.region
  name                = local.workflow_name
  description         = "${var.slug}: started once per claimed scheduled run."
  service_account     = google_service_account.workflow[0].id
  call_log_level      = var.workflow.call_log_level
  source_contents     = var.workflow.source_contents
  labels              = local.labels
  deletion_protection = false

  user_env_vars = {
    DEDUP_PROJECT    = var.project_id
    DEDUP_DATABASE   = var.firestore.database
    DEDUP_COLLECTION = var.firestore.collection
    # The guards' expire_at: the TTL policy on <collection>_workflow deletes them after the retention.
    DEDUP_RETENTION_SECONDS = tostring(var.timing.retention_seconds)
  }

  depends_on = [time_sleep.apis]
}
