output "apis_ready" {
  description = "Known once the project's APIs have propagated: what calls them depends on it."
  value       = time_sleep.apis.id
}

output "source_bucket" {
  description = "The function's source bucket (<project>-<slug>-src), which ../scheduled-dedup writes the source zip to."
  value       = google_storage_bucket.source.name
}

output "firestore_database" {
  description = "The database id of the run records, taken from the created database when there is one (an implicit dependency)."
  value       = var.firestore.create_database ? google_firestore_database.this[0].name : var.firestore.database
}

output "grants_ready" {
  description = "The project-level grants (the build account's and the runtime's): what runs as those accounts waits for their propagation after this."
  value = join(",", sort(concat(
    [for grant in google_project_iam_member.build : "${grant.role}${jsonencode(grant.condition)}"],
    [google_project_iam_member.datastore_user.member],
    [for key, grant in merge(google_project_iam_member.database_grants, google_project_iam_member.grants) : "${key}=${grant.role}"],
  )))
}

output "apis" {
  description = "The project services the module enables (its own and var.apis), known at plan: a team bake's bootstrap imports them when it adopts a bake applied before."
  value       = var.enable_apis ? sort(local.apis) : []
}

output "grants" {
  description = "var.grants as given (key => role, member, database), known at plan: a team bake's bootstrap imports them when it adopts a bake applied before."
  value       = var.grants
}

output "cloud_tasks_audit_config" {
  description = "Cloud Tasks' audit configuration (service, audit_log_config), or null without data_access_logs."
  value       = one(google_project_iam_audit_config.cloud_tasks[*])
}

output "bucket" {
  description = "The source bucket as made (its access settings: ../scheduled-dedup's tests assert them)."
  value       = google_storage_bucket.source
}

output "database" {
  description = "The database as made, or null with create_database = false."
  value       = one(google_firestore_database.this[*])
}

output "iam_members" {
  description = "Every project-level grant the module makes: \"build <role>\", runtime, and var.grants' keys => the grant (role, member, condition)."
  value = merge(
    { for role, grant in google_project_iam_member.build : "build ${role}" => grant },
    { runtime = google_project_iam_member.datastore_user },
    google_project_iam_member.database_grants,
    google_project_iam_member.grants,
  )
}
