

# job_image has no default: a test image stands in for the one built from the job's Dockerfile.
variables {
  job_image = "europe-docker.pkg.dev/test-project/jobs/{{ cookiecutter.project_slug }}:test"
}