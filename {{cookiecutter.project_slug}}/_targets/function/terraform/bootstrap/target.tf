# The function target's part of the bootstrap (main.tf's local.bootstrap_target_* values): nothing beyond the
# function's, which main.tf holds for every target.
locals {
  bootstrap_target_accounts             = {}
  bootstrap_target_deployer_permissions = []
  bootstrap_target_planner_permissions  = []
  bootstrap_target_apis                 = []
  bootstrap_target_grants               = {}
}
