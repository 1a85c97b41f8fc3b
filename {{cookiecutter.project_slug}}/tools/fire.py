"""Send one Cloud Scheduler-like delivery: `make fire JOB=nightly [TIME=...] [URL=...]`.

JOB is a job id of DEDUP_JOBS (as the answers spell it) or a Scheduler job name; a job id is sent as
its Scheduler job name ("<slug>-nightly"), as Scheduler sends it, so that the run is keyed, checked
and given to the work (context.job_id) exactly as a deployed one.

Without --url it posts to the local dev server (`make dev`) with no credentials. With --url (a
deployed function) it adds `Authorization: Bearer <identity token>` from `gcloud auth
print-identity-token`, as Scheduler's OIDC token does. TIME defaults to now, rounded down to the
minute, in UTC: exactly what Scheduler sends for a cron run due this minute. To run a job by hand
without eating a scheduled run, pick a TIME no schedule uses (docs/schedules-and-manual-runs.md).
"""

from __future__ import annotations

import argparse
import datetime as dt
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: dedup.py
import dedup  # noqa: E402


def minute_now(now: dt.datetime | None = None) -> str:
    """Now in UTC, rounded down to the minute, as RFC 3339 (2026-10-16T12:00:00Z)."""
    now = (now or dedup.utcnow()).astimezone(dt.UTC)
    return now.replace(second=0, microsecond=0).strftime("%Y-%m-%dT%H:%M:%SZ")


def delivery_headers(job: str, time: str, project: str | None = None, location: str | None = None) -> dict[str, str]:
    headers = {dedup.JOB_NAME_HEADER: job, dedup.SCHEDULE_TIME_HEADER: time}
    if project:
        headers[dedup.PROJECT_HEADER] = project
    if location:
        headers[dedup.LOCATION_HEADER] = location
    return headers


def scheduler_job_name(job: str, config: dedup.DedupConfig) -> str:
    """The Scheduler job name of job id `job`; anything else (a Scheduler job name) as it is."""
    return next((name for name, spec in config.jobs.items() if spec.job_id == job), job)


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--job", required=True, help="job id (nightly) or Scheduler job name (X-CloudScheduler-JobName)"
    )
    parser.add_argument("--time", default="", help="schedule time, RFC 3339 (default: now rounded to the minute)")
    parser.add_argument("--url", default="", help="a deployed function's URL (default: the local dev server)")
    parser.add_argument("--port", type=int, default=8080, help="the local dev server's port")
    parser.add_argument("--project", help="X-Scheduler-Project header (default: the function's own project)")
    parser.add_argument("--location", help="X-Scheduler-Location header (default: the function's own region)")
    parser.add_argument("--impersonate", help="service account whose identity token to send (with --url)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds to wait for the answer")
    args = parser.parse_args(argv)

    time = args.time or minute_now()
    try:
        dedup.parse_schedule_time(time)
    except ValueError as error:
        print(f"TIME={time!r}: {error}", file=sys.stderr)
        return 2
    try:
        job = scheduler_job_name(args.job, dedup.DedupConfig.from_env())
    except dedup.Misconfigured as error:  # a DEDUP_* setting: it names itself
        print(error, file=sys.stderr)
        return 2
    headers = delivery_headers(job, time, args.project, args.location)
    url = args.url or f"http://127.0.0.1:{args.port}/"
    if args.url:
        headers["Authorization"] = f"Bearer {identity_token(args.url, args.impersonate)}"
    print(f"==> POST {url}  job={job} schedule_time={time}", flush=True)
    try:
        status, body = post(url, headers, args.timeout)
    except (urllib.error.URLError, OSError) as error:
        print(f"cannot reach {url}: {error} (is `make dev` running?)", file=sys.stderr)
        return 1
    print(f"<== {status} {body.strip()}")
    return 0 if 200 <= status < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
