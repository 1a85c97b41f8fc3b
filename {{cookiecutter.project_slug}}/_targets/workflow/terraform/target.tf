# The workflow target: the function starts the workflow of module "workflow" (scheduled-dedup-workflow), which
# takes the core's runtime account, database and API wait, and gives the core the workflow's name, collections
# and APIs.

# What this target hands the core module (main.tf's local.target_* values): the PROXY_* name of what the function
# starts, the collections its code writes (TTL), the APIs it needs; the function follows each execution it starts (a
# failed or cancelled one is counted and alerts); the suffix of the target's own account.
locals {
  # Each its own local: Terraform orders by local, and the core's apis must not wait on this module's collections.
  target_function           = { environment_variables = module.workflow.environment_variables }
  target_ttl_collections    = module.workflow.ttl_collections
  target_apis               = module.workflow.apis
  target_follows_executions = true
  target_project_grants     = module.workflow.project_grants
  target_accounts           = { target = "wf" }
}

module "workflow" {
  source = "{{ cookiecutter.module_sources['scheduled-dedup-workflow'] }}"

  project_id                    = local.config.project
  region                        = local.config.region
  slug                          = local.config.slug
  labels                        = module.scheduled_dedup.labels
  runtime_service_account_email = module.scheduled_dedup.runtime_service_account_email
  apis_ready                    = module.scheduled_dedup.apis_ready
  retention_seconds             = module.scheduled_dedup.retention_seconds
{%- if cookiecutter.state_bucket %}
  service_account_email         = local.accounts.target
{%- endif %}

  firestore = {
    database   = module.scheduled_dedup.firestore_database
    collection = module.scheduled_dedup.firestore_collection
  }

  workflow = {
    source_contents = file("${path.root}/../workflow/workflow.yaml")
  }
}

# Where these lived while one module held every target: an applied project keeps them.
moved {
  from = module.scheduled_dedup.google_service_account.workflow[0]
  to   = module.workflow.google_service_account.workflow
}

moved {
  from = module.scheduled_dedup.google_workflows_workflow.this[0]
  to   = module.workflow.google_workflows_workflow.this
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.datastore_user["workflow"]
  to   = module.workflow.google_project_iam_member.datastore_user
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.workflow_log_writer[0]
  to   = module.workflow.google_project_iam_member.log_writer
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.runtime_workflows_invoker[0]
  to   = module.workflow.google_project_iam_member.runtime_invoker
}

output "workflow_name" {
  description = "The workflow started once per claimed run."
  value       = module.workflow.workflow_name
}

# Its project-level grants are scheduled-dedup-project's (main.tf says why): an applied project keeps them.
{%- if cookiecutter.state_bucket %}
removed {
  from = module.workflow.google_project_iam_member.datastore_user

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.workflow.google_project_iam_member.log_writer

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.workflow.google_project_iam_member.executions_viewer

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.workflow.google_project_iam_member.runtime_invoker

  lifecycle {
    destroy = false
  }
}
{%- else %}
moved {
  from = module.workflow.google_project_iam_member.datastore_user
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.database_grants["workflow"]
}

moved {
  from = module.workflow.google_project_iam_member.log_writer
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.grants["workflow_log_writer"]
}

moved {
  from = module.workflow.google_project_iam_member.executions_viewer
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.grants["workflow_executions_viewer"]
}

moved {
  from = module.workflow.google_project_iam_member.runtime_invoker
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.grants["runtime_invoker"]
}
{%- endif %}
