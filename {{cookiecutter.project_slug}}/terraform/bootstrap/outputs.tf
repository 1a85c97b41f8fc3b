output "workload_identity_provider" {
  description = "Full name of the provider: the repository variable GCP_WORKLOAD_IDENTITY_PROVIDER that .github/workflows/ci.yml passes to google-github-actions/auth."
  value       = google_iam_workload_identity_pool_provider.github.name
}

output "planner_service_account_email" {
  description = "The account pull request plans run as (read-only): the repository variable GCP_PLANNER_SERVICE_ACCOUNT."
  value       = google_service_account.planner.email
}

output "deployer_service_account_email" {
  description = "The account applies on main run as (the production environment only): the repository variable GCP_DEPLOYER_SERVICE_ACCOUNT."
  value       = google_service_account.deployer.email
}

output "state_bucket" {
  description = "Bucket of ../backend.tf."
  value       = local.state_bucket
}

output "workload_service_account_emails" {
  description = "The function's accounts (the deployer may act as exactly these); ../main.tf names the same emails from config.yaml."
  value       = { for key, account in google_service_account.workload : key => account.email }
}

output "images_repository" {
  description = "The function's image repository; ../main.tf names the same repository from config.yaml (images_repository)."
  value       = module.images.id
}

output "source_bucket" {
  description = "The function's source bucket (module \"project\"); ../main.tf names the same bucket from config.yaml, and the deployer writes only its objects."
  value       = module.project.source_bucket
}
