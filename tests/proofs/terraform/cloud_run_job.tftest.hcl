{%- if cookiecutter.target == "cloud_run_job" -%}
# `terraform test` for the scheduled-dedup-cloud-run-job module with this project's baked values,
# offline against mock providers: the job, its account and grants, and what it hands the core module
# (root.tftest.hcl checks that main.tf passes it on).

mock_provider "google" {}

variables {
{% include "terraform/proxy_variables.hcl.jinja" %}
  # The real project passes the image built from ../cloud_run_job/.
  job = {
    image = "europe-docker.pkg.dev/test-project/jobs/{{ cookiecutter.project_slug }}:test"
  }
}

run "job" {
  command = apply

  module {
    source = "./modules/scheduled-dedup-cloud-run-job"
  }

  assert {
    condition = (
      google_service_account.job[0].account_id == "${var.slug}-job" &&
      google_cloud_run_v2_job.this.name == "${var.slug}-job" &&
      google_cloud_run_v2_job.this.labels == var.labels
    )
    error_message = "The job and its account carry the slug, so two bakes apply side by side."
  }

  assert {
    condition = (
      google_cloud_run_v2_job.this.template[0].template[0].service_account == google_service_account.job[0].email &&
      google_cloud_run_v2_job.this.template[0].template[0].containers[0].image == var.job.image &&
      google_cloud_run_v2_job_iam_member.runtime["executor"].name == google_cloud_run_v2_job.this.name &&
      google_cloud_run_v2_job_iam_member.runtime["executor"].role == "roles/run.jobsExecutorWithOverrides" &&
      google_cloud_run_v2_job_iam_member.runtime["executor"].member == "serviceAccount:${var.runtime_service_account_email}"
    )
    error_message = "The Cloud Run job must run the given image as its own account, and the runtime account may run that job only."
  }

  assert {
    condition = (
      google_cloud_run_v2_job_iam_member.runtime["viewer"].name == google_cloud_run_v2_job.this.name &&
      google_cloud_run_v2_job_iam_member.runtime["viewer"].role == "roles/run.viewer" &&
      google_cloud_run_v2_job_iam_member.runtime["viewer"].member == "serviceAccount:${var.runtime_service_account_email}"
    )
    error_message = "The runtime account follows the executions it starts (run.executions.get): roles/run.viewer on that one job, not the project."
  }

  assert {
    condition     = length(google_cloud_run_v2_job_iam_member.runtime) == 2
    error_message = "The runtime account holds exactly two roles on the job: the executor and the viewer."
  }

  assert {
    condition = (
      keys(output.project_grants) == ["job"] &&
      output.project_grants["job"].member == google_service_account.job[0].member &&
      output.project_grants["job"].role == "roles/datastore.user" &&
      output.project_grants["job"].database &&
      google_cloud_run_v2_job_iam_member.runtime["executor"].member != google_service_account.job[0].member
    )
    error_message = "The Cloud Run job's account must hold exactly roles/datastore.user, narrowed to the one database (project_grants: scheduled-dedup-project makes it under the database condition)."
  }

  assert {
    condition = alltrue([
      for env in google_cloud_run_v2_job.this.template[0].template[0].containers[0].env :
      env.value == {
        DEDUP_PROJECT           = var.project_id
        DEDUP_LOCATION          = var.region
        DEDUP_DATABASE          = var.firestore.database
        DEDUP_COLLECTION        = var.firestore.collection
        DEDUP_RETENTION_SECONDS = tostring(var.retention_seconds)
        JOB_MAX_RETRIES         = "3"
        JOB_LEASE_SECONDS       = "600"
        PROXY_JOB_NAME          = "projects/${var.project_id}/locations/${var.region}/jobs/${google_cloud_run_v2_job.this.name}"
      }[env.name]
    ]) && length(google_cloud_run_v2_job.this.template[0].template[0].containers[0].env) == 8
    error_message = "The job gets the DEDUP_* and JOB_* settings cloud_run_job/ reads, and its own full name (holders.py)."
  }

  assert {
    condition = (
      google_cloud_run_v2_job_iam_member.job_viewer.name == google_cloud_run_v2_job.this.name &&
      google_cloud_run_v2_job_iam_member.job_viewer.role == "roles/run.viewer" &&
      google_cloud_run_v2_job_iam_member.job_viewer.member == google_service_account.job[0].member
    )
    error_message = "The job's account reads its own job's executions (run.executions.get, cloud_run_job/holders.py): roles/run.viewer on that one job, not the project."
  }

  assert {
    condition     = output.environment_variables == { PROXY_JOB_NAME = "projects/${var.project_id}/locations/${var.region}/jobs/${google_cloud_run_v2_job.this.name}" }
    error_message = "The function must get the job's full resource name, which the proxy passes to RunJob."
  }

  assert {
    condition     = toset(output.ttl_collections) == toset([for kind in ["runs", "items", "artifacts", "outputs", "dead_letters"] : "${var.firestore.collection}_job_${kind}"])
    error_message = "Every collection cloud_run_job/store.py writes needs its TTL on expire_at."
  }
}

run "rejects_a_job_without_image" {
  command = plan

  module {
    source = "./modules/scheduled-dedup-cloud-run-job"
  }

  variables {
    job = {}
  }

  expect_failures = [var.job]
}
{%- endif %}
