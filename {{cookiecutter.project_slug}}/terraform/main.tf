# {{ cookiecutter.project_name | replace("\n", " ") }}: Cloud Scheduler -> deduplicating function -> Firestore.
# What the chosen target adds is target.tf's (the target's own file): the local.target_* values of the core
# module's call below.

# The project's schedule configuration: ../config.yaml is the one file of the jobs and their timing (config.py
# reads it for the function, the tools and the tests; `make deploy` checks it with rules.py before Terraform runs).
# Terraform takes its numbers as written: no formula here (the module checks only their shapes).
locals {
  config = yamldecode(file("${path.root}/../config.yaml"))
{%- if cookiecutter.state_bucket %}

  # terraform/bootstrap makes the function's accounts and lets the deployer act as exactly these
  # (its local.workload_accounts says why): the modules use them and make none.
  accounts = {
    for key, suffix in merge({ runtime = "run", invoker = "invoker", build = "build" }, local.target_accounts) :
    key => "${local.config.slug}-${suffix}@${local.config.project}.iam.gserviceaccount.com"
  }
  # terraform/bootstrap makes the function's image repository too (its module "images"), so the
  # deployer holds no Artifact Registry role: the module pushes there and makes none.
  images_repository = "projects/${local.config.project}/locations/${local.config.region}/repositories/${local.config.slug}-images"
{%- endif %}
}

# The modules, called at a pinned address (Terraform's "Module Sources": git::<repository>//<directory>?ref=<tag or
# commit>): an upgrade is one bump of ref= in each source{% if cookiecutter.state_bucket %} (and bootstrap/main.tf's){% endif %}, then `terraform init -upgrade`.
module "scheduled_dedup" {
  source = "{{ cookiecutter.module_sources['scheduled-dedup'] }}"

  project_id = local.config.project
  region     = local.config.region
  slug       = local.config.slug
{%- if cookiecutter.state_bucket %}

  service_accounts = {
    runtime = local.accounts.runtime
    invoker = local.accounts.invoker
    build   = local.accounts.build
  }
  images_repository = local.images_repository
{%- endif %}

  # The function's source, derived: every module of this project's root, its configuration file and its
  # pins, so a module job.py imports is deployed with it; nothing else that lies there (in CI,
  # google-github-actions/auth's gha-creds-*.json; caches, .terraform/). A package (a directory) is not
  # covered: `python config.py` (which `make deploy` and tests/test_config.py run) names one main.py imports.
  source_dir   = "${path.root}/.."
  source_files = sort(concat(tolist(fileset("${path.root}/..", "*.py")), ["config.yaml", "requirements.txt"]))

  # The function's capacity as config.yaml's `function:` block writes it (max_instance_count,
  # max_instance_request_concurrency: above 1 the module gives it a whole CPU unless available_cpu says more); the bake derived it from
  # the busiest minute, and `python config.py` refuses one that cannot start every run of that minute at
  # once (tools/schedule_rules.py, check_capacity). What the block leaves out is the module's default.
  # What the target hands the core (target.tf): the function's environment, the collections its code writes (TTL),
  # the APIs it needs, whether the function follows executions it starts.
  function           = merge(try(local.config.function, {}), local.target_function)
  ttl_collections    = local.target_ttl_collections
  apis               = local.target_apis
  follows_executions = local.target_follows_executions

  # job id => { schedule, time_zone, and what the job sets of its own }; each is the Scheduler job "<slug>-<job id>".
  # A timing key the job leaves out is the defaults block's (the module looks it up in timing and retry).
  jobs = local.config.jobs

  timing = {
    attempt_deadline_seconds = local.config.defaults.attempt_deadline_seconds
    retention_seconds        = local.config.retention_seconds
  }

  retry = {
    for key in ["retry_count", "min_backoff_seconds", "max_backoff_seconds", "max_doublings", "max_retry_duration_seconds"] :
    key => local.config.defaults[key]
  }

  firestore = {
    database        = local.config.database
    collection      = local.config.collection
    create_database = var.create_firestore_database
  }

  audit = {
    interval_minutes = local.config.audit_interval_minutes
  }

  enable_apis           = var.enable_apis
  alert_email           = var.alert_email
  notification_channels = var.notification_channels

  task_queue = {
    enqueuers = var.task_queue_enqueuers
{%- if cookiecutter.state_bucket %}
    # Cloud Tasks' Data Access audit logs (who queued each task) are project-level: terraform/bootstrap turns them
    # on, as the owner, so the deployer needs no right over the project's audit configuration.
    data_access_logs = false
{%- endif %}
  }
}

# A warning at every `terraform plan` and apply while the alert policies notify nobody: incidents
# still open in Cloud Monitoring, but no one is told (alert_email or notification_channels).
check "alerts_reach_someone" {
  assert {
    condition     = length(module.scheduled_dedup.alert_notification_channels) > 0
    error_message = "No notification channel: the {{ cookiecutter.project_slug }} alert policies open incidents in Cloud Monitoring but notify nobody. Set alert_email (or notification_channels) in terraform/variables.tf or a *.tfvars file."
  }
}
