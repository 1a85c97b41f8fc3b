# {{ cookiecutter.project_name | replace("\n", " ") }}: what the deploy pipeline needs before its first run.
# The bake's own project (google_project.this: the deployer's project-level rights reach this bake alone), the state
# bucket, a Workload Identity pool whose provider trusts GitHub's OIDC tokens of one repository only (by its numeric
# id and its owner's), and two service accounts: a planner (every plan, shown before any approval; reads metadata,
# never writes) and a deployer (only a job of the `production` environment on the default branch, applying the plan
# it was shown). And, once, what
# needs project-wide rights (module "project"): the APIs, the function's source bucket, the project-level
# grants, the Firestore database, Cloud Tasks' audit logs, so the deployer needs none. No keys anywhere:
# google-github-actions/auth exchanges the job's OIDC token for a short-lived one.
# https://cloud.google.com/iam/docs/workload-identity-federation-with-deployment-pipelines

locals {
  repository   = "{{ cookiecutter.repository }}"
  state_bucket = "{{ cookiecutter.state_bucket }}"

  # What `terraform apply` of ../ needs, and nothing more, for each kind of resource the modules make there (the
  # README's "What the deployer may do" lists the same; the template's tests/test_bootstrap.py keeps the two, and the
  # modules' resource types, in step, and lists every grant of the deployer in this root's plan).
  # None that reaches the whole project: what needs that (the APIs, the source bucket, the project-level
  # grants, the database, the audit configuration) is module "project"'s, below, applied by the owner. So no
  # roles/serviceusage.serviceUsageAdmin (it would enable any API, Compute's default editor account with it),
  # no roles/resourcemanager.projectIamAdmin (even conditioned on the roles, it grants them to any principal),
  # no roles/storage.admin (its project-level storage.hmacKeys.create passes any resource condition: an HMAC
  # key for an account that reads every bucket, Cloud Storage "Create an HMAC key"), no
  # roles/logging.configWriter (sinks and exclusions: every log routed out, or the Data Access logs hidden).
  # roles/datastore.indexAdmin (the TTL policy: google_firestore_field, a field's configuration, which the index
  # permissions govern: Firestore "Security for server client libraries", cloud.google.com/firestore/docs/security/iam:
  # indexAdmin "create, modify, delete, list, or view indexes") only under a condition naming this bake's database
  # (deployer_conditions), not roles/datastore.owner, which deletes or exports any database.
  # No service-account role: the bootstrap makes the accounts (workload_accounts) and grants actAs on each.
  # No Artifact Registry role either: the bootstrap makes the image repository (module "images"),
  # as roles/artifactregistry.admin, which creates repositories and sets their IAM policies, cannot
  # be narrowed to one repository (Artifact Registry is not among the services whose resource.name
  # an IAM condition can test: IAM "Resource attributes for IAM Conditions"); what a deploy reads of it,
  # roles/artifactregistry.reader on that one repository (deployer_reads_images).
  deployer_roles = [
    "roles/datastore.indexAdmin",
  ]

  # The rest, a custom role (google_project_iam_custom_role.deployer) instead of the predefined admin and editor
  # roles, which hold far more (run.admin: every Cloud Run service's and job's IAM policy; cloudfunctions.admin:
  # every function's): the create, get, update and delete the google provider calls for each resource type, and the
  # wait on its long-running operations. Project-wide all the same, on the bake's own project (google_project.this,
  # which says why that is the one named resource they can be granted on): Cloud Functions, Cloud Run, Cloud Scheduler,
  # Cloud Tasks, Monitoring and Cloud Logging's metrics are not among the services whose resource.name an
  # IAM condition can test (IAM "Resource attributes for IAM Conditions"), and a resource's create permission is
  # checked on the project. Each permission as IAM's "Roles and permissions" page of its service lists it
  # (cloud.google.com/iam/docs/roles-permissions/<service>) under the predefined role it replaces. Then the
  # target's resources' (target.tf).
  deployer_permissions = concat([
    # The function (google_cloudfunctions2_function; Cloud Functions v2 API; roles/cloudfunctions.developer's).
    "cloudfunctions.functions.create",
    "cloudfunctions.functions.delete",
    "cloudfunctions.functions.get",
    "cloudfunctions.functions.update",
    "cloudfunctions.operations.get",
    # The Scheduler jobs (google_cloud_scheduler_job): pause and resume (enable) for a job's `paused`.
    "cloudscheduler.jobs.create",
    "cloudscheduler.jobs.delete",
    "cloudscheduler.jobs.enable",
    "cloudscheduler.jobs.get",
    "cloudscheduler.jobs.pause",
    "cloudscheduler.jobs.update",
    # The deliveries queue (google_cloud_tasks_queue) and its enqueuers (google_cloud_tasks_queue_iam_member).
    "cloudtasks.queues.create",
    "cloudtasks.queues.delete",
    "cloudtasks.queues.get",
    "cloudtasks.queues.getIamPolicy",
    "cloudtasks.queues.setIamPolicy",
    "cloudtasks.queues.update",
    # The log-based metrics (google_logging_metric), and nothing else of Cloud Logging's configuration.
    "logging.logMetrics.create",
    "logging.logMetrics.delete",
    "logging.logMetrics.get",
    "logging.logMetrics.list",
    "logging.logMetrics.update",
    # The alert policies, the dashboard, the e-mail channel (google_monitoring_*).
    "monitoring.alertPolicies.create",
    "monitoring.alertPolicies.delete",
    "monitoring.alertPolicies.get",
    "monitoring.alertPolicies.update",
    "monitoring.dashboards.create",
    "monitoring.dashboards.delete",
    "monitoring.dashboards.get",
    "monitoring.dashboards.update",
    "monitoring.notificationChannels.create",
    "monitoring.notificationChannels.delete",
    "monitoring.notificationChannels.get",
    "monitoring.notificationChannels.update",
  ], local.bootstrap_target_deployer_permissions)

  # The accounts the function, its Scheduler jobs and a proxy target (target.tf) run or sign as (the ids
  # the modules would give them; ../main.tf passes their emails in, so the modules make none). Made
  # here because the deployer must act as them (iam.serviceAccounts.actAs) and that right cannot be
  # narrowed to some accounts of a project: IAM Conditions test resource.name only for the services
  # IAM "Configure resource-based access" lists, and IAM's service accounts are not among them; a
  # project-wide roles/iam.serviceAccountAdmin would let the deployer grant itself actAs on every
  # account of the project. So the deployer holds roles/iam.serviceAccountUser on exactly these
  # accounts, granted on each account (google_service_account_iam_member), and no project-wide
  # service-account role. Keyed as ../main.tf's local.accounts (target: the proxy target's account).
  workload_accounts = merge({
    runtime = "{{ cookiecutter.project_slug }}-run"
    invoker = "{{ cookiecutter.project_slug }}-invoker"
    build   = "{{ cookiecutter.project_slug }}-build"
  }, local.bootstrap_target_accounts)

  # The Firestore database of the run records, which module "project" makes (or, with
  # create_firestore_database = false, the existing one ../main.tf names from config.yaml).
  database = "{{ cookiecutter.firestore_database }}"

  # Firestore takes IAM conditions on a database's name, projects/P/databases/D (Firestore "Configure
  # per-database access permissions"; IAM "Resource attributes for IAM Conditions": firestore.googleapis.com):
  # the TTL policy of this bake's database, no other database's indexes.
  deployer_conditions = {
    "roles/datastore.indexAdmin" = {
      title      = "only-this-bakes-database"
      expression = "resource.name == 'projects/${var.project_id}/databases/${local.database}'"
    }
  }

  # A plan refreshes every resource in the state: it reads each one's metadata and IAM policy, and
  # nothing else. Plans run code from a branch before anyone approved it, so this account must never
  # change anything, nor read data: not roles/viewer, whose datastore.entities.get/list read every
  # Firestore document of the project (the run records) and whose storage/logging reads reach every
  # bucket's metadata and log. A custom role of the get/list/getIamPolicy permissions of exactly the
  # resource types the modules make (IAM "Understanding roles" lists each permission under its role);
  # the template's tests/test_bootstrap.py keeps it in step with the modules' resource types. Then the target's
  # resources' (target.tf).
  planner_permissions = concat([
    "artifactregistry.repositories.get",
    "artifactregistry.repositories.getIamPolicy",
    "cloudfunctions.functions.get",
    "cloudscheduler.jobs.get",
    "cloudtasks.queues.get",
    "cloudtasks.queues.getIamPolicy",
    "datastore.indexes.get",
    "datastore.indexes.list",
    "iam.serviceAccounts.get",
    "logging.logMetrics.get",
    "monitoring.alertPolicies.get",
    "monitoring.dashboards.get",
    "monitoring.notificationChannels.get",
    "run.services.get",
    "run.services.getIamPolicy",
    "storage.objects.get",
  ], local.bootstrap_target_planner_permissions)

  # The state objects of this bake: <prefix>/<workspace>.tfstate and .tflock (the gcs backend puts the
  # prefix, with a slash, in front of every object name). Several bakes share one bucket: each
  # account reaches its own prefix only.
  state_prefix = "{{ cookiecutter.project_slug }}/"
  # Objects under the prefix, and listing the bucket with a prefix inside it (the gcs backend lists
  # <prefix> for its workspaces): the storage.googleapis.com/objectListPrefix API attribute (IAM
  # "Resource attributes for IAM Conditions", Cloud Storage; "Conditions attribute reference").
  state_condition = "resource.name.startsWith('projects/_/buckets/${local.state_bucket}/objects/${local.state_prefix}') || (resource.type == 'storage.googleapis.com/Bucket' && api.getAttribute('storage.googleapis.com/objectListPrefix', '').startsWith('${local.state_prefix}'))"

  # Evaluated by Google on every token exchange (CEL): a token of any other repository is refused
  # before any binding is looked at. By the repository's numeric id and its owner's, not by name: a
  # repository renamed, deleted and re-created, or an owner's name taken over, keeps the name but not
  # the ids (GitHub "OpenID Connect reference": repository_id, repository_owner_id claims;
  # google-github-actions/auth README, "Security considerations": map and check the ids).
  attribute_condition = "assertion.repository_id == '${var.github_repository_id}' && assertion.repository_owner_id == '${var.github_repository_owner_id}'"

  # attribute.deploy is "true" for exactly one kind of job: one in the `production` environment
  # (its token's sub is repo:<owner>/<name>:environment:production) running on the default branch,
  # main (the branch .github/workflows/ci.yml applies from).
  # A pull request's job has ref refs/pull/<n>/merge, another branch's refs/heads/<branch>.
  attribute_mapping = {
    "google.subject"          = "assertion.sub"
    "attribute.repository"    = "assertion.repository"
    "attribute.repository_id" = "assertion.repository_id"
    "attribute.deploy"        = "assertion.sub == 'repo:{{ cookiecutter.repository }}:environment:production' && assertion.ref == 'refs/heads/main' ? 'true' : 'false'"
  }
}

# The bake's own project: everything below is made in it, and it holds nothing else. The deployer's project-level grants
# (its custom role, local.deployer_permissions) cannot be narrowed to this bake's resources: Cloud Functions, Cloud
# Run, Cloud Scheduler, Cloud Tasks, Monitoring and log-based metrics are not among the services whose resource.name
# an IAM condition can test (IAM "Resource attributes for IAM Conditions"), and a resource's create permission is
# checked on the project. So the one named resource they are granted on is a project that holds only this bake: the
# project is Google's unit of isolation, the node of the resource hierarchy that allow policies attach to and that
# workloads are separated by ("Decide the resource hierarchy for your Google Cloud landing zone",
# cloud.google.com/architecture/landing-zones/decide-resource-hierarchy; Resource Manager "Resource hierarchy").
# Made by the owner who applies this root: resourcemanager.projects.create is checked on the parent (Resource
# Manager API, CreateProjectRequest: "checked on the parent resource"; roles/resourcemanager.projectCreator), and
# linking the billing account needs roles/billing.user on it (Cloud Billing "Overview of Cloud Billing access
# control": Billing Account User, with Project Creator, creates projects linked to that account). The creator is
# the new project's owner (Resource Manager "projects.create": "owned by its creator"), which module "project" needs.
# An existing project (an earlier team bake's, adopt_existing) is used instead only when its owner declares that it
# holds only this bake (var.existing_project_holds_only_this_bake).
resource "google_project" "this" {
  # checkov:skip=CKV_GCP_27: auto_create_network = false would enable Compute Engine to delete the default network (the provider's google_project page; hashicorp/terraform-provider-google#3121), and enabling Compute creates its default account, an editor; without Compute the project has no network.
  # checkov:skip=CKV2_GCP_5: Data Access logs for every service and user are the owner's cost decision; the ones this bake needs, Cloud Tasks' DATA_WRITE (who queued a run), module "project" turns on.
  count = var.existing_project_holds_only_this_bake ? 0 : 1

  project_id      = var.project_id
  name            = var.project_id
  folder_id       = startswith(var.parent, "folders/") ? trimprefix(var.parent, "folders/") : null
  org_id          = startswith(var.parent, "organizations/") ? trimprefix(var.parent, "organizations/") : null
  billing_account = var.billing_account
  labels          = { "scheduled-dedup" = "{{ cookiecutter.project_slug }}" }
  # Never deleted by Terraform (a destroy, or a count gone to 0, fails): it holds the run records and the state.
  deletion_policy = "PREVENT"

  lifecycle {
    prevent_destroy = true
  }
}

locals {
  # Every resource below names its project through this: made after the project when the bootstrap creates it.
  project_id = var.existing_project_holds_only_this_bake ? var.project_id : google_project.this[0].project_id
}

# The APIs this root calls besides the function's (module "project" enables them all, with the function's, and waits:
# an enabled API answers before it has propagated, so a pool, an account or a bucket created right after
# `services.enable` returns can still meet "API not enabled" / 403 for a while).
locals {
  bootstrap_apis = [
    "iam.googleapis.com",
    "iamcredentials.googleapis.com", # google-github-actions/auth impersonates the accounts through it
    "sts.googleapis.com",            # exchanges GitHub's OIDC token
    "cloudresourcemanager.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
    "artifactregistry.googleapis.com", # the function's image repository (module "images")
  ]
}

# Everything below that calls one of these APIs depends on this node, which stands for module "project"'s wait (the
# template's tests/test_bootstrap.py checks the order on `terraform graph`); not on the module as a whole, which takes
# the accounts made below (a cycle).
resource "terraform_data" "apis" {
  input = module.project.apis_ready
}

# This root enabled and waited for its APIs itself before module "project" did: an applied bootstrap keeps them.
moved {
  from = google_project_service.this
  to   = module.project.google_project_service.this
}

moved {
  from = time_sleep.apis
  to   = module.project.time_sleep.apis
}

# The Terraform state of ../ (prefix "{{ cookiecutter.project_slug }}"; others' projects use their own slug).
# Versioned, so a state broken by a bad apply can be restored from the previous generation;
# only the deployer writes it, the planner reads it, nobody else is granted anything on it.
resource "google_storage_bucket" "state" {
  # checkov:skip=CKV_GCP_62: Usage logs would need a second bucket to protect; Cloud Audit Logs (Data Access for Cloud Storage) record who read or wrote the state.
  count = var.create_state_bucket ? 1 : 0

  project                     = local.project_id
  name                        = local.state_bucket
  location                    = var.region
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  force_destroy               = false

  versioning {
    enabled = true
  }

  # Keep the ten newest earlier states of each object: enough to roll back, bounded in cost.
  lifecycle_rule {
    condition {
      num_newer_versions = 10
      with_state         = "ARCHIVED"
    }
    action {
      type = "Delete"
    }
  }

  lifecycle {
    prevent_destroy = true
  }

  depends_on = [terraform_data.apis]
}

resource "google_storage_bucket_iam_member" "state_deployer" {
  bucket = var.create_state_bucket ? google_storage_bucket.state[0].name : local.state_bucket
  role   = "roles/storage.objectUser" # read, write and lock the state
  member = google_service_account.deployer.member

  condition {
    title       = "{{ cookiecutter.project_slug }}-state-only"
    description = "The state objects under ${local.state_prefix} only: other bakes' state in this bucket stays out of reach."
    expression  = local.state_condition
  }
}

resource "google_storage_bucket_iam_member" "state_planner" {
  bucket = var.create_state_bucket ? google_storage_bucket.state[0].name : local.state_bucket
  role   = "roles/storage.objectViewer" # plans run with -lock=false: reading is all they do
  member = google_service_account.planner.member

  condition {
    title       = "{{ cookiecutter.project_slug }}-state-only"
    description = "The state objects under ${local.state_prefix} only: other bakes' state in this bucket stays out of reach."
    expression  = local.state_condition
  }
}

resource "google_iam_workload_identity_pool" "github" {
  project                   = local.project_id
  workload_identity_pool_id = "github-{{ cookiecutter.project_slug }}"
  display_name              = "GitHub Actions"
  description               = "Workflows of ${local.repository} (terraform/bootstrap of {{ cookiecutter.project_slug }})"

  depends_on = [terraform_data.apis]
}

resource "google_iam_workload_identity_pool_provider" "github" {
  # checkov:skip=CKV_GCP_125: The condition pins the repository and owner ids rather than sub: this one provider serves pull request, push and environment jobs, whose sub differ; the deployer is bound to attribute.deploy, which reads sub and ref.
  project                            = local.project_id
  workload_identity_pool_id          = google_iam_workload_identity_pool.github.workload_identity_pool_id
  workload_identity_pool_provider_id = "github-actions"
  display_name                       = "GitHub Actions OIDC"
  attribute_condition                = local.attribute_condition
  attribute_mapping                  = local.attribute_mapping

  oidc {
    issuer_uri = "https://token.actions.githubusercontent.com"
  }
}

resource "google_service_account" "planner" {
  project      = local.project_id
  account_id   = "{{ cookiecutter.project_slug }}-plan"
  display_name = "{{ cookiecutter.project_slug }} CI planner (every plan, read-only)"

  depends_on = [terraform_data.apis]
}

resource "google_service_account" "deployer" {
  project      = local.project_id
  account_id   = "{{ cookiecutter.project_slug }}-deploy"
  display_name = "{{ cookiecutter.project_slug }} CI deployer (production environment, main only)"

  depends_on = [terraform_data.apis]
}

# The function's accounts (local.workload_accounts says why the bootstrap makes them); their roles
# are granted by the modules, on what each account reaches.
resource "google_service_account" "workload" {
  for_each = local.workload_accounts

  project      = local.project_id
  account_id   = each.value
  display_name = "{{ cookiecutter.project_slug }}: ${each.key} (terraform/ of {{ cookiecutter.project_slug }} uses it)"

  depends_on = [terraform_data.apis]
}

# The function's image repository, with the cleanup policies the image-repository module defines
# for every bake, and its build account the one writer: made here so the deployer holds no Artifact
# Registry role (local.deployer_roles says why). ../main.tf passes its name to the module, which then
# makes none. Named and labelled as the module would make it: a project applied before keeps it
# (the README says how to move it here).
module "images" {
  source = "{{ cookiecutter.module_sources['image-repository'] }}"

  project_id    = local.project_id
  location      = var.region
  repository_id = "{{ cookiecutter.project_slug }}-images"
  description   = "{{ cookiecutter.project_slug }}: the function's images; cleanup policies keep the newest versions of each."
  labels        = { "scheduled-dedup" = "{{ cookiecutter.project_slug }}" }
  writers       = { build = google_service_account.workload["build"].member }

  depends_on = [terraform_data.apis]
}

# What needs project-wide rights, made once by the owner who applies this root: the APIs, the function's source
# bucket, the project-level grants (the build account's, the runtime's on the one database, the target's if any), the
# Firestore database and Cloud Tasks' DATA_WRITE audit logs, with the same module and inputs ../main.tf's core module
# would call it with (../main.tf passes it project_setup, so it makes none of it). The deployer then needs no role
# that reaches the whole project (local.deployer_roles).
module "project" {
  source = "{{ cookiecutter.module_sources['scheduled-dedup-project'] }}"

  project_id        = local.project_id
  region            = var.region
  slug              = "{{ cookiecutter.project_slug }}"
  labels            = { "scheduled-dedup" = "{{ cookiecutter.project_slug }}" }
  apis_wait_seconds = var.apis_wait_seconds

  # This root's APIs and the target's (target.tf); the function's are the module's own.
  apis = concat(local.bootstrap_apis, local.bootstrap_target_apis)

  firestore = {
    database        = local.database
    create_database = var.create_firestore_database
  }
  service_accounts = {
    runtime = google_service_account.workload["runtime"].email
    build   = google_service_account.workload["build"].email
  }
  # The invoker's roles/run.servicesInvoker on the project, not a grant on the function's service that the deployer would
  # make with run.services.setIamPolicy on every service (the scheduled-dedup module's invoker grant says why); then
  # the target's (target.tf).
  grants = merge({
    invoker = { role = "roles/run.servicesInvoker", member = google_service_account.workload["invoker"].member, database = false }
  }, local.bootstrap_target_grants)
}

# The deployer writes the function's source zips to the one source bucket module "project" made (a grant on the
# bucket: no other bucket's objects, no HMAC key, no bucket IAM): roles/storage.objectUser creates, reads and
# deletes objects (IAM "Cloud Storage roles").
resource "google_storage_bucket_iam_member" "source_deployer" {
  bucket = module.project.source_bucket
  role   = "roles/storage.objectUser"
  member = google_service_account.deployer.member
}

# What a deploy of ../ calls (local.deployer_permissions), instead of the predefined admin and editor roles.
resource "google_project_iam_custom_role" "deployer" {
  project     = local.project_id
  role_id     = "{{ cookiecutter.project_slug | replace("-", "_") }}_deployer"
  title       = "{{ cookiecutter.project_slug }} CI deployer"
  description = "What terraform/ of {{ cookiecutter.project_slug }} makes: create, get, update, delete; no sink, exclusion or other logging configuration."
  permissions = local.deployer_permissions

  depends_on = [terraform_data.apis]
}

resource "google_project_iam_member" "deployer_custom" {
  project = local.project_id
  role    = google_project_iam_custom_role.deployer.name
  member  = google_service_account.deployer.member
}

# The function's deploy reads the image repository it pushes to (build_config.docker_repository): on that one
# repository (IAM "Artifact Registry roles and permissions": reader gets repositories and downloads artifacts), not
# the project's every repository.
resource "google_artifact_registry_repository_iam_member" "deployer_reads_images" {
  project    = local.project_id
  location   = var.region
  repository = module.images.repository_id
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.deployer.member
}

# A bake applied before these left ../main.tf keeps them: ../main.tf forgets them (its removed blocks), and this root,
# applied once with adopt_existing = true (README, "Upgrading a team bake"), imports them, each where module
# "project" makes it. Import ids: the google provider's pages of each resource ("Import"); a project-level grant is
# "<project> <role> <member>", with its condition's title after a space when it has one (the provider parses
# "resource_name role member [condition_title]": hashicorp/terraform-provider-google, tpgiamresource/iam.go,
# iamMemberImport; the titles are module "project"'s, "<slug>-<key>-firestore-db"). The build account's
# storage grant is imported as it was (no condition) and replaced by the conditioned one in the same apply.
locals {
  # The APIs apart: what the accounts below wait for must not wait for the accounts (a cycle).
  adopted_apis = var.adopt_existing ? toset(module.project.apis) : toset([])
  adopted = var.adopt_existing ? merge(
    {
      "bucket"     = { to = "bucket", key = "", id = "${var.project_id}/${var.project_id}-{{ cookiecutter.project_slug }}-src" }
      "logWriter"  = { to = "build", key = "roles/logging.logWriter", id = "${var.project_id} roles/logging.logWriter ${google_service_account.workload["build"].member}" }
      "objViewer"  = { to = "build", key = "roles/storage.objectViewer", id = "${var.project_id} roles/storage.objectViewer ${google_service_account.workload["build"].member}" }
      "runtime_db" = { to = "datastore_user", key = "", id = "${var.project_id} roles/datastore.user ${google_service_account.workload["runtime"].member} {{ cookiecutter.project_slug }}-runtime-firestore-db" }
    },
    var.create_firestore_database ? {
      "database" = { to = "database", key = "", id = "projects/${var.project_id}/databases/${local.database}" }
    } : {},
    {
      # The invoker's project-level grant is new (the service-level one it replaces stays with the service): made,
      # not imported.
      for key, grant in module.project.grants : "grant ${key}" => {
        to = grant.database ? "database_grants" : "grants", key = key, id = join(" ", compact([var.project_id, grant.role, grant.member, grant.database ? "{{ cookiecutter.project_slug }}-${key}-firestore-db" : ""]))
      } if key != "invoker"
    },
  ) : {}
}

import {
  for_each = local.adopted_apis
  to       = module.project.google_project_service.this[each.key]
  id       = "${var.project_id}/${each.key}"
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "bucket" }
  to       = module.project.google_storage_bucket.source
  id       = each.value.id
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "build" }
  to       = module.project.google_project_iam_member.build[each.value.key]
  id       = each.value.id
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "datastore_user" }
  to       = module.project.google_project_iam_member.datastore_user
  id       = each.value.id
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "grants" }
  to       = module.project.google_project_iam_member.grants[each.value.key]
  id       = each.value.id
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "database_grants" }
  to       = module.project.google_project_iam_member.database_grants[each.value.key]
  id       = each.value.id
}

import {
  for_each = { for key, item in local.adopted : key => item if item.to == "database" }
  to       = module.project.google_firestore_database.this[0]
  id       = each.value.id
}

# The deployer may deploy what runs or signs as these accounts (actAs), and as no other account.
resource "google_service_account_iam_member" "deployer_acts_as" {
  for_each = google_service_account.workload

  service_account_id = each.value.name
  role               = "roles/iam.serviceAccountUser"
  member             = google_service_account.deployer.member
}

# Any workflow run of the repository (by its id) may plan as the planner.
resource "google_service_account_iam_member" "planner_workload_identity" {
  service_account_id = google_service_account.planner.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principalSet://iam.googleapis.com/${google_iam_workload_identity_pool.github.name}/attribute.repository_id/${var.github_repository_id}"
}

# Only the production environment's jobs on the default branch may act as the deployer.
resource "google_service_account_iam_member" "deployer_workload_identity" {
  service_account_id = google_service_account.deployer.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principalSet://iam.googleapis.com/${google_iam_workload_identity_pool.github.name}/attribute.deploy/true"
}

resource "google_project_iam_member" "deployer" {
  for_each = toset(local.deployer_roles)

  project = local.project_id
  role    = each.key
  member  = google_service_account.deployer.member

  dynamic "condition" {
    for_each = contains(keys(local.deployer_conditions), each.key) ? [local.deployer_conditions[each.key]] : []
    content {
      title      = condition.value.title
      expression = condition.value.expression
    }
  }
}

resource "google_project_iam_custom_role" "planner" {
  project     = local.project_id
  role_id     = "{{ cookiecutter.project_slug | replace("-", "_") }}_planner"
  title       = "{{ cookiecutter.project_slug }} CI planner"
  description = "Reads the metadata and IAM policies of what terraform/ of {{ cookiecutter.project_slug }} makes; no data, no writes."
  permissions = local.planner_permissions

  depends_on = [terraform_data.apis]
}

resource "google_project_iam_member" "planner" {
  project = local.project_id
  role    = google_project_iam_custom_role.planner.name
  member  = google_service_account.planner.member

  # storage.objects.get reaches this bake's source objects only, not every bucket's objects.
  condition {
    title      = "{{ cookiecutter.project_slug }}-source-objects-only"
    expression = "resource.type != 'storage.googleapis.com/Object' || resource.name.startsWith('projects/_/buckets/${module.project.source_bucket}/')"
  }
}

# Cloud Tasks' Data Access audit logs (who queued a re-run or a backfill) were this root's own before module
# "project" made them: an applied bootstrap keeps the configuration.
moved {
  from = google_project_iam_audit_config.cloud_tasks
  to   = module.project.google_project_iam_audit_config.cloud_tasks[0]
}
