

  assert {
    condition     = length([for name in keys(module.scheduled_dedup.function_environment_variables) : name if startswith(name, "PROXY_")]) == 0
    error_message = "A target=function bake starts nothing: its function has no PROXY_* name."
  }