# Provider pins for this project (a team bake's bootstrap root has the same): the modules it calls state minimum
# versions only and a root bounds each provider (`~>`), as Terraform advises ("Version Constraints", Best Practices).
# `terraform init` writes .terraform.lock.hcl with the exact versions it picked (commit that file from a networked
# machine; never one made against offline stand-in providers).
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
