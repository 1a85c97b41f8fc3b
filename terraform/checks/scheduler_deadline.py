"""CKV_SDD_6: Scheduler jobs set attempt_deadline and retry_config explicitly (never the defaults)."""

from checkov.common.models.enums import CheckCategories, CheckResult
from checkov.terraform.checks.resource.base_resource_check import BaseResourceCheck


class SchedulerJobDeadlineAndRetries(BaseResourceCheck):
    def __init__(self):
        super().__init__(
            name="Cloud Scheduler jobs set attempt_deadline (aligned with the target's timeout) and retry_config",
            id="CKV_SDD_6",
            categories=[CheckCategories.GENERAL_SECURITY],
            supported_resources=["google_cloud_scheduler_job"],
        )

    def scan_resource_conf(self, conf):
        if conf.get("attempt_deadline") in (None, [], [""], [None]):
            return CheckResult.FAILED
        if conf.get("retry_config") in (None, []):
            return CheckResult.FAILED
        return CheckResult.PASSED


check = SchedulerJobDeadlineAndRetries()
