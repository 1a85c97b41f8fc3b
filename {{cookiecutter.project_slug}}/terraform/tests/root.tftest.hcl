# `terraform test` for this project's main.tf and ../config.yaml as they stand: it plans and applies against mock providers, so a value
# that breaks a rule fails here, and the outputs a user needs are there.

mock_provider "google" {}

mock_provider "archive" {}

mock_provider "time" {}
{%- if cookiecutter.target == "cloud_run_job" %}

# job_image has no default: a test image stands in for the one built from the job's Dockerfile.
variables {
  job_image = "europe-docker.pkg.dev/test-project/jobs/{{ cookiecutter.project_slug }}:test"
}
{%- endif %}

run "main" {
  command = apply
{%- if not cookiecutter.alert_email %}

  # No alert_email was baked: the root's check must say that the alerts reach nobody.
  expect_failures = [check.alerts_reach_someone]
{%- endif %}

  assert {
    condition     = output.scheduler_job_names == { for id, _ in local.config.jobs : id => "${local.config.slug}-${id}" }
    error_message = "One Cloud Scheduler job per job of config.yaml, named after the slug."
  }

  assert {
    condition     = module.scheduled_dedup.firestore_collection == local.config.collection && module.scheduled_dedup.firestore_database == local.config.database
    error_message = "Run records go to config.yaml's database and collection."
  }

  assert {
    condition     = output.function_uri != "" && length(distinct([module.scheduled_dedup.runtime_service_account_email, output.invoker_service_account_email, module.scheduled_dedup.build_service_account_email])) == 3
    error_message = "The function has a URI, and it runs, is invoked and is built as three accounts."
  }

  assert {
    condition     = length(output.log_metric_names) == 11
    error_message = "One log-based metric per outcome."
  }

  assert {
    condition     = length(output.alert_notification_channels) == {{ 1 if cookiecutter.alert_email else 0 }}
    error_message = "The baked alert_email gets its notification channel (none when it is empty)."
  }

  assert {
    condition     = module.scheduled_dedup.audit_job_name == "{{ cookiecutter.project_slug }}_audit"
    error_message = "main.tf passes the audit: its Scheduler job is deployed (audit.tf)."
  }
{%- if cookiecutter.target == "cloud_run_job" %}

  # The composition: the job's module gets the core's runtime account and database, and the core the
  # job's name and collections.
  assert {
    condition     = module.scheduled_dedup.function_environment_variables["PROXY_JOB_NAME"] == "projects/${local.config.project}/locations/${local.config.region}/jobs/${output.cloud_run_job_name}"
    error_message = "main.tf passes the job's name to the function (PROXY_JOB_NAME)."
  }

  assert {
    condition     = output.cloud_run_job_name == "{{ cookiecutter.project_slug }}-job" && module.cloud_run_job.ttl_collections == [for kind in ["runs", "items", "artifacts", "outputs", "dead_letters"] : "{{ cookiecutter.firestore_collection }}_job_${kind}"]
    error_message = "main.tf passes the core's collection to the job's module (its collections derive from it)."
  }
{%- elif cookiecutter.target == "workflow" %}

  # The composition: the workflow's module gets the core's runtime account and database, and the core
  # the workflow's name, collection and API.
  assert {
    condition     = module.scheduled_dedup.function_environment_variables["PROXY_WORKFLOW_NAME"] == "projects/${local.config.project}/locations/${local.config.region}/workflows/${output.workflow_name}"
    error_message = "main.tf passes the workflow's name to the function (PROXY_WORKFLOW_NAME)."
  }

  assert {
    condition     = output.workflow_name == "{{ cookiecutter.project_slug }}-wf" && module.workflow.ttl_collections == ["{{ cookiecutter.firestore_collection }}_workflow"]
    error_message = "main.tf passes the core's collection to the workflow's module (its guards' collection derives from it)."
  }
{%- else %}

  assert {
    condition     = length([for name in keys(module.scheduled_dedup.function_environment_variables) : name if startswith(name, "PROXY_")]) == 0
    error_message = "A target=function bake starts nothing: its function has no PROXY_* name."
  }
{%- endif %}
}
