# Terraform >= 1.9: the validation blocks in variables.tf compare one variable with another
# (deadline <= timeout <= lease, retention >= lease + retry window), which 1.9 first allowed.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 8.0, < 9.0"
    }
    # archive >= 2.4: glob patterns in archive_file.excludes (used to leave tests/, .venv/, ... out of the zip).
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.4, < 3.0"
    }
  }
}
