# The function target: the handler runs the work itself, so the core module gets nothing besides
# config.yaml's (main.tf reads the local.target_* values, which each target's own target.tf defines).
locals {
  target_function           = {}
  target_ttl_collections    = []
  target_apis               = []
  target_follows_executions = false
  target_project_grants     = {}
  target_accounts           = {}
}
