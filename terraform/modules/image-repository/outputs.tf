output "id" {
  description = "projects/P/locations/L/repositories/R: what build_config.docker_repository takes."
  value       = google_artifact_registry_repository.this.id
}

output "repository_id" {
  description = "The repository's id."
  value       = google_artifact_registry_repository.this.repository_id
}

output "writer_members" {
  description = "The members granted roles/artifactregistry.writer, by key (known once the grants are made: a wait can follow them)."
  value       = { for key, grant in google_artifact_registry_repository_iam_member.writers : key => grant.member }
}
