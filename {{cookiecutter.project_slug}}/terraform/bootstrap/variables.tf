variable "project_id" {
  description = "The bake's own project, which the pipeline deploys into and where the pool, the accounts and, when created, the state bucket live: created here (parent, billing_account) unless existing_project_holds_only_this_bake."
  type        = string
  default     = "{{ cookiecutter.gcp_project_id }}"
}

# The bake's project is created here, in a folder or an organization, linked to a billing account (main.tf,
# google_project.this, says why and what the owner needs on each).
variable "parent" {
  description = "Where the bake's project is created: \"folders/<number>\" or \"organizations/<number>\" (the owner needs roles/resourcemanager.projectCreator there). Empty with existing_project_holds_only_this_bake = true."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.parent == "" || can(regex("^(folders|organizations)/[1-9][0-9]{0,19}$", var.parent))
    error_message = "parent=${jsonencode(var.parent)}: must be \"folders/<number>\" or \"organizations/<number>\", e.g. from `gcloud resource-manager folders list`."
  }
}

variable "billing_account" {
  description = "Billing account the bake's project is linked to, \"XXXXXX-XXXXXX-XXXXXX\" (the owner needs roles/billing.user on it). Empty with existing_project_holds_only_this_bake = true."
  type        = string
  default     = ""
  nullable    = false

  validation {
    condition     = var.billing_account == "" || can(regex("^[0-9A-F]{6}-[0-9A-F]{6}-[0-9A-F]{6}$", var.billing_account))
    error_message = "billing_account=${jsonencode(var.billing_account)}: must be a billing account id, XXXXXX-XXXXXX-XXXXXX (6 uppercase hexadecimal digits, three times), e.g. from `gcloud billing accounts list`."
  }
}

# The deployer's project-level rights reach every resource of their kinds in the project (main.tf,
# google_project.this): in a project shared with other bakes or applications, theirs too.
variable "existing_project_holds_only_this_bake" {
  description = "true: project_id exists already (an earlier team bake's) and its owner declares that it holds only this bake, which the bootstrap then deploys into without creating a project. false: the bootstrap creates project_id (parent, billing_account)."
  type        = bool
  default     = false
  nullable    = false

  validation {
    condition     = var.existing_project_holds_only_this_bake ? var.parent == "" && var.billing_account == "" : var.parent != "" && var.billing_account != ""
    error_message = "existing_project_holds_only_this_bake=${var.existing_project_holds_only_this_bake}: false creates the bake's own project and needs parent and billing_account, true uses an existing one that holds only this bake and takes neither (given: parent=${jsonencode(var.parent)}, billing_account=${jsonencode(var.billing_account)}; README, \"Upgrading a team bake into a project of its own\")."
  }
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

  validation {
    condition     = !var.adopt_existing || var.existing_project_holds_only_this_bake
    error_message = "adopt_existing=true: the bake's project exists already; declare existing_project_holds_only_this_bake = true once it holds only this bake (the deployer's project-level rights reach all of it), or deploy the bake into a project of its own (README, \"Upgrading a team bake\")."
  }
}
