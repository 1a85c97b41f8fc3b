"""CKV_SDD_1: every Cloud Scheduler HTTP target authenticates with an OIDC token."""

import os
import sys

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

# checkov loads each file of this folder on its own: make its siblings importable.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hcl_values import first_block, is_set  # noqa: E402


class SchedulerJobUsesOidc(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Cloud Scheduler HTTP targets send an OIDC token (service account and audience)",
            id="CKV_SDD_1",
            categories=[CheckCategories.IAM],
            supported_resources=["google_cloud_scheduler_job"],
        )

    def scan_resource_conf(self, conf):
        target = first_block(conf, "http_target")
        if target is None:
            return CheckResult.PASSED  # Pub/Sub or App Engine targets: out of this rule's scope
        token = first_block(target, "oidc_token")
        if token is None or not is_set(token, "service_account_email") or not is_set(token, "audience"):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = SchedulerJobUsesOidc()
