

  # The composition: the workflow's module gets the core's runtime account and database, and the core
  # the workflow's name, collection and API.
  assert {
    condition     = module.scheduled_dedup.function_environment_variables["PROXY_WORKFLOW_NAME"] == "projects/${local.config.project}/locations/${local.config.region}/workflows/${output.workflow_name}"
    error_message = "main.tf passes the workflow's name to the function (PROXY_WORKFLOW_NAME)."
  }

  assert {
    condition     = output.workflow_name == "{{ cookiecutter.project_slug }}-wf" && module.workflow.ttl_collections == ["{{ cookiecutter.firestore_collection }}_workflow"]
    error_message = "main.tf passes the core's collection to the workflow's module (its guards' collection derives from it)."
  }