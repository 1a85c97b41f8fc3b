variable "project_id" {
  description = "Google Cloud project the pipeline deploys into (and where the pool, the accounts and, when created, the state bucket live)."
  type        = string
  default     = "{{ cookiecutter.gcp_project_id }}"
}

variable "region" {
  description = "Location of the state bucket and of the function's image repository (the function's region, config.yaml's: Cloud Functions takes no repository of another region)."
  type        = string
  default     = "{{ cookiecutter.region }}"
}

variable "create_state_bucket" {
  description = "Create the state bucket (false: it exists already, e.g. made by another project's bootstrap; the grants on it are made either way)."
  type        = bool
  default     = true
}

# GitHub's numeric ids, which the pool trusts instead of the name (main.tf, attribute_condition):
#   gh api repos/{{ cookiecutter.repository }} --jq '.id, .owner.id'
variable "github_repository_id" {
  description = "Numeric id of {{ cookiecutter.repository }} (the repository_id claim of its OIDC tokens)."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]{0,19}$", var.github_repository_id))
    error_message = "github_repository_id=${jsonencode(var.github_repository_id)}: must be the repository's numeric id (digits only), e.g. from `gh api repos/{{ cookiecutter.repository }} --jq .id`."
  }
}

variable "github_repository_owner_id" {
  description = "Numeric id of the owner of {{ cookiecutter.repository }} (the repository_owner_id claim)."
  type        = string
  nullable    = false

  validation {
    condition     = can(regex("^[1-9][0-9]{0,19}$", var.github_repository_owner_id))
    error_message = "github_repository_owner_id=${jsonencode(var.github_repository_owner_id)}: must be the owner's numeric id (digits only), e.g. from `gh api repos/{{ cookiecutter.repository }} --jq .owner.id`."
  }
}

variable "apis_wait_seconds" {
  description = "Seconds to wait after enabling the APIs, before creating what calls them (an enabled API takes a while to propagate)."
  type        = number
  default     = 60
  nullable    = false

  validation {
    condition     = var.apis_wait_seconds >= 0 && var.apis_wait_seconds <= 1800 && floor(var.apis_wait_seconds) == var.apis_wait_seconds
    error_message = "apis_wait_seconds=${var.apis_wait_seconds}: must be a whole number of seconds, 0-1800."
  }
}

variable "create_firestore_database" {
  description = "Create config.yaml's Firestore database (a new project has none); false: ../main.tf uses one that exists already, in Native mode."
  type        = bool
  default     = {{ 'true' if cookiecutter.create_firestore_database else 'false' }}
}

variable "adopt_existing" {
  description = "true once, when upgrading a bake whose ../ made the APIs, the source bucket, the project-level grants and the database itself: this root imports them (main.tf) instead of making them again. false for a new bake."
  type        = bool
  default     = false
  nullable    = false
}
