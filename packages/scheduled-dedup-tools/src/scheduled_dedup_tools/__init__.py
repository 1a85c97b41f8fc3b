"""A baked project's deploy-time and operator tools, versioned with the template and pinned by each bake's
requirements-dev.txt at the release its Terraform modules are (README.md). Run in the project's root:
`python -m scheduled_dedup_tools.<tool>` imports the project's own modules (config, ledger, schedules...) from it."""
