"""Custom checkov checks for the scheduled-dedup Terraform (see README.md); checkov loads every module here."""
