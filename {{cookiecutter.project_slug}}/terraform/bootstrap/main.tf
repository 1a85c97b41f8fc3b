# {{ cookiecutter.project_name | replace("\n", " ") }}: what the deploy pipeline needs before its first run.
# The state bucket, a Workload Identity pool whose provider trusts GitHub's OIDC tokens of one
# repository only, and two service accounts: a planner (pull requests; reads, never writes) and a
# deployer (only a job of the `production` environment on the default branch). No keys anywhere:
# google-github-actions/auth exchanges the job's OIDC token for a short-lived one.
# https://cloud.google.com/iam/docs/workload-identity-federation-with-deployment-pipelines

locals {
  repository   = "{{ cookiecutter.repository }}"
  state_bucket = "{{ cookiecutter.state_bucket }}"

  # The roles `terraform apply` of ../ needs, and nothing more: one per kind of resource the module
  # makes (the README's "The deployer's roles" lists the same, with what each is for; the template's
  # tests/test_bootstrap.py keeps the two, and the module's resource types, in step).
  # Roles: https://cloud.google.com/iam/docs/understanding-roles
  deployer_roles = [
    "roles/cloudfunctions.admin",
    "roles/cloudscheduler.admin",
    "roles/datastore.owner",
    "roles/iam.serviceAccountAdmin",
    "roles/iam.serviceAccountUser",
    "roles/logging.configWriter",
    "roles/monitoring.alertPolicyEditor",
    "roles/monitoring.dashboardEditor",
    "roles/monitoring.notificationChannelEditor",
    "roles/resourcemanager.projectIamAdmin",
    "roles/run.admin",
    "roles/serviceusage.serviceUsageAdmin",
    "roles/storage.admin",
{%- if cookiecutter.target == "workflow" %}
    "roles/workflows.editor",
{%- endif %}
  ]

  # A plan refreshes every resource in the state: read access to all of them, write access to none.
  # Pull request plans run code from the branch, so this account must never be able to change anything.
  planner_roles = [
    "roles/storage.objectViewer", # the state and the function's source objects (roles/viewer reads no objects)
    "roles/viewer",
  ]

  # Evaluated by Google on every token exchange (CEL): a token of any other repository is refused
  # before any binding is looked at.
  # https://docs.github.com/en/actions/security-for-github-actions/security-hardening-your-deployments/about-security-hardening-with-openid-connect
  attribute_condition = "assertion.repository == '{{ cookiecutter.repository }}'"

  # attribute.deploy is "true" for exactly one kind of job: one in the `production` environment
  # (its token's sub is repo:<owner>/<name>:environment:production) running on the default branch,
  # main (the branch .github/workflows/ci.yml applies from).
  # A pull request's job has ref refs/pull/<n>/merge, another branch's refs/heads/<branch>.
  attribute_mapping = {
    "google.subject"       = "assertion.sub"
    "attribute.repository" = "assertion.repository"
    "attribute.deploy"     = "assertion.sub == 'repo:{{ cookiecutter.repository }}:environment:production' && assertion.ref == 'refs/heads/main' ? 'true' : 'false'"
  }
}

resource "google_project_service" "this" {
  for_each = toset([
    "iam.googleapis.com",
    "iamcredentials.googleapis.com", # google-github-actions/auth impersonates the accounts through it
    "sts.googleapis.com",            # exchanges GitHub's OIDC token
    "cloudresourcemanager.googleapis.com",
    "serviceusage.googleapis.com",
    "storage.googleapis.com",
  ])

  project            = var.project_id
  service            = each.key
  disable_on_destroy = false
}

# The Terraform state of ../ (prefix "{{ cookiecutter.project_slug }}"; others' projects use their own slug).
# Versioned, so a state broken by a bad apply can be restored from the previous generation;
# only the deployer writes it, the planner reads it, nobody else is granted anything on it.
resource "google_storage_bucket" "state" {
  # checkov:skip=CKV_GCP_62: Usage logs would need a second bucket to protect; Cloud Audit Logs (Data Access for Cloud Storage) record who read or wrote the state.
  count = var.create_state_bucket ? 1 : 0

  project                     = var.project_id
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

  depends_on = [google_project_service.this]
}

resource "google_storage_bucket_iam_member" "state_deployer" {
  bucket = var.create_state_bucket ? google_storage_bucket.state[0].name : local.state_bucket
  role   = "roles/storage.objectUser" # read, write and lock the state
  member = google_service_account.deployer.member
}

resource "google_storage_bucket_iam_member" "state_planner" {
  bucket = var.create_state_bucket ? google_storage_bucket.state[0].name : local.state_bucket
  role   = "roles/storage.objectViewer" # pull request plans run with -lock=false: reading is all they do
  member = google_service_account.planner.member
}

resource "google_iam_workload_identity_pool" "github" {
  project                   = var.project_id
  workload_identity_pool_id = "github-{{ cookiecutter.project_slug }}"
  display_name              = "GitHub Actions"
  description               = "Workflows of ${local.repository} (terraform/bootstrap of {{ cookiecutter.project_slug }})"

  depends_on = [google_project_service.this]
}

resource "google_iam_workload_identity_pool_provider" "github" {
  # checkov:skip=CKV_GCP_125: The condition pins assertion.repository rather than sub: this one provider serves pull request, push and environment jobs, whose sub differ; the deployer is bound to attribute.deploy, which reads sub and ref.
  project                            = var.project_id
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
  project      = var.project_id
  account_id   = "{{ cookiecutter.project_slug }}-plan"
  display_name = "{{ cookiecutter.project_slug }} CI planner (pull requests, read-only)"

  depends_on = [google_project_service.this]
}

resource "google_service_account" "deployer" {
  project      = var.project_id
  account_id   = "{{ cookiecutter.project_slug }}-deploy"
  display_name = "{{ cookiecutter.project_slug }} CI deployer (production environment, main only)"

  depends_on = [google_project_service.this]
}

# Any workflow run of the repository may plan as the planner.
resource "google_service_account_iam_member" "planner_workload_identity" {
  service_account_id = google_service_account.planner.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principalSet://iam.googleapis.com/${google_iam_workload_identity_pool.github.name}/attribute.repository/${local.repository}"
}

# Only the production environment's jobs on the default branch may act as the deployer.
resource "google_service_account_iam_member" "deployer_workload_identity" {
  service_account_id = google_service_account.deployer.name
  role               = "roles/iam.workloadIdentityUser"
  member             = "principalSet://iam.googleapis.com/${google_iam_workload_identity_pool.github.name}/attribute.deploy/true"
}

resource "google_project_iam_member" "deployer" {
  # checkov:skip=CKV_GCP_41: The deployer creates the function's service accounts and deploys resources that run as them (actAs); they do not exist yet when this grant is made.
  # checkov:skip=CKV_GCP_49: Same: creating those accounts (serviceAccountAdmin) and acting as them (serviceAccountUser) is what deploying the module is.
  for_each = toset(local.deployer_roles)

  project = var.project_id
  role    = each.key
  member  = google_service_account.deployer.member
}

resource "google_project_iam_member" "planner" {
  # checkov:skip=CKV_GCP_117: A plan refreshes every kind of resource the module makes, so its account reads them all; roles/viewer is the read-only role that covers them and writes nothing.
  for_each = toset(local.planner_roles)

  project = var.project_id
  role    = each.key
  member  = google_service_account.planner.member
}
