{%- if cookiecutter.target == "workflow" -%}
# `terraform test` for the scheduled-dedup-workflow module with this project's baked values,
# offline against mock providers: the workflow, its account and grants, and what it hands the core
# module (root.tftest.hcl checks that main.tf passes it on).

mock_provider "google" {}

variables {
{% include "terraform/proxy_variables.hcl.jinja" %}
  # The real project passes ../workflow/workflow.yaml.
  workflow = {
    source_contents = "main:\n  steps:\n    - done:\n        return: ok\n"
  }
}

run "workflow" {
  command = apply

  module {
    source = "./modules/scheduled-dedup-workflow"
  }

  assert {
    condition = (
      google_service_account.workflow[0].account_id == "${var.slug}-wf" &&
      google_workflows_workflow.this.name == "${var.slug}-wf" &&
      google_workflows_workflow.this.labels == var.labels
    )
    error_message = "The workflow and its account carry the slug, so two bakes apply side by side."
  }

  assert {
    condition = (
      google_workflows_workflow.this.service_account == google_service_account.workflow[0].id &&
      google_workflows_workflow.this.source_contents == var.workflow.source_contents &&
      google_workflows_workflow.this.user_env_vars["DEDUP_COLLECTION"] == var.firestore.collection &&
      google_workflows_workflow.this.user_env_vars["DEDUP_RETENTION_SECONDS"] == tostring(var.retention_seconds)
    )
    error_message = "The workflow must run as its own account, with the database, collection and retention its guards use."
  }

  assert {
    condition = toset([
      for m in values(output.project_grants) : m.role if m.member == google_service_account.workflow[0].member
    ]) == toset(["roles/datastore.user", "roles/logging.logWriter", "roles/workflows.viewer"]) && toset([for m in values(output.project_grants) : m.role if m.database]) == toset(["roles/datastore.user"])
    error_message = "The workflow's account must hold exactly roles/datastore.user (on the one database), roles/logging.logWriter (sys.log) and roles/workflows.viewer (its guard reads the owner's execution)."
  }

  assert {
    condition = toset([
      for m in values(output.project_grants) : m.role if m.member == "serviceAccount:${var.runtime_service_account_email}"
    ]) == toset(["roles/workflows.invoker"])
    error_message = "The runtime account gets exactly the one role that starts the workflow."
  }

  assert {
    condition     = output.environment_variables == { PROXY_WORKFLOW_NAME = "projects/${var.project_id}/locations/${var.region}/workflows/${google_workflows_workflow.this.name}" }
    error_message = "The function must get the workflow's full resource name, which the proxy creates executions of."
  }

  assert {
    # The function calls the Workflow Executions API (CreateExecution, GetExecution), a service of its own.
    condition     = output.ttl_collections == ["${var.firestore.collection}_workflow"] && toset(output.apis) == toset(["workflows.googleapis.com", "workflowexecutions.googleapis.com"])
    error_message = "The core gets the guards' collection (TTL), and the Workflows and Workflow Executions APIs."
  }
}

run "rejects_a_workflow_without_source" {
  command = plan

  module {
    source = "./modules/scheduled-dedup-workflow"
  }

  variables {
    workflow = {}
  }

  expect_failures = [var.workflow]
}
{%- endif %}
