"""CKV_SDD_5: roles/datastore.user on a project is narrowed to one database by an IAM condition."""

import os
import sys

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

# checkov loads each file of this folder on its own: make its siblings importable.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hcl_values import first_block, first_value  # noqa: E402


class DatastoreUserHasDatabaseCondition(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="roles/datastore.user on a project is narrowed to one Firestore database by an IAM condition",
            id="CKV_SDD_5",
            categories=[CheckCategories.IAM],
            supported_resources=["google_project_iam_member", "google_project_iam_binding"],
        )

    def scan_resource_conf(self, conf):
        if first_value(conf, "role") != "roles/datastore.user":
            return CheckResult.PASSED
        condition = first_block(conf, "condition")
        expression = first_value(condition, "expression") if condition else None
        # checkov leaves interpolations inside the expression unresolved, so the database itself
        # cannot be compared here (the baked project's terraform test does that); require the shape.
        if not isinstance(expression, str) or "resource.name" not in expression:
            return CheckResult.FAILED
        return CheckResult.PASSED


check = DatastoreUserHasDatabaseCondition()
