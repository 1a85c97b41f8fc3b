# `terraform test` of main.tf and ../config.yaml as they stand, against mock providers: a value that breaks a rule fails.
mock_provider "google" {}
mock_provider "archive" {}
mock_provider "time" {}
{#- The target's own inputs, if it has any (its overlay's part: _targets/<target>/_parts, hooks/baking.py) #}
{%- include "_targets/" ~ cookiecutter.target ~ "/_parts/root_test_variables.hcl" ignore missing %}

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
    condition     = length(output.log_metric_names) == 12
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
{#- What main.tf passes between the core and the target's module (its overlay's part) #}
{%- include "_targets/" ~ cookiecutter.target ~ "/_parts/root_test_asserts.hcl" %}
}
