# The modules state minimum versions; a root bounds each provider (`~>`): Terraform's "Version Constraints", Best
# Practices. Commit the .terraform.lock.hcl `terraform init` writes on a networked machine, never an offline one.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 8.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = "~> 2.5"
    }
    time = {
      source  = "hashicorp/time"
      version = "~> 0.13"
    }
  }
}

provider "google" {
  project = local.config.project
  region  = local.config.region
}
