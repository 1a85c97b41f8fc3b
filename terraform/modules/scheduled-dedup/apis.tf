# The project's services are enabled, and waited for, by ../scheduled-dedup-project: module.project (project.tf), or a
# team bake's bootstrap, run by the project owner before any deploy. This node stands for "the APIs are ready":
# everything here that calls one of them depends on it, not on module.project as a whole (which takes the
# accounts this module makes: a cycle), and the ordering test finds the wait behind it (test_graph_ordering, on
# every bake's `terraform graph`).
resource "terraform_data" "apis" {
  input = local.makes_project ? module.project[0].apis_ready : "made by the project owner"
}
