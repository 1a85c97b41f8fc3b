# The cloud_run_job target's part of the bootstrap (main.tf's local.bootstrap_target_* values): the account the Cloud
# Run job runs as, what a deploy and a plan of the job call, and the job's project-level grants.
locals {
  # The Cloud Run job's account (../target.tf's target_accounts).
  bootstrap_target_accounts = {
    target = "{{ cookiecutter.project_slug }}-job"
  }

  # The Cloud Run job (google_cloud_run_v2_job) and the runtime's grants on it (google_cloud_run_v2_job_iam_member).
  bootstrap_target_deployer_permissions = [
    "run.jobs.create",
    "run.jobs.delete",
    "run.jobs.get",
    "run.jobs.getIamPolicy",
    "run.jobs.setIamPolicy",
    "run.jobs.update",
    "run.operations.get",
  ]

  bootstrap_target_planner_permissions = [
    "run.jobs.get",
    "run.jobs.getIamPolicy",
  ]

  # The Cloud Run API is the function's too: the module's own.
  bootstrap_target_apis = []

  # The cloud_run_job module's project_grants output, for the bootstrap's accounts (the template's
  # tests/test_bootstrap.py compares the roles).
  bootstrap_target_grants = {
    job = { role = "roles/datastore.user", member = google_service_account.workload["target"].member, database = true }
  }
}
