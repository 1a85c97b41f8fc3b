# Minimum versions only, as Terraform advises a reusable module ("Version Constraints", Best Practices:
# https://developer.hashicorp.com/terraform/language/expressions/version-constraints#best-practices); the
# upper bounds are the calling root's (a bake's terraform/versions.tf), with its lock file.
# Terraform >= 1.9: the validation blocks in variables.tf compare one variable with another
# (deadline <= timeout <= lease, retention >= lease + retry window), which 1.9 first allowed.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 8.0"
    }
    # archive >= 2.5: before it, glob patterns in archive_file.excludes matched literally
    # (terraform-provider-archive PR 354), so caches and virtualenvs could end up in the zip.
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.5"
    }
    # time_sleep: waits for eventual consistency on a first apply (apis.tf, iam.tf, monitoring.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.13"
    }
  }
}
