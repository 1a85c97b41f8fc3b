"""CKV_SDD_2: the function takes internal traffic only and runs as an explicit service account."""

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


class FunctionInternalOnly(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Cloud Run functions (gen2) accept internal traffic only and run as a dedicated service account",
            id="CKV_SDD_2",
            categories=[CheckCategories.NETWORKING],
            supported_resources=["google_cloudfunctions2_function"],
        )

    def scan_resource_conf(self, conf):
        service = _block(conf, "service_config")
        if service is None:
            return CheckResult.FAILED  # defaults: ALLOW_ALL, default compute service account
        if _value(service, "ingress_settings") != "ALLOW_INTERNAL_ONLY":
            return CheckResult.FAILED
        if _value(service, "service_account_email") in (None, ""):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = FunctionInternalOnly()
