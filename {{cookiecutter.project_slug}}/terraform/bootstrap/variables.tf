variable "project_id" {
  description = "Google Cloud project the pipeline deploys into (and where the pool, the accounts and, when created, the state bucket live)."
  type        = string
  default     = "{{ cookiecutter.gcp_project_id }}"
}

variable "region" {
  description = "Location of the state bucket."
  type        = string
  default     = "{{ cookiecutter.region }}"
}

variable "create_state_bucket" {
  description = "Create the state bucket (false: it exists already, e.g. made by another project's bootstrap; the grants on it are made either way)."
  type        = bool
  default     = true
}
