"""CKV_SDD_5: roles/datastore.user on a project is narrowed to one database by an IAM condition."""

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck


def _block(conf, name):
    value = conf.get(name) if isinstance(conf, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else None


def _value(conf, name):
    value = conf.get(name) if isinstance(conf, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value


class DatastoreUserHasDatabaseCondition(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="roles/datastore.user on a project is narrowed to one Firestore database by an IAM condition",
            id="CKV_SDD_5",
            categories=[CheckCategories.IAM],
            supported_resources=["google_project_iam_member", "google_project_iam_binding"],
        )

    def scan_resource_conf(self, conf):
        if _value(conf, "role") != "roles/datastore.user":
            return CheckResult.PASSED
        condition = _block(conf, "condition")
        expression = _value(condition, "expression") if condition else None
        # checkov leaves interpolations inside the expression unresolved, so the database itself
        # cannot be compared here (the baked project's terraform test does that); require the shape.
        if not isinstance(expression, str) or "resource.name" not in expression:
            return CheckResult.FAILED
        return CheckResult.PASSED


check = DatastoreUserHasDatabaseCondition()
