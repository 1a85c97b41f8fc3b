"""Deliver a run through the project's Cloud Tasks queue: re-runs and backfills (scheduled_dedup_tools.runs), the
audit's catch-up.

Why Cloud Tasks (docs/schedules-and-manual-runs.md, "Re-runs, backfill and catch-up"): the function's ingress is
internal only, and Cloud Run's "Restrict network ingress" page (cloud.google.com/run/docs/securing/ingress) and
Cloud Run functions' "Configure network settings" admit Cloud Tasks of the same project as internal traffic, so
a person with roles/cloudtasks.enqueuer on the queue reaches the function from a laptop, with no VM in the VPC.
The queue routes every task itself (the module's tasks.tf: queue-level `http_target` with the function's URI and
the invoker's OIDC token; Cloud Tasks "Configure queue routing": queue-level routing and authentication override
the task's), so a task names only the run: the headers a Scheduler delivery of it would carry.

A task's name is its dedup key in Cloud Tasks: a second task of the same name is refused (ALREADY_EXISTS), so a
backfill or catch-up asked for twice is queued once; the function's claim keeps it to one execution anyway.
"""

from __future__ import annotations

import datetime as dt
import os
import re
from typing import TYPE_CHECKING

from google.api_core import exceptions as api_exceptions
from google.api_core.client_options import ClientOptions
from google.auth.credentials import AnonymousCredentials

from keys import Rerun, RunKey, delivery_headers

if TYPE_CHECKING:
    from google.cloud import tasks_v2

# Where a local stand-in of the Cloud Tasks API listens (host:port, plain HTTP, like FIRESTORE_EMULATOR_HOST):
# a stand-in the protocol's proofs run. Unset: the real API with your credentials.
EMULATOR_ENV = "CLOUD_TASKS_EMULATOR_HOST"
# The API requires a task URL; the queue's uri_override (enforce mode ALWAYS) replaces it with the function's.
# An unresolvable name, so a task that somehow escaped the override reaches nothing.
QUEUE_ROUTED_URL = "https://queue-routed.invalid/"
# Cloud Tasks task ids: letters, digits, hyphens, underscores, at most 500 characters (Task.name).
TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,500}")
CALL_TIMEOUT_SECONDS = 30.0


def client() -> tasks_v2.CloudTasksClient:
    # Imported here: the client library's 0.2-0.3 s of imports would delay every instance's start (the audit imports
    # this module), where only a catch-up, a re-run or a backfill uses it.
    from google.cloud import tasks_v2

    host = os.environ.get(EMULATOR_ENV)
    if not host:
        return tasks_v2.CloudTasksClient()
    options = ClientOptions(api_endpoint=f"http://{host}")
    return tasks_v2.CloudTasksClient(transport="rest", credentials=AnonymousCredentials(), client_options=options)


def task_id(unique: str, kind: str) -> str:
    """A task's id: what makes it unique (a run id, a sha256; a re-run id, random) first, then its kind. Cloud Tasks
    dedups by id at a cost: "Using hashed strings for the task ID or for the prefix of the task ID is recommended"
    (gcloud tasks create-http-task, TASK_ID)."""
    return f"{unique}-{kind}"


def enqueue_run(queue: str, key: RunKey, kind: str, deadline: dt.timedelta, rerun: Rerun | None = None) -> bool:
    """Queue one delivery of the run `key` (a re-run of it if `rerun`) as task `<run id or re-run id>-<kind>`, with
    its job's attempt deadline (config.Config.attempt_deadline_for)."""
    name = task_id(rerun.rerun_id if rerun else key.run_id, kind)
    return enqueue(queue, name, delivery_headers(key, rerun), deadline)


def enqueue(
    queue: str,
    name: str,
    headers: dict[str, str],
    deadline: dt.timedelta,
    tasks: tasks_v2.CloudTasksClient | None = None,
) -> bool:
    """Queue one delivery as task `name` (a task_id); True if queued now, False if one of that id was queued before.
    `deadline`: how long the queue waits for the answer, the job's attempt deadline as Scheduler's: Cloud Tasks'
    default for an HTTP task is 10 minutes (in [15 s, 30 min]: Task.dispatch_deadline,
    cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks), and a longer job's task would
    be cancelled and retried while its work still runs."""
    from google.cloud import tasks_v2  # client()'s reason

    if not TASK_ID.fullmatch(name):
        raise ValueError(f"task id {name!r}: must be 1-500 letters, digits, '-', '_'")
    task = tasks_v2.Task(
        name=f"{queue}/tasks/{name}",
        http_request=tasks_v2.HttpRequest(http_method=tasks_v2.HttpMethod.POST, url=QUEUE_ROUTED_URL, headers=headers),
        dispatch_deadline=deadline,
    )
    try:
        (tasks or client()).create_task(parent=queue, task=task, timeout=CALL_TIMEOUT_SECONDS)
    except api_exceptions.Conflict:  # ALREADY_EXISTS (409 over REST): the same delivery was queued already
        return False
    return True
