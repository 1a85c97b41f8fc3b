# Applied once per project by a project owner, from a laptop (see the README, "Deploy on merge").
# Its own state starts local; the README shows how to move it into the state bucket it creates.
# The same provider pins as ../versions.tf.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = "~> 8.0"
    }
    # time_sleep: the wait after enabling the APIs (main.tf).
    time = {
      source  = "hashicorp/time"
      version = "~> 0.13"
    }
  }
}

provider "google" {
  project = var.project_id
  region  = var.region
}
