# Where the function's images go, and how many stay. Every deploy builds a new image (and updates a
# build cache image) and pushes it to build_config.docker_repository; left unset, Cloud Functions
# creates and uses a repository named gcf-artifacts in the region (Cloud Functions API, BuildConfig
# docker_repository: "If unspecified, GCF will create and use a repository named 'gcf-artifacts'"),
# which has no cleanup policy: its storage grows with every deploy. The module's own repository
# keeps the newest var.function.images_kept versions of each image and deletes the older ones
# (Artifact Registry "Cleanup policies overview": a keep policy only exempts versions a delete policy
# would delete, and a version both match is kept; the deletions are made by the Artifact Registry
# service agent, which holds artifactregistry.versions.delete ("Configure cleanup policies")).

resource "google_artifact_registry_repository" "images" {
  # checkov:skip=CKV_GCP_84: Google-managed encryption, as the gcf-artifacts repository it replaces and the function's source bucket have; a customer-managed key would need a KMS key ring and grants this module does not own.
  project = var.project_id
  # The function's region: "Cross-location repositories are not supported. Repository format must
  # be 'DOCKER'." (BuildConfig.docker_repository)
  location      = var.region
  repository_id = "${var.slug}-images"
  format        = "DOCKER"
  description   = "${var.slug}: the function's images; the newest ${var.function.images_kept} versions of each stay."
  labels        = local.labels

  # The policies act; a dry run would only log what they would delete.
  cleanup_policy_dry_run = false

  cleanup_policies {
    id     = "delete-older-versions"
    action = "DELETE"
    condition {
      tag_state = "ANY"
      # A day's margin for a build that is pushing while the policy runs. In seconds, the form the
      # API answers (a protobuf Duration): "1d" is refused or, accepted by the provider, differs from
      # the API's "86400s" at every plan and replaces the repository (terraform-provider-google
      # issue 20796; e2b-dev/infra PR 2738 shows the replacement).
      older_than = "86400s"
    }
  }

  cleanup_policies {
    id     = "keep-newest-versions"
    action = "KEEP"
    most_recent_versions {
      keep_count = var.function.images_kept
    }
  }

  depends_on = [time_sleep.apis]
}
