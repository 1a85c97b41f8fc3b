"""CKV_SDD_2: the function takes internal traffic only and runs as an explicit service account."""

import os
import sys

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

# checkov loads each file of this folder on its own: make its siblings importable.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hcl_values import first_block, first_value  # noqa: E402


class FunctionInternalOnly(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Cloud Run functions (gen2) accept internal traffic only and run as a dedicated service account",
            id="CKV_SDD_2",
            categories=[CheckCategories.NETWORKING],
            supported_resources=["google_cloudfunctions2_function"],
        )

    def scan_resource_conf(self, conf):
        service = first_block(conf, "service_config")
        if service is None:
            return CheckResult.FAILED  # defaults: ALLOW_ALL, default compute service account
        if first_value(service, "ingress_settings") != "ALLOW_INTERNAL_ONLY":
            return CheckResult.FAILED
        if first_value(service, "service_account_email") in (None, ""):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = FunctionInternalOnly()
