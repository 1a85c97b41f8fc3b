# `terraform test` of the bootstrap against a mocked provider: who may plan, who may deploy, and
# what the state bucket is. The template's tests/test_bootstrap.py also evaluates the CEL below
# for real GitHub tokens (pull request, push, production environment on main and elsewhere).

mock_provider "google" {}

mock_provider "time" {}

# The repository's and its owner's numeric ids (`gh api repos/OWNER/NAME --jq '.id, .owner.id'`).
variables {
  github_repository_id       = "123456789"
  github_repository_owner_id = "987654"
  # Where the bake's own project is created, and who pays for it.
  parent          = "folders/123456789012"
  billing_account = "01AB23-45CD67-89EF01"
}

run "bootstrap" {
  command = apply

  assert {
    condition     = google_iam_workload_identity_pool_provider.github.attribute_condition == "assertion.repository_id == '123456789' && assertion.repository_owner_id == '987654'"
    error_message = "The provider admits tokens of {{ cookiecutter.repository }} only, by its numeric id and its owner's."
  }

  assert {
    condition     = google_iam_workload_identity_pool_provider.github.attribute_mapping["attribute.deploy"] == "assertion.sub == 'repo:{{ cookiecutter.repository }}:environment:production' && assertion.ref == 'refs/heads/main' ? 'true' : 'false'"
    error_message = "attribute.deploy is true for the production environment on main only."
  }

  assert {
    condition     = google_iam_workload_identity_pool_provider.github.oidc[0].issuer_uri == "https://token.actions.githubusercontent.com"
    error_message = "The provider trusts GitHub Actions' OIDC issuer."
  }

  assert {
    condition     = endswith(google_service_account_iam_member.deployer_workload_identity.member, "/attribute.deploy/true") && startswith(google_service_account_iam_member.deployer_workload_identity.member, "principalSet://iam.googleapis.com/")
    error_message = "Only tokens with attribute.deploy = true may act as the deployer."
  }

  assert {
    condition     = endswith(google_service_account_iam_member.planner_workload_identity.member, "/attribute.repository_id/123456789")
    error_message = "The planner is for this repository's workflow runs."
  }

  assert {
    condition     = google_project.this[0].project_id == var.project_id && google_project.this[0].folder_id == "123456789012" && google_project.this[0].org_id == null && google_project.this[0].billing_account == "01AB23-45CD67-89EF01" && google_project.this[0].deletion_policy == "PREVENT"
    error_message = "The bootstrap creates the bake's own project in the folder given, linked to the billing account, and never deletes it."
  }

  assert {
    condition     = alltrue([for grant in concat(values(google_project_iam_member.deployer), [google_project_iam_member.deployer_custom, google_project_iam_member.planner]) : grant.project == google_project.this[0].project_id]) && google_project_iam_custom_role.deployer.project == google_project.this[0].project_id && module.project.source_bucket != ""
    error_message = "The CI accounts' project-level grants are on the bake's own project, the one the bootstrap creates."
  }

  assert {
    condition     = alltrue([for grant in google_project_iam_member.deployer : grant.member == google_service_account.deployer.member])
    error_message = "The deployer's project roles go to the deployer account."
  }

  assert {
    condition     = google_project_iam_member.planner.member == google_service_account.planner.member && alltrue([for permission in google_project_iam_custom_role.planner.permissions : can(regex("\\.(get|list|getIamPolicy|getMetadata)$", permission))])
    error_message = "The planner only reads metadata and IAM policies: get, list, getIamPolicy, getMetadata."
  }

  assert {
    condition = alltrue([
      for key, account in google_service_account.workload :
      google_service_account_iam_member.deployer_acts_as[key].service_account_id == account.name &&
      google_service_account_iam_member.deployer_acts_as[key].role == "roles/iam.serviceAccountUser" &&
      google_service_account_iam_member.deployer_acts_as[key].member == google_service_account.deployer.member
      ]) && length(google_service_account_iam_member.deployer_acts_as) == length(google_service_account.workload) && length([
      for role in keys(google_project_iam_member.deployer) : role if startswith(role, "roles/iam.serviceAccount")
    ]) == 0
    error_message = "The deployer acts as the function's accounts, each granted on the account, and holds no project-wide service-account role."
  }

  assert {
    condition = module.images.repository_id == "{{ cookiecutter.project_slug }}-images" && module.images.writer_members == { build = google_service_account.workload["build"].member } && length([
      for role in keys(google_project_iam_member.deployer) : role if startswith(role, "roles/artifactregistry.")
    ]) == 0
    error_message = "The bootstrap makes the function's image repository, the build account its one writer; the deployer holds no Artifact Registry role."
  }

  assert {
    condition     = length(setintersection(keys(google_project_iam_member.deployer), ["roles/storage.admin", "roles/resourcemanager.projectIamAdmin", "roles/serviceusage.serviceUsageAdmin", "roles/logging.configWriter", "roles/datastore.owner", "roles/owner", "roles/editor", "roles/run.admin", "roles/cloudfunctions.admin", "roles/cloudscheduler.admin", "roles/cloudtasks.queueAdmin", "roles/monitoring.alertPolicyEditor", "roles/monitoring.dashboardEditor", "roles/monitoring.notificationChannelEditor", "roles/workflows.editor"])) == 0
    error_message = "The deployer holds no role that reaches the whole project: storage.admin, projectIamAdmin, serviceUsageAdmin, logging.configWriter, datastore.owner, nor the predefined admin and editor roles of the services it deploys to."
  }

  assert {
    condition     = length(google_project_iam_member.deployer["roles/datastore.indexAdmin"].condition) == 1 && google_project_iam_member.deployer["roles/datastore.indexAdmin"].condition[0].expression == "resource.name == 'projects/${var.project_id}/databases/{{ cookiecutter.firestore_database }}'"
    error_message = "roles/datastore.indexAdmin reaches this bake's database only."
  }

  assert {
    condition     = google_storage_bucket_iam_member.source_deployer.bucket == module.project.source_bucket && google_storage_bucket_iam_member.source_deployer.role == "roles/storage.objectUser" && google_storage_bucket_iam_member.source_deployer.member == google_service_account.deployer.member
    error_message = "The deployer writes the objects of the one source bucket module \"project\" makes, granted on that bucket."
  }

  assert {
    condition     = google_project_iam_member.deployer_custom.role == google_project_iam_custom_role.deployer.name && length([for permission in google_project_iam_custom_role.deployer.permissions : permission if startswith(permission, "logging.") && !startswith(permission, "logging.logMetrics.")]) == 0
    error_message = "The deployer's custom role holds the log-based metrics' permissions of Cloud Logging alone (no sinks, no exclusions)."
  }

  assert {
    condition     = toset([for permission in google_project_iam_custom_role.deployer.permissions : permission if endswith(permission, ".setIamPolicy")]) == toset([{% include "_targets/" ~ cookiecutter.target ~ "/_parts/bootstrap_sets_iam.hcl" ignore missing %}"cloudtasks.queues.setIamPolicy"])
    error_message = "The deployer's custom role sets no IAM policy but those of the kinds of resources the deploy grants on: no Cloud Run service's."
  }

  assert {
    condition     = module.project.iam_members["invoker"].role == "roles/run.servicesInvoker" && module.project.iam_members["invoker"].member == google_service_account.workload["invoker"].member && length(module.project.iam_members["invoker"].condition) == 0
    error_message = "The owner grants the invoker roles/run.servicesInvoker on the project, so the deployer sets no service's IAM policy."
  }

  assert {
    condition     = google_artifact_registry_repository_iam_member.deployer_reads_images.repository == module.images.repository_id && google_artifact_registry_repository_iam_member.deployer_reads_images.role == "roles/artifactregistry.reader"
    error_message = "The deployer reads the one image repository the function pushes to, granted on that repository."
  }

  assert {
    condition = alltrue([
      google_storage_bucket.state[0].name == "{{ cookiecutter.state_bucket }}",
      google_storage_bucket.state[0].versioning[0].enabled,
      google_storage_bucket.state[0].uniform_bucket_level_access,
      google_storage_bucket.state[0].public_access_prevention == "enforced",
      !google_storage_bucket.state[0].force_destroy,
    ])
    error_message = "The state bucket is versioned, uniform-access, never public and never emptied by a destroy."
  }

  assert {
    condition     = google_storage_bucket_iam_member.state_deployer.role == "roles/storage.objectUser" && google_storage_bucket_iam_member.state_planner.role == "roles/storage.objectViewer"
    error_message = "The deployer reads and writes the state; the planner only reads it."
  }

  assert {
    condition = alltrue([
      for grant in [google_storage_bucket_iam_member.state_deployer, google_storage_bucket_iam_member.state_planner] :
      length(grant.condition) == 1 && strcontains(grant.condition[0].expression, "resource.name.startsWith('projects/_/buckets/{{ cookiecutter.state_bucket }}/objects/{{ cookiecutter.project_slug }}/')")
    ])
    error_message = "Both state grants reach this bake's prefix only."
  }

  assert {
    condition     = module.project.cloud_tasks_audit_config.service == "cloudtasks.googleapis.com" && [for config in module.project.cloud_tasks_audit_config.audit_log_config : config.log_type] == ["DATA_WRITE"] && alltrue([for config in module.project.cloud_tasks_audit_config.audit_log_config : config.exempted_members == null ? true : length(config.exempted_members) == 0])
    error_message = "Cloud Tasks' DATA_WRITE Data Access audit logs are on, nobody exempted: who queued a re-run is on record."
  }
}

run "bucket_made_elsewhere" {
  command   = plan
  state_key = "bucket_made_elsewhere" # its own state: the first run's bucket is not planned for destruction

  variables {
    create_state_bucket = false
  }

  assert {
    condition     = length(google_storage_bucket.state) == 0 && google_storage_bucket_iam_member.state_deployer.bucket == "{{ cookiecutter.state_bucket }}"
    error_message = "An existing bucket is not created again, and the grants on it are still made."
  }
}

run "in_an_organization" {
  command   = plan
  state_key = "in_an_organization"

  variables {
    parent = "organizations/42"
  }

  assert {
    condition     = google_project.this[0].org_id == "42" && google_project.this[0].folder_id == null
    error_message = "A project created directly under the organization names it, and no folder."
  }
}

# Applied, so that the template's tests/test_bootstrap.py reads every grant of the deployer in this run's state too.
run "an_existing_project_that_holds_only_this_bake" {
  command   = apply
  state_key = "existing_project"

  variables {
    existing_project_holds_only_this_bake = true
    parent                                = ""
    billing_account                       = ""
  }

  assert {
    condition     = length(google_project.this) == 0 && google_project_iam_member.deployer_custom.project == var.project_id && google_service_account.deployer.project == var.project_id
    error_message = "A declared-dedicated project is not created again: the bootstrap makes everything in it."
  }
}

run "refuses_no_parent" {
  command   = plan
  state_key = "refusals"

  variables {
    parent = ""
  }

  expect_failures = [var.existing_project_holds_only_this_bake]
}

run "refuses_a_parent_of_another_shape" {
  command   = plan
  state_key = "refusals"

  variables {
    parent = "123456789012"
  }

  expect_failures = [var.parent]
}

run "refuses_a_billing_account_of_another_shape" {
  command   = plan
  state_key = "refusals"

  variables {
    billing_account = "billingAccounts/01AB23-45CD67-89EF01"
  }

  expect_failures = [var.billing_account]
}

run "refuses_adopting_an_undeclared_project" {
  command   = plan
  state_key = "refusals"

  variables {
    adopt_existing = true
  }

  expect_failures = [var.adopt_existing]
}

run "refuses_a_repository_name_for_its_id" {
  command   = plan
  state_key = "refusals"

  variables {
    github_repository_id = "{{ cookiecutter.repository }}"
  }

  expect_failures = [var.github_repository_id]
}

run "refuses_an_owner_id_with_letters" {
  command   = plan
  state_key = "refusals"

  variables {
    github_repository_owner_id = "98a7"
  }

  expect_failures = [var.github_repository_owner_id]
}

run "refuses_a_fractional_wait" {
  command   = plan
  state_key = "refusals"

  variables {
    apis_wait_seconds = 1.5
  }

  expect_failures = [var.apis_wait_seconds]
}
