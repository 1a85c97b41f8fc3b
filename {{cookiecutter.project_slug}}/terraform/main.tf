# {{ cookiecutter.project_name | replace("\n", " ") }}: Cloud Scheduler -> deduplicating function -> Firestore.
# Values below were rendered from the answers given when the project was baked; the module checks
# them again (modules/scheduled-dedup/variables.tf), so an edit that breaks a rule fails at plan.

module "scheduled_dedup" {
  source = "./modules/scheduled-dedup"

  project_id = var.project_id
  region     = var.region
  slug       = "{{ cookiecutter.project_slug }}"
  target     = "{{ cookiecutter.target }}"

  # The function's source is this project's root (terraform/, tests/, caches are left out).
  source_dir = "${path.root}/.."

  # job id => { schedule (5-field unix-cron), time_zone }. Each is the Scheduler job "<slug>-<job id>".
  jobs = {
{%- for job_id, job in cookiecutter.jobs | dictsort %}
    {{ job_id | tojson }} = {
      schedule  = {{ job.schedule | tojson }}
      time_zone = {{ job.time_zone | tojson }}
{%- if job.max_lateness_seconds is defined %}
      # A delivery later than this is recorded skipped and does not run the work.
      max_lateness_seconds = {{ job.max_lateness_seconds | int }}
{%- endif %}
    }
{%- endfor %}
  }

  timing = {
    attempt_deadline_seconds = {{ cookiecutter.attempt_deadline_seconds }}
    function_timeout_seconds = {{ cookiecutter.function_timeout_seconds }}
    lease_seconds            = {{ cookiecutter.lease_seconds }}
    retention_seconds        = {{ cookiecutter.retention_seconds }}
  }

  retry = {
    retry_count                = {{ cookiecutter.retry_count }}
    min_backoff_seconds        = {{ cookiecutter.min_backoff_seconds }}
    max_backoff_seconds        = {{ cookiecutter.max_backoff_seconds }}
    max_doublings              = {{ cookiecutter.max_doublings }}
    max_retry_duration_seconds = {{ cookiecutter.max_retry_duration_seconds }}
  }

  firestore = {
    database        = "{{ cookiecutter.firestore_database }}"
    collection      = "{{ cookiecutter.firestore_collection }}"
    create_database = var.create_firestore_database
  }
{%- if cookiecutter.target == "cloud_run_job" %}

  cloud_run_job = {
    image = var.job_image
  }
{%- endif %}
{%- if cookiecutter.target == "workflow" %}

  workflow = {
    source_contents = file("${path.root}/../workflow/workflow.yaml")
  }
{%- endif %}

  # The audit job: every job's expected runs against the records (audit.py, docs/operations.md).
  audit = {
    interval_minutes = {{ cookiecutter.audit_interval_minutes }}
  }

  enable_apis           = var.enable_apis
  alert_email           = var.alert_email
  notification_channels = var.notification_channels
}

# A warning at every `terraform plan` and apply while the alert policies notify nobody: incidents
# still open in Cloud Monitoring, but no one is told (alert_email or notification_channels).
check "alerts_reach_someone" {
  assert {
    condition     = length(module.scheduled_dedup.alert_notification_channels) > 0
    error_message = "No notification channel: the {{ cookiecutter.project_slug }} alert policies open incidents in Cloud Monitoring but notify nobody. Set alert_email (or notification_channels) in terraform/variables.tf or a *.tfvars file."
  }
}
