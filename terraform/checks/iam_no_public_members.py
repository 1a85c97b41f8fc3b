"""CKV_SDD_3: no IAM grant to allUsers or allAuthenticatedUsers, on any resource type."""

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

PUBLIC = ("allUsers", "allAuthenticatedUsers")


def _strings(value):
    """Every string inside a parsed value (lists and dicts of any depth)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)


class NoPublicIamMembers(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="No IAM member, binding or policy grants to allUsers or allAuthenticatedUsers",
            id="CKV_SDD_3",
            categories=[CheckCategories.IAM],
            supported_resources=[
                "google_*_iam_member",
                "google_*_iam_binding",
                "google_*_iam_policy",
                "google_*_iam_member_remove",
            ],
        )

    def scan_resource_conf(self, conf):
        fields = [conf.get(key) for key in ("member", "members", "policy_data") if key in conf]
        for text in _strings(fields):
            if any(public in text for public in PUBLIC):
                return CheckResult.FAILED
        return CheckResult.PASSED


check = NoPublicIamMembers()
