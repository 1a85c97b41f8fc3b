variable "project_id" {
  description = "Project of the repository."
  type        = string
  nullable    = false
}

variable "location" {
  description = "The function's region: \"Cross-location repositories are not supported\" (Cloud Functions API, BuildConfig.docker_repository)."
  type        = string
  nullable    = false
}

variable "repository_id" {
  description = "The repository's id, <slug>-images."
  type        = string
  nullable    = false

  validation {
    # Artifact Registry repository ids: lower-case letters, digits and hyphens, a letter first, at most 63.
    condition     = can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.repository_id))
    error_message = "repository_id=${jsonencode(var.repository_id)}: must be lower-case letters, digits and hyphens, starting with a letter, at most 63 characters."
  }
}

variable "description" {
  description = "The repository's description."
  type        = string
  default     = ""
  nullable    = false
}

variable "labels" {
  description = "Labels of the repository."
  type        = map(string)
  default     = {}
  nullable    = false
}

# The one default: a caller passing null (the core module's function.images_kept unset) gets it.
variable "images_kept" {
  description = "Versions of each image the cleanup policies keep, newest first (the running image and the one before)."
  type        = number
  default     = 2
  nullable    = false

  validation {
    condition     = floor(var.images_kept) == var.images_kept && var.images_kept >= 1 && var.images_kept <= 100
    error_message = "images_kept=${var.images_kept} (the core module's function.images_kept): must be a whole number of image versions to keep, 1-100 (the newest stays whatever its age: the function runs it)."
  }
}

variable "writers" {
  description = "Members granted roles/artifactregistry.writer on this repository only, keyed by a name known at plan time (the member itself may not be: an account made in the same apply)."
  type        = map(string)
  default     = {}
  nullable    = false
}
