"""CKV_SDD_1: every Cloud Scheduler HTTP target authenticates with an OIDC token."""

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck


def _block(conf, name):
    """The first `name` block of a parsed resource (checkov wraps every value in a list), or None."""
    value = conf.get(name) if isinstance(conf, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value if isinstance(value, dict) else None


def _set(conf, name):
    value = conf.get(name) if isinstance(conf, dict) else None
    if isinstance(value, list):
        value = value[0] if value else None
    return value not in (None, "", [])


class SchedulerJobUsesOidc(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Cloud Scheduler HTTP targets send an OIDC token (service account and audience)",
            id="CKV_SDD_1",
            categories=[CheckCategories.IAM],
            supported_resources=["google_cloud_scheduler_job"],
        )

    def scan_resource_conf(self, conf):
        target = _block(conf, "http_target")
        if target is None:
            return CheckResult.PASSED  # Pub/Sub or App Engine targets: out of this rule's scope
        token = _block(target, "oidc_token")
        if token is None or not _set(token, "service_account_email") or not _set(token, "audience"):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = SchedulerJobUsesOidc()
