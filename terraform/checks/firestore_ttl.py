"""CKV_SDD_4: the run records' expire_at field carries a TTL policy, or they are never deleted."""

import os
import sys

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck

# checkov loads each file of this folder on its own: make its siblings importable.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hcl_values import first_value  # noqa: E402

TTL_FIELD = "expire_at"


class FirestoreTtlOnExpireAt(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="A Firestore field on expire_at carries a TTL policy (ttl_config)",
            id="CKV_SDD_4",
            categories=[CheckCategories.GENERAL_SECURITY],
            supported_resources=["google_firestore_field"],
        )

    def scan_resource_conf(self, conf):
        if first_value(conf, "field") != TTL_FIELD:
            return CheckResult.PASSED
        # `ttl_config {}` parses as a list holding one (empty) block; absent means no TTL.
        return CheckResult.PASSED if "ttl_config" in conf and conf["ttl_config"] != [] else CheckResult.FAILED


check = FirestoreTtlOnExpireAt()
