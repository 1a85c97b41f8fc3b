"""`make smoke`: is the deployed project alive? One command, a clear PASS or FAIL.

1. a Force run of one job (Cloud Scheduler `jobs.run`: the same path as the console's button, so it also
   proves the Scheduler job, its OIDC token, the invoker grant and the ingress);
2. its outcome line, read back from Cloud Logging (the function ran our code and logged one line);
3. its run record in Firestore (the claim protocol wrote and finished it);
4. the TTL policy on `expire_at` is ACTIVE (old records are deleted: storage stays bounded);
5. the alert policies this project's Terraform made are there and enabled.

Credentials: Application Default Credentials (`gcloud auth application-default login`), with the roles
docs/operations.md lists for `make smoke`. Every Google call is plain REST, so a test points them at a local
stand-in (SMOKE_API_ROOT) and the record read at the Firestore emulator.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: the protocol modules
from runs import UNAVAILABLE, BadArgument, ledger, selected_jobs  # noqa: E402  (the tools' one resolver, one ledger)

import dedup  # noqa: E402
import schedules  # noqa: E402
from outcomes import Misconfigured  # noqa: E402
from settings import DedupConfig  # noqa: E402

# The REST roots of the four APIs. One override for tests: every call goes to a local stand-in.
API_ROOTS = {
    # POST {root}/v1/{name}:run - https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs/run
    "scheduler": "https://cloudscheduler.googleapis.com",
    # POST {root}/v2/entries:list - https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list
    "logging": "https://logging.googleapis.com",
    # GET {root}/v1/{field name} - Field.ttlConfig.state: CREATING, ACTIVE, NEEDS_REPAIR
    # (https://firebase.google.com/docs/firestore/reference/rest/v1/projects.databases.collectionGroups.fields)
    "firestore": "https://firestore.googleapis.com",
    # GET {root}/v3/projects/P/alertPolicies - https://cloud.google.com/monitoring/api/ref_v3/rest/v3/projects.alertPolicies/list
    "monitoring": "https://monitoring.googleapis.com",
}
# Cloud Logging shows an entry within seconds, but its documented ingestion delay can reach a minute.
LOG_WAIT_SECONDS = 120.0
POLL_SECONDS = 5.0
# The label the module puts on everything it makes (terraform/modules/scheduled-dedup/main.tf, local.labels).
LABEL = "scheduled-dedup"
# The outcome lines that prove a Force run reached the work (main.py's ANSWERS names them). duplicate: an earlier
# smoke's Force run of the same slot ran it; that still proves Scheduler -> function -> Firestore.
ANSWERED = ("processed", "duplicate")


class SmokeError(Exception):
    """A step failed; the message says which and why, in one line."""


class Apis:
    """The few REST calls of the steps: with Application Default Credentials, or plainly to SMOKE_API_ROOT."""

    def __init__(self) -> None:
        root = os.environ.get("SMOKE_API_ROOT")
        self.roots = dict.fromkeys(API_ROOTS, root.rstrip("/")) if root else API_ROOTS
        self.session = requests.Session() if root else google_session()

    def call(self, method: str, api: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.roots[api]}/{path}"
        response = self.session.request(method, url, json=body, timeout=30)
        if response.status_code >= 400:
            raise SmokeError(f"{method} {url} answered {response.status_code}: {' '.join(response.text.split())[:200]}")
        return response.json() if response.content else {}


def google_session() -> requests.Session:
    """An authorized requests session from Application Default Credentials, or one line naming the fix."""
    import google.auth
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except google.auth.exceptions.DefaultCredentialsError:
        raise SmokeError("no Google credentials: run `gcloud auth application-default login` first") from None
    return AuthorizedSession(credentials)


def step(name: str, probe: Callable[[], tuple[bool, str]]) -> bool:
    """Run one step (a SmokeError or an unreachable Firestore is its failure) and print its line; True if it passed."""
    try:
        ok, detail = probe()
    except (SmokeError, *UNAVAILABLE) as error:
        ok, detail = False, str(error)
    print(f"{'PASS' if ok else 'FAIL'}  {name:<15} {detail}", flush=True)
    return ok


def run_smoke(apis: Apis, config: DedupConfig, job_name: str, log_wait: float) -> list[bool]:
    """The five steps in order, whether each passed; a step an earlier failure leaves nothing to check fails."""
    # A Force run sends the job's next fire time (Google's guide); the line of that run is the one to read.
    # `since` allows for a few seconds between this machine's clock and the function's.
    since = dedup.utcnow() - dt.timedelta(seconds=5)
    schedule_time = schedules.next_fire_after(config.jobs[job_name].fire_rule, since)
    resource = f"projects/{config.project}/locations/{config.location}/jobs/{job_name}"
    passed: list[bool] = []
    line: dict = {}

    def force_run() -> tuple[bool, str]:
        apis.call("POST", "scheduler", f"v1/{resource}:run", {})
        return True, f"{resource}:run accepted"

    def outcome_line() -> tuple[bool, str]:
        if not passed[0]:
            return False, "skipped: no Force run"
        log_filter = (
            f'jsonPayload.job="{job_name}" AND jsonPayload.schedule_time="{schedule_time.isoformat()}" '
            f'AND jsonPayload.outcome:* AND timestamp>="{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
        )
        body = {"resourceNames": [f"projects/{config.project}"], "filter": log_filter, "orderBy": "timestamp desc"}
        deadline = time.monotonic() + log_wait
        while not (entries := apis.call("POST", "logging", "v2/entries:list", body).get("entries")):
            if time.monotonic() >= deadline:
                wanted = f"{job_name} at {schedule_time.isoformat()}"
                return False, f"no outcome line of {wanted} in Cloud Logging after {log_wait:.0f} s"
            time.sleep(POLL_SECONDS)
        line.update(entries[0].get("jsonPayload", {}))
        detail = f"outcome={line.get('outcome')} http_status={line.get('http_status')} run_id={line.get('run_id')}"
        return line.get("outcome") in ANSWERED, f"{detail}: {line.get('message', '')}"

    def run_record() -> tuple[bool, str]:
        if not line.get("run_id"):
            return False, "skipped: no run_id from an outcome line"
        status = (ledger(config).read_runs([line["run_id"]]).get(line["run_id"]) or {}).get("status")
        return status == dedup.Status.COMPLETED, f"{config.collection}/{line['run_id']} status={status}"

    def ttl_policy() -> tuple[bool, str]:
        field = f"{config.database_name}/collectionGroups/{config.collection}/fields/expire_at"
        state = apis.call("GET", "firestore", f"v1/{field}").get("ttlConfig", {}).get("state", "none")
        return state == "ACTIVE", f"{config.collection}.expire_at ttlConfig.state={state}"

    def alert_policies() -> tuple[bool, str]:
        slug = config.audit_job.removesuffix("_audit")
        query = urllib.parse.urlencode({"filter": f'user_labels."{LABEL}" = "{slug}"'})
        path = f"v3/projects/{config.project}/alertPolicies?{query}"
        policies = apis.call("GET", "monitoring", path).get("alertPolicies", [])
        disabled = [policy.get("displayName", "?") for policy in policies if not policy.get("enabled", False)]
        detail = f"; disabled: {', '.join(disabled)}" if disabled else ", all enabled"
        return bool(policies) and not disabled, f"{len(policies)} alert policies labelled {LABEL}={slug}{detail}"

    probes = {"force run": force_run, "outcome line": outcome_line, "run record": run_record}
    for name, probe in {**probes, "TTL policy": ttl_policy, "alert policies": alert_policies}.items():
        passed.append(step(name, probe))
    return passed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", help="job id or Scheduler job name (default: the first job)")
    parser.add_argument("--log-wait", type=float, default=LOG_WAIT_SECONDS, help="seconds to wait for the log line")
    args = parser.parse_args(argv)
    try:
        config = DedupConfig.from_env()
        job_name = min(selected_jobs(config, args.job), default=None)
        if job_name is None:
            raise SmokeError("no job to Force-run: config.yaml (or DEDUP_JOBS) has none")
        passed = run_smoke(Apis(), config, job_name, args.log_wait)
    except (SmokeError, BadArgument, Misconfigured) as error:
        print(f"smoke: FAIL ({error})", file=sys.stderr)
        return 1
    print(f"smoke: {'PASS' if all(passed) else 'FAIL'} ({sum(passed)}/{len(passed)} steps)")
    return 0 if all(passed) else 1


if __name__ == "__main__":
    sys.exit(main())
