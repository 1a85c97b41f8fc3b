"""`make smoke`: is the deployed project alive? One command, a clear PASS or FAIL.

1. a Force run of one job (Cloud Scheduler `jobs.run`: the same path as the console's button, so it also
   proves the Scheduler job, its OIDC token, the invoker grant and the ingress);
2. its outcome line, read back from Cloud Logging (the function ran our code and logged one line);
3. its run record in Firestore (the claim protocol wrote and finished it);
4. the TTL policy on `expire_at` is ACTIVE (old records are deleted: storage stays bounded);
5. the alert policies this project's Terraform made are there and enabled.

Credentials: Application Default Credentials (`gcloud auth application-default login`), with the roles
docs/operations.md lists for `make smoke`. Every Google call is plain REST, so a test
points them at a local stand-in (SMOKE_API_ROOT) and the record read at the Firestore emulator.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import os
import sys
import time
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: the protocol modules
from runs import BadArgument, selected_jobs  # noqa: E402  (the tools' one job resolver)

import dedup  # noqa: E402
import schedules  # noqa: E402
from ledger import RunLedger  # noqa: E402
from outcomes import Misconfigured, StoreUnavailable  # noqa: E402
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
# The outcome lines that prove a Force run reached the work (main.py's ANSWERS names them).
ANSWERED = ("processed", "duplicate")


class SmokeError(Exception):
    """A step failed; the message says which and why, in one line."""


@dataclasses.dataclass(frozen=True)
class Step:
    name: str
    ok: bool
    detail: str


def api_roots(environ=os.environ) -> dict[str, str]:
    root = environ.get("SMOKE_API_ROOT")
    return dict.fromkeys(API_ROOTS, root.rstrip("/")) if root else dict(API_ROOTS)


def google_session():
    """An authorized requests session from Application Default Credentials, or one line naming the fix."""
    import google.auth
    import google.auth.exceptions
    from google.auth.transport.requests import AuthorizedSession

    try:
        credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    except google.auth.exceptions.DefaultCredentialsError:
        raise SmokeError("no Google credentials: run `gcloud auth application-default login` first") from None
    return AuthorizedSession(credentials)


class Apis:
    """The few REST calls the smoke test makes; `session` is a requests.Session (authorized, or plain for tests)."""

    def __init__(self, session, roots: dict[str, str]) -> None:
        self.session = session
        self.roots = roots

    def _json(self, method: str, api: str, path: str, body: dict | None = None) -> dict:
        url = f"{self.roots[api]}/{path}"
        response = self.session.request(method, url, json=body, timeout=30)
        if response.status_code >= 400:
            text = " ".join(response.text.split())[:200]
            raise SmokeError(f"{method} {url} answered {response.status_code}: {text}")
        return response.json() if response.content else {}

    def force_run(self, job_resource: str) -> dict:
        return self._json("POST", "scheduler", f"v1/{job_resource}:run", {})

    def outcome_lines(self, project: str, job_name: str, schedule_time: dt.datetime, since: dt.datetime) -> list[dict]:
        log_filter = (
            f'jsonPayload.job="{job_name}" AND jsonPayload.schedule_time="{schedule_time.isoformat()}" '
            f'AND jsonPayload.outcome:* AND timestamp>="{since.strftime("%Y-%m-%dT%H:%M:%SZ")}"'
        )
        body = {"resourceNames": [f"projects/{project}"], "filter": log_filter, "orderBy": "timestamp desc"}
        return self._json("POST", "logging", "v2/entries:list", body).get("entries", [])

    def ttl_state(self, config: DedupConfig) -> str:
        field = f"{config.database_name}/collectionGroups/{config.collection}/fields/expire_at"
        return self._json("GET", "firestore", f"v1/{field}").get("ttlConfig", {}).get("state", "none")

    def alert_policies(self, project: str, slug: str) -> list[dict]:
        query = urllib.parse.urlencode({"filter": f'user_labels."{LABEL}" = "{slug}"'})
        return self._json("GET", "monitoring", f"v3/projects/{project}/alertPolicies?{query}").get("alertPolicies", [])


def wait_for(read: Callable[[], list[dict]], seconds: float, sleep=time.sleep, clock=time.monotonic) -> list[dict]:
    deadline = clock() + seconds
    while True:
        found = read()
        if found or clock() >= deadline:
            return found
        sleep(POLL_SECONDS)


def run_smoke(
    apis: Apis,
    config: DedupConfig,
    job_name: str,
    slug: str,
    read_record: Callable[[str], dict | None],
    log_wait: float = LOG_WAIT_SECONDS,
    sleep=time.sleep,
) -> list[Step]:
    """The five steps in order; a step that cannot start because an earlier one failed is reported as such."""
    steps: list[Step] = []

    def step(name: str, ok: bool, detail: str) -> bool:
        steps.append(Step(name, ok, detail))
        return ok

    # A Force run sends the job's next fire time (Google's guide); the line of that run is the one to read.
    # `since` allows for a few seconds between this machine's clock and the function's.
    since = dedup.utcnow() - dt.timedelta(seconds=5)
    schedule_time = schedules.next_fire_after(config.jobs[job_name].fire_rule, since)
    resource = f"projects/{config.project}/locations/{config.location}/jobs/{job_name}"
    try:
        apis.force_run(resource)
        step("force run", True, f"{resource}:run accepted")
    except SmokeError as error:
        step("force run", False, str(error))

    run_id = None
    if steps[-1].ok:
        try:
            lines = wait_for(
                lambda: apis.outcome_lines(config.project, job_name, schedule_time, since), log_wait, sleep=sleep
            )
        except SmokeError as error:
            step("outcome line", False, str(error))
        else:
            if not lines:
                step(
                    "outcome line",
                    False,
                    f"no outcome line of {job_name} at {schedule_time.isoformat()} in Cloud Logging"
                    f" after {log_wait:.0f} s",
                )
            else:
                payload = lines[0].get("jsonPayload", {})
                run_id = payload.get("run_id")
                outcome = payload.get("outcome")
                # duplicate: an earlier smoke's Force run of the same slot already ran; the answer still
                # proves Scheduler -> function -> Firestore, and the record step shows how it ended.
                ok = outcome in ANSWERED
                detail = f"outcome={outcome} http_status={payload.get('http_status')} run_id={run_id}"
                step("outcome line", ok, f"{detail}: {payload.get('message', '')}")
    if run_id:
        record = read_record(run_id)
        status = (record or {}).get("status")
        step("run record", status == dedup.Status.COMPLETED, f"{config.collection}/{run_id} status={status}")
    else:
        step("run record", False, "skipped: no run_id from an outcome line")

    try:
        state = apis.ttl_state(config)
        step("TTL policy", state == "ACTIVE", f"{config.collection}.expire_at ttlConfig.state={state}")
    except SmokeError as error:
        step("TTL policy", False, str(error))

    try:
        policies = apis.alert_policies(config.project, slug)
        disabled = [p.get("displayName", "?") for p in policies if not p.get("enabled", False)]
        detail = f"{len(policies)} alert policies labelled {LABEL}={slug}" + (
            f"; disabled: {', '.join(disabled)}" if disabled else ", all enabled"
        )
        step("alert policies", bool(policies) and not disabled, detail)
    except SmokeError as error:
        step("alert policies", False, str(error))
    return steps


def report(steps: list[Step], out=sys.stdout) -> int:
    for item in steps:
        print(f"{'PASS' if item.ok else 'FAIL'}  {item.name:<15} {item.detail}", file=out)
    passed = all(item.ok for item in steps)
    print(f"smoke: {'PASS' if passed else 'FAIL'} ({sum(s.ok for s in steps)}/{len(steps)} steps)", file=out)
    return 0 if passed else 1


def record_reader(config: DedupConfig) -> Callable[[str], dict | None]:
    ledger = RunLedger(config)
    return lambda run_id: ledger.read_runs([run_id]).get(run_id)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--job", help="job id or Scheduler job name (default: the first job)")
    parser.add_argument("--log-wait", type=float, default=LOG_WAIT_SECONDS, help="seconds to wait for the log line")
    args = parser.parse_args(argv)
    try:
        config = DedupConfig.from_env()
        job_name = sorted(selected_jobs(config, args.job))[0]
        slug = config.audit_job.removesuffix("_audit")
        # No credentials against the tests' local stand-in (SMOKE_API_ROOT).
        session = google_session() if not os.environ.get("SMOKE_API_ROOT") else requests.Session()
        steps = run_smoke(Apis(session, api_roots()), config, job_name, slug, record_reader(config),
                          log_wait=args.log_wait)  # fmt: skip
    except (SmokeError, BadArgument, Misconfigured, StoreUnavailable) as error:
        print(f"smoke: FAIL ({error})", file=sys.stderr)
        return 1
    return report(steps)


if __name__ == "__main__":
    sys.exit(main())
