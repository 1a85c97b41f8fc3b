# Where the function's images go: a Docker repository <slug>-images whose cleanup policies keep the
# newest function.images_kept versions of each image (../image-repository holds the one definition
# and says why; not Cloud Functions' own gcf-artifacts, which has none). A team bake's bootstrap
# root makes it and grants the build account on it (var.images_repository: the deployer then needs
# no Artifact Registry role, which no IAM condition could narrow to one repository); otherwise the
# module makes its own here.

locals {
  makes_images_repository = var.images_repository == null
  # projects/P/locations/R/repositories/REPO, as build_config.docker_repository takes it.
  images_repository = local.makes_images_repository ? module.images[0].id : var.images_repository
}

module "images" {
  source = "../image-repository"
  count  = local.makes_images_repository ? 1 : 0

  project_id    = var.project_id
  location      = var.region
  repository_id = "${var.slug}-images"
  description   = "${var.slug}: the function's images; cleanup policies keep the newest versions of each."
  labels        = local.labels
  images_kept   = var.function.images_kept
  writers       = { build = local.account_members.build }

  depends_on = [terraform_data.apis]
}

# Where these lived before the repository had a module of its own: an applied project keeps them.
moved {
  from = google_artifact_registry_repository.images
  to   = module.images[0].google_artifact_registry_repository.this
}

moved {
  from = google_artifact_registry_repository_iam_member.build_images
  to   = module.images[0].google_artifact_registry_repository_iam_member.writers["build"]
}
