# {{ cookiecutter.project_name | replace("\n", " ") }}: Cloud Scheduler -> deduplicating function -> Firestore.
# What the chosen target adds is target.tf's: the local.target_* values below.

# ../config.yaml is the one file of the jobs and their timing (`make deploy` checks it with rules.py first):
# Terraform takes its numbers as written, no formula here (the module checks only their shapes).
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
  # And what needs project-wide rights (its module "project": the APIs, this source bucket, the project-level grants,
  # the database, Cloud Tasks' audit logs), named as scheduled-dedup-project names it.
  source_bucket = "${local.config.project}-${local.config.slug}-src"
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
  # terraform/bootstrap made what needs project-wide rights, as the owner (its module "project"): the module makes
  # none of it, and the deployer holds no role that reaches the whole project.
  project_setup = {
    source_bucket = local.source_bucket
  }
{%- endif %}

  # The function's source: every module of this root (one job.py imports too), the configuration and the pins; not
  # CI's gha-creds-*.json, caches, .terraform/. A package (a directory) is not: `python config.py` names one.
  source_dir   = "${path.root}/.."
  source_files = sort(concat(tolist(fileset("${path.root}/..", "*.py")), ["config.yaml", "requirements.txt"]))

  # The capacity as config.yaml's `function:` block writes it (`python config.py` checks it against the busiest
  # minute); what it leaves out is the module's default. Then what the target hands the core (target.tf).
  function           = merge(try(local.config.function, {}), local.target_function)
  ttl_collections    = local.target_ttl_collections
  apis               = local.target_apis
  follows_executions = local.target_follows_executions
{%- if not cookiecutter.state_bucket %}
  project_grants     = local.target_project_grants
{%- endif %}

  # job id => { schedule, time_zone, its own timing keys }; a key it leaves out is the defaults block's (timing, retry).
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
    database   = local.config.database
    collection = local.config.collection
{%- if not cookiecutter.state_bucket %}

    # Made by the module's project part (scheduled-dedup-project), as whoever runs make deploy.
    create_database = var.create_firestore_database
{%- endif %}
  }

  audit = {
    interval_minutes = local.config.audit_interval_minutes
  }

{%- if not cookiecutter.state_bucket %}
  enable_apis           = var.enable_apis
{%- endif %}
  alert_email           = var.alert_email
  notification_channels = var.notification_channels

  task_queue = {
    enqueuers = var.task_queue_enqueuers
  }
}

{%- if cookiecutter.state_bucket %}

# What needs project-wide rights left this root for terraform/bootstrap's module "project" (scheduled-dedup-project),
# which the owner applies. A bake applied before keeps every object: this root forgets them (destroy = false) and the
# bootstrap, applied with adopt_existing = true, imports them (its main.tf): no database, bucket or grant is destroyed.
# Terraform's "removed" block: https://developer.hashicorp.com/terraform/language/resources/syntax#removing-resources

removed {
  from = module.scheduled_dedup.google_project_service.this

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.time_sleep.apis

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.google_storage_bucket.source

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.google_project_iam_member.build

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.google_project_iam_member.datastore_user

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.google_firestore_database.this

  lifecycle {
    destroy = false
  }
}

removed {
  from = module.scheduled_dedup.google_project_iam_audit_config.cloud_tasks

  lifecycle {
    destroy = false
  }
}
{%- else %}

# What needs project-wide rights moved into scheduled-dedup-project: an applied project keeps every object.

moved {
  from = module.scheduled_dedup.google_project_service.this
  to   = module.scheduled_dedup.module.project[0].google_project_service.this
}

moved {
  from = module.scheduled_dedup.time_sleep.apis
  to   = module.scheduled_dedup.module.project[0].time_sleep.apis
}

moved {
  from = module.scheduled_dedup.google_storage_bucket.source
  to   = module.scheduled_dedup.module.project[0].google_storage_bucket.source
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.build
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.build
}

moved {
  from = module.scheduled_dedup.google_project_iam_member.datastore_user
  to   = module.scheduled_dedup.module.project[0].google_project_iam_member.datastore_user
}

moved {
  from = module.scheduled_dedup.google_firestore_database.this
  to   = module.scheduled_dedup.module.project[0].google_firestore_database.this
}

moved {
  from = module.scheduled_dedup.google_project_iam_audit_config.cloud_tasks
  to   = module.scheduled_dedup.module.project[0].google_project_iam_audit_config.cloud_tasks
}
{%- endif %}

# A warning at every plan and apply while incidents would notify nobody (alert_email or notification_channels).
check "alerts_reach_someone" {
  assert {
    condition     = length(module.scheduled_dedup.alert_notification_channels) > 0
    error_message = "No notification channel: the {{ cookiecutter.project_slug }} alert policies open incidents in Cloud Monitoring but notify nobody. Set alert_email (or notification_channels) in terraform/variables.tf or a *.tfvars file."
  }
}
