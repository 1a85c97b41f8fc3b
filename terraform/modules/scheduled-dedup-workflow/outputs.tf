output "environment_variables" {
  description = "For the core module's function.environment_variables: the workflow's full resource name, which the proxy (job.py) creates executions of."
  value = {
    PROXY_WORKFLOW_NAME = "projects/${var.project_id}/locations/${var.region}/workflows/${google_workflows_workflow.this.name}"
  }
}

output "ttl_collections" {
  description = "For the core module's ttl_collections: the collection of the workflow's guards (one document per run, with expire_at)."
  value       = ["${var.firestore.collection}_workflow"]
}

output "apis" {
  description = "For the core module's apis: the project services the workflow needs besides the core's. The function calls both: workflows (the workflow itself) and workflowexecutions (CreateExecution, GetExecution: the Workflow Executions API is a service of its own, executions_v1's default endpoint)."
  value       = ["workflows.googleapis.com", "workflowexecutions.googleapis.com"]
}

output "workflow_name" {
  description = "The workflow the function starts."
  value       = google_workflows_workflow.this.name
}

output "service_account_email" {
  description = "The workflow's identity."
  value       = local.account_email
}

output "project_grants" {
  description = "For the core module's project_grants: the workflow account's roles on the project (datastore.user on the one database, logging.logWriter, workflows.viewer) and the runtime's workflows.invoker (../scheduled-dedup-project makes them)."
  value       = local.project_grants
}
