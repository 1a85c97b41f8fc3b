# What only the deploy decides (override with -var or a *.tfvars file); the project, region and jobs are config.yaml's.

{%- if not cookiecutter.state_bucket %}
variable "create_firestore_database" {
  description = "Create config.yaml's Firestore database (a new project has none); false: use one that exists already, in Native mode (not read at plan: the apply fails on a missing one)."
  type        = bool
  default     = {{ 'true' if cookiecutter.create_firestore_database else 'false' }}
}

variable "enable_apis" {
  description = "Enable the Google Cloud APIs this project needs (they are never disabled on destroy)."
  type        = bool
  default     = true
}
{%- endif %}

variable "alert_email" {
  description = "E-mail address the alert policies notify (an e-mail notification channel is created); empty, with no notification_channels: nobody (check alerts_reach_someone warns)."
  type        = string
  default     = {{ cookiecutter.alert_email | tojson }}
}

variable "notification_channels" {
  description = "More Monitoring notification channel ids (projects/P/notificationChannels/N) for the alert policies."
  type        = list(string)
  default     = []
}

variable "task_queue_enqueuers" {
  description = "Principals (user:..., group:..., serviceAccount:...) granted roles/cloudtasks.enqueuer on the deliveries queue: they may re-run and backfill runs with scheduled_dedup_tools.runs from a laptop (docs/schedules-and-manual-runs.md)."
  type        = list(string)
  default     = []
  nullable    = false
}
