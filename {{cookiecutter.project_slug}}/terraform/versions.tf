# Provider pins for this project. The scheduled-dedup module declares the same ranges;
# `terraform init` writes .terraform.lock.hcl with the exact versions it picked (commit that file
# from a networked machine; never one made against offline stand-in providers).
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 8.0, < 9.0"
    }
    archive = {
      source  = "hashicorp/archive"
      version = ">= 2.5, < 3.0"
    }
    time = {
      source  = "hashicorp/time"
      version = ">= 0.13, < 1.0"
    }
  }
}

provider "google" {
  project = local.config.project
  region  = local.config.region
}
