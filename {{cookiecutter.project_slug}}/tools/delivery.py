"""Cloud Scheduler-like deliveries, for `runs.py fire` and `runs.py backfill`: the headers Scheduler sends,
an identity token for a deployed function, one POST.

Without a URL a delivery goes to the local dev server (`make dev`) with no credentials; with one (a deployed
function) it carries `Authorization: Bearer <identity token>`, as Scheduler's OIDC token does.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: the protocol modules
import dedup  # noqa: E402
from keys import JOB_NAME_HEADER, LOCATION_HEADER, PROJECT_HEADER, SCHEDULE_TIME_HEADER  # noqa: E402


def minute_now(now: dt.datetime | None = None) -> str:
    """Now in UTC, rounded down to the minute, as RFC 3339 (2026-10-16T12:00:00Z)."""
    now = (now or dedup.utcnow()).astimezone(dt.UTC)
    return now.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_headers(job: str, time: str, project: str | None = None, location: str | None = None) -> dict[str, str]:
    headers = {JOB_NAME_HEADER: job, SCHEDULE_TIME_HEADER: time}
    if project:
        headers[PROJECT_HEADER] = project
    if location:
        headers[LOCATION_HEADER] = location
    return headers


def identity_token(audience: str, impersonate: str | None) -> str:
    """An OIDC identity token from gcloud; with a service account to impersonate, for `audience`."""
    command = ["gcloud", "auth", "print-identity-token"]
    if impersonate:  # --audiences works only for service accounts, not user credentials
        command += [f"--impersonate-service-account={impersonate}", f"--audiences={audience}", "--include-email"]
    try:
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout.strip()
    except FileNotFoundError:
        raise SystemExit("gcloud is not installed: it is needed for an identity token when --url is given") from None
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"gcloud auth print-identity-token failed: {error.stderr.strip()}") from None


def post(url: str, headers: dict[str, str], timeout: float) -> tuple[int, str]:
    request = urllib.request.Request(url, data=b"", headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(errors="replace")
