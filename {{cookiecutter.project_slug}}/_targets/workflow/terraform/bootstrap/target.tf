# The workflow target's part of the bootstrap (main.tf's local.bootstrap_target_* values): the account the workflow
# runs as, what a deploy and a plan of the workflow call, its APIs and its project-level grants.
locals {
  # The workflow's account (../target.tf's target_accounts).
  bootstrap_target_accounts = {
    target = "{{ cookiecutter.project_slug }}-wf"
  }

  # The workflow (google_workflows_workflow). Workflows is not among the services whose resource.name an IAM
  # condition can test either (main.tf's local.deployer_permissions says what that means).
  bootstrap_target_deployer_permissions = [
    "workflows.operations.get",
    "workflows.workflows.create",
    "workflows.workflows.delete",
    "workflows.workflows.get",
    "workflows.workflows.update",
  ]

  bootstrap_target_planner_permissions = [
    "workflows.workflows.get",
  ]

  # The workflow module's apis output (the template's tests/test_bootstrap.py compares).
  bootstrap_target_apis = ["workflows.googleapis.com", "workflowexecutions.googleapis.com"]

  # The workflow module's project_grants output, for the bootstrap's accounts (the template's tests/test_bootstrap.py
  # compares the roles).
  bootstrap_target_grants = {
    workflow                   = { role = "roles/datastore.user", member = google_service_account.workload["target"].member, database = true }
    workflow_log_writer        = { role = "roles/logging.logWriter", member = google_service_account.workload["target"].member, database = false }
    workflow_executions_viewer = { role = "roles/workflows.viewer", member = google_service_account.workload["target"].member, database = false }
    runtime_invoker            = { role = "roles/workflows.invoker", member = google_service_account.workload["runtime"].member, database = false }
  }
}
