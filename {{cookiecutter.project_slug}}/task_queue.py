"""Deliver a run through the project's Cloud Tasks queue: re-runs and backfills (scheduled_dedup_tools.runs), the
audit's catch-up.

Why Cloud Tasks (docs/schedules-and-manual-runs.md): the function's ingress is internal only, and Cloud Run's
"Restrict network ingress" (cloud.google.com/run/docs/securing/ingress) admits Cloud Tasks of the same project as
internal, so a person with roles/cloudtasks.enqueuer reaches the function from a laptop. The queue routes every task
(the module's tasks.tf; Cloud Tasks "Configure queue routing": queue-level routing and authentication override the
task's), so a task carries only the run's delivery headers. A task's name is its dedup key (ALREADY_EXISTS): a
backfill or catch-up asked for twice is queued once."""

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

# A local stand-in of the Cloud Tasks API (host:port, plain HTTP, like FIRESTORE_EMULATOR_HOST); unset: the real API.
EMULATOR_ENV = "CLOUD_TASKS_EMULATOR_HOST"
# The API requires a task URL; the queue's uri_override (ALWAYS) replaces it. Unresolvable: a stray task goes nowhere.
QUEUE_ROUTED_URL = "https://queue-routed.invalid/"
# Cloud Tasks task ids: letters, digits, hyphens, underscores, at most 500 characters (Task.name).
TASK_ID = re.compile(r"[A-Za-z0-9_-]{1,500}")
CALL_TIMEOUT_SECONDS = 30.0


def client() -> tasks_v2.CloudTasksClient:
    # Imported here: its 0.2-0.3 s of imports would delay every instance's start (the audit imports this module).
    from google.cloud import tasks_v2

    host = os.environ.get(EMULATOR_ENV)
    if not host:
        return tasks_v2.CloudTasksClient()
    options = ClientOptions(api_endpoint=f"http://{host}")
    return tasks_v2.CloudTasksClient(transport="rest", credentials=AnonymousCredentials(), client_options=options)


def task_id(unique: str, kind: str) -> str:
    """What makes it unique (a run id, a re-run id) first, then its kind: "Using hashed strings for the task ID or for
    the prefix of the task ID is recommended" (gcloud tasks create-http-task, TASK_ID)."""
    return f"{unique}-{kind}"


def enqueue_run(queue: str, key: RunKey, kind: str, deadline: dt.timedelta, rerun: Rerun | None = None) -> bool:
    """Queue one delivery of the run `key` (a re-run of it if `rerun`) with its job's attempt deadline."""
    name = task_id(rerun.rerun_id if rerun else key.run_id, kind)
    return enqueue(queue, name, delivery_headers(key, rerun), deadline)


def enqueue(queue: str, name: str, headers: dict[str, str], deadline: dt.timedelta) -> bool:
    """Queue one delivery as task `name` (a task_id); True if queued now, False if one of that id was queued before.
    `deadline`: the job's attempt deadline, not Cloud Tasks' 10-minute default for an HTTP task, which would cancel
    and retry a longer job's task while its work runs (Task.dispatch_deadline, in [15 s, 30 min]:
    cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks)."""
    from google.cloud import tasks_v2  # client()'s reason

    if not TASK_ID.fullmatch(name):
        raise ValueError(f"task id {name!r}: must be 1-500 letters, digits, '-', '_'")
    task = tasks_v2.Task(
        name=f"{queue}/tasks/{name}",
        http_request=tasks_v2.HttpRequest(http_method=tasks_v2.HttpMethod.POST, url=QUEUE_ROUTED_URL, headers=headers),
        dispatch_deadline=deadline,
    )
    try:
        client().create_task(parent=queue, task=task, timeout=CALL_TIMEOUT_SECONDS)
    except api_exceptions.Conflict:  # ALREADY_EXISTS (409 over REST): the same delivery was queued already
        return False
    return True
