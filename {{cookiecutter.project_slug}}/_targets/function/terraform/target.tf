# The function target: the handler runs the work itself, so main.tf's module call gets nothing besides config.yaml's.
locals {
  target_function           = {}
  target_ttl_collections    = []
  target_apis               = []
  target_follows_executions = false
  target_project_grants     = {}
  target_accounts           = {}
}
