

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