# What only the deploy decides; override per environment with -var or a *.tfvars file. The project, the
# region, the jobs and their timing live in ../config.yaml (main.tf, local.config), and nowhere else.

# Baked answer create_firestore_database. true: this project creates its own database (a new GCP
# project has none; the first apply fails without one). false: the database named in main.tf must
# exist already in Firestore Native mode; plan reads it and refuses it otherwise.
variable "create_firestore_database" {
  description = "Create the Firestore database named in main.tf (false: use one that exists already, in Firestore Native mode)."
  type        = bool
  default     = {{ 'true' if cookiecutter.create_firestore_database else 'false' }}
}

variable "enable_apis" {
  description = "Enable the Google Cloud APIs this project needs (they are never disabled on destroy)."
  type        = bool
  default     = true
}

# Baked answer alert_email. Empty, with no notification_channels either: the alert policies open
# incidents and notify nobody, and every plan prints the warning of check "alerts_reach_someone".
variable "alert_email" {
  description = "E-mail address the alert policies notify (an e-mail notification channel is created); empty: none."
  type        = string
  default     = {{ cookiecutter.alert_email | tojson }}
}

variable "notification_channels" {
  description = "More Monitoring notification channel ids (projects/P/notificationChannels/N) for the alert policies."
  type        = list(string)
  default     = []
}

variable "task_queue_enqueuers" {
  description = "Principals (user:..., group:..., serviceAccount:...) granted roles/cloudtasks.enqueuer on the deliveries queue: they may re-run and backfill runs with tools/runs.py from a laptop (docs/schedules-and-manual-runs.md)."
  type        = list(string)
  default     = []
  nullable    = false
}
{%- if cookiecutter.target == "cloud_run_job" %}

# No default: a placeholder image would apply cleanly, ignore DEDUP_RUN_ID and let runs be recorded completed.
variable "job_image" {
  description = "Container image of the Cloud Run job, required: build and push ../cloud_run_job/Dockerfile first (e.g. REGION-docker.pkg.dev/PROJECT/REPO/IMAGE:TAG), then pass it with -var or a *.tfvars file."
  type        = string
}
{%- endif %}
