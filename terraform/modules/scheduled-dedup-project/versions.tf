# Minimum versions only, the core module's (../scheduled-dedup/versions.tf says why); the calling root sets the upper bounds.
terraform {
  required_version = ">= 1.9.0"

  required_providers {
    google = {
      source  = "hashicorp/google"
      version = ">= 8.0"
    }
    # time_sleep: the wait after enabling the APIs (main.tf).
    time = {
      source  = "hashicorp/time"
      version = ">= 0.13"
    }
  }
}
