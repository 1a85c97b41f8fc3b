{%- if cookiecutter.state_bucket %}
# The state lives in Cloud Storage, shared by everyone who applies and by CI (.github/workflows/ci.yml).
# The bucket is made once by bootstrap/ (versioned, uniform access, public access prevented); the
# prefix is this project's slug, so several projects keep their state in one bucket. The backend
# locks the state while a command runs: two applies never write it at once.
terraform {
  backend "gcs" {
    bucket = "{{ cookiecutter.state_bucket }}"
    prefix = "{{ cookiecutter.project_slug }}"
  }
}
{%- else %}
# No backend: the state is terraform.tfstate on the machine that applies (lose it, Terraform forgets what it made;
# two applying at once overwrite it). Bake again with a state_bucket answer, or add a backend "gcs" here, for a team.
{%- endif %}
