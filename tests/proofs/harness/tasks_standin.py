"""A local stand-in for one Cloud Tasks queue: the REST API's CreateTask, and delivery of each task to a real server.

Google ships no Cloud Tasks emulator. This serves what task_queue.py uses, over the REST transport of
google-cloud-tasks (CLOUD_TASKS_EMULATOR_HOST): POST /v2/{queue}/tasks with {"task": {...}}. A task name seen
before is refused 409 ALREADY_EXISTS, as Cloud Tasks refuses a duplicate name. Each task is then delivered the
way the deployed queue does (the module's tasks.tf): queue-level routing replaces the task's URL with the
function's and adds the invoker's OIDC token (here a fixed stand-in, which a local functions-framework
server does not check), Cloud Tasks' own headers (X-CloudTasks-*) are added, and a non-2xx answer is retried
up to `max_attempts` times, as the queue's retry_config does. Every attempt is kept in `attempts`.
"""

from __future__ import annotations

import base64
import dataclasses
import http.client
import http.server
import json
import queue as queues
import re
import threading
import time
import urllib.parse

from scheduled_dedup_tools.firestore_emulator import free_port

CREATE_TASK = re.compile(r"/v2/(?P<queue>projects/[^/]+/locations/[^/]+/queues/[^/]+)/tasks")
STANDIN_TOKEN = "standin-oidc-token-of-the-invoker"
# Task.dispatch_deadline of an HTTP task: 10 minutes unless set, and set only within [15 s, 30 min]
# (cloud.google.com/tasks/docs/reference/rest/v2/projects.locations.queues.tasks): an attempt unanswered by then
# is cancelled (here: the connection times out) and retried.
DEFAULT_DISPATCH_DEADLINE, DISPATCH_DEADLINE_RANGE = 600.0, (15.0, 1800.0)


def dispatch_deadline(task: dict) -> float:
    """The task's dispatch deadline in seconds (REST: a duration such as "1800s")."""
    return float(str(task.get("dispatchDeadline", DEFAULT_DISPATCH_DEADLINE)).removesuffix("s"))


@dataclasses.dataclass(frozen=True)
class Attempt:
    task: str
    headers: dict[str, str]
    status: int  # 0: nothing answered


class TasksStandin:
    """One queue `queue` whose tasks all go to `target_url` (queue-level routing), until `close()`."""

    def __init__(self, queue: str, target_url: str, max_attempts: int = 3, backoff: float = 0.2) -> None:
        self.queue, self.target = queue, urllib.parse.urlsplit(target_url)
        self.max_attempts, self.backoff = max_attempts, backoff
        self.names: set[str] = set()
        self.attempts: list[Attempt] = []
        self.tasks: list[dict] = []  # every task created, as CreateTask received it
        self._pending: queues.Queue = queues.Queue()
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._busy = 0
        standin = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's name)
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status, answer = standin.create_task(urllib.parse.urlsplit(self.path).path, body)
                payload = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args) -> None:  # quiet: the tests read `attempts`
                pass

        self.port = free_port()
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._threads = [
            threading.Thread(target=self.server.serve_forever, daemon=True),
            threading.Thread(target=self._deliver_forever, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    @property
    def host(self) -> str:
        """What CLOUD_TASKS_EMULATOR_HOST is set to."""
        return f"127.0.0.1:{self.port}"

    def create_task(self, path: str, body: dict) -> tuple[int, dict]:
        match = CREATE_TASK.fullmatch(path)
        if not match or match["queue"] != self.queue:
            return 404, {"error": {"code": 404, "message": f"queue not found: {path}", "status": "NOT_FOUND"}}
        task = dict(body.get("task", {}))
        deadline = dispatch_deadline(task)
        if not DISPATCH_DEADLINE_RANGE[0] <= deadline <= DISPATCH_DEADLINE_RANGE[1]:
            message = f"dispatch_deadline {deadline} s: must be in [15 s, 30 min]"
            return 400, {"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}}
        with self._lock:
            name = task.get("name") or f"{self.queue}/tasks/{len(self.names)}"
            if name in self.names:
                return 409, {"error": {"code": 409, "message": f"{name} exists", "status": "ALREADY_EXISTS"}}
            self.names.add(name)
            self._busy += 1
        task["name"] = name
        self.tasks.append(task)
        self._pending.put(task)
        return 200, task

    def _deliver_forever(self) -> None:
        while (task := self._pending.get()) is not None:
            try:
                self._deliver(task)
            finally:
                with self._lock:
                    self._busy -= 1
                    self._idle.notify_all()

    def _deliver(self, task: dict) -> None:
        request = task.get("httpRequest", {})
        body = base64.b64decode(request.get("body", ""))
        for attempt in range(self.max_attempts):
            headers = {
                **request.get("headers", {}),
                "Authorization": f"Bearer {STANDIN_TOKEN}",
                "X-CloudTasks-QueueName": self.queue.rsplit("/", 1)[-1],
                "X-CloudTasks-TaskName": task["name"].rsplit("/", 1)[-1],
                "X-CloudTasks-TaskRetryCount": str(attempt),
                "X-CloudTasks-TaskExecutionCount": str(attempt),
            }
            status = self._post(headers, body, dispatch_deadline(task))
            self.attempts.append(Attempt(task["name"].rsplit("/", 1)[-1], headers, status))
            if 200 <= status < 300:
                return
            time.sleep(self.backoff * 2**attempt)

    def _post(self, headers: dict[str, str], body: bytes, deadline: float) -> int:
        connection = http.client.HTTPConnection(self.target.hostname, self.target.port, timeout=deadline)
        try:
            connection.request("POST", self.target.path or "/", body=body, headers=headers)
            response = connection.getresponse()
            response.read()
            return response.status
        except OSError:
            return 0
        finally:
            connection.close()

    def wait_idle(self, timeout: float = 60.0) -> None:
        """Until every queued task is delivered (or out of attempts)."""
        deadline = time.monotonic() + timeout
        with self._idle:
            while self._busy:
                if not self._idle.wait(max(0.0, deadline - time.monotonic())):
                    raise TimeoutError(f"tasks still being delivered after {timeout} s: {self._busy}")

    def close(self) -> None:
        self._pending.put(None)
        self.server.shutdown()
        self.server.server_close()
