"""A real functions-framework server process for the fault, outage and load tests.

`Server` runs `functions-framework --target handle_scheduled_job --source tests/harness/served_job.py` (gunicorn,
one worker, THREADS threads) in its own process group, so that SIGKILL takes the whole server down the
way a crashed instance goes. `RetryPolicy` is Cloud Scheduler's retry shape. `measure_load` drives a
server with concurrent duplicate deliveries and returns the figures.
"""

from __future__ import annotations

import concurrent.futures
import copyreg
import dataclasses
import datetime as dt
import http.client
import json
import os
import pickle
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from types import MappingProxyType

from scheduled_dedup_tools.firestore_emulator import free_port

import config as configuration
from config import Config

PROJECT_DIR = Path(__file__).resolve().parents[2]
SERVED_SOURCE = Path(__file__).resolve().parent / "served_job.py"


@dataclasses.dataclass(frozen=True)
class Answer:
    status: int  # 0: the connection broke without an answer (the server died), as Scheduler sees a crash
    text: str
    seconds: float


class Server:
    """One server process serving served_job.py (beside this file); `env` adds to (or overrides) its environment."""

    def __init__(self, env: Mapping[str, str], log_path: Path) -> None:
        self.port = free_port()
        self.log_path = log_path
        # Created by served_job.py when a delivery reaches the fault point SERVED_FAULT names.
        self.signal_path = Path(env.get("SERVED_SIGNAL", log_path.with_suffix(".signal")))
        pythonpath = os.pathsep.join(filter(None, [str(PROJECT_DIR), os.environ.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "functions_framework", "--target", "handle_scheduled_job",
                   "--source", str(SERVED_SOURCE), "--host", "127.0.0.1", "--port", str(self.port)]  # fmt: skip
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                command,
                env={**os.environ, "PYTHONPATH": pythonpath, **env},
                cwd=PROJECT_DIR,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def wait_ready(self, timeout: float = 30.0) -> Server:
        """Until the worker answers: functions-framework serves /robots.txt itself (404) once loaded."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("GET", "/robots.txt")
                if connection.getresponse().status == 404:
                    return self
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the server did not start; its log: {self.log_path}")
            time.sleep(0.05)

    def deliver(self, headers: Mapping[str, str], timeout: float = 30.0, method: str = "POST") -> Answer:
        started = time.monotonic()
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, "/", headers=dict(headers))
            response = connection.getresponse()
            return Answer(response.status, response.read().decode(), time.monotonic() - started)
        except (ConnectionError, http.client.RemoteDisconnected):
            return Answer(0, "connection broken", time.monotonic() - started)
        finally:
            connection.close()

    def deliver_in_background(self, headers: Mapping[str, str]) -> tuple[threading.Thread, list[Answer]]:
        answers: list[Answer] = []
        thread = threading.Thread(target=lambda: answers.append(self.deliver(headers)), daemon=True)
        thread.start()
        return thread, answers

    def kill(self) -> None:
        """SIGKILL the whole group (gunicorn's arbiter and its worker): no cleanup code runs."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)

    def log_lines(self) -> list[dict]:
        """The server's structured log lines (JSON on stdout); anything else it printed is skipped."""
        lines = []
        for text in self.log_path.read_text().splitlines():
            try:
                lines.append(json.loads(text))
            except ValueError:
                continue
        return lines


def wait_for_file(path: Path, timeout: float = 30.0) -> str:
    deadline = time.monotonic() + timeout
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{path} never appeared")
        time.sleep(0.01)
    return path.read_text()


@dataclasses.dataclass(frozen=True)
class RetryPolicy:
    """Cloud Scheduler's retry_config: the wait starts at min_backoff, doubles max_doublings times, then grows
    linearly by min_backoff * 2**max_doublings, never beyond max_backoff, for retry_count retries.
    (Google's example: 10 s, 20 s, 40 s, 80 s, 160 s, 240 s, 300 s, 300 s ... for 10 s / 300 s / 3 doublings.)"""

    retry_count: int
    min_backoff: float
    max_backoff: float
    max_doublings: int

    def delays(self) -> list[float]:
        waits = []
        for retry in range(self.retry_count):
            if retry <= self.max_doublings:
                wait = self.min_backoff * 2**retry
            else:
                wait = self.min_backoff * 2**self.max_doublings * (retry - self.max_doublings + 1)
            waits.append(min(wait, self.max_backoff))
        return waits

    def retry(self, server: Server, headers: Mapping[str, str]) -> list[tuple[float, Answer]]:
        """Retries as Scheduler does after a failed attempt, until a 2xx or the retries run out.

        Returns (seconds since the first wait began, answer) per retry."""
        started = time.monotonic()
        attempts = []
        for wait in self.delays():
            time.sleep(wait)
            answer = server.deliver(headers)
            attempts.append((time.monotonic() - started, answer))
            if 200 <= answer.status < 300:
                break
        return attempts


@dataclasses.dataclass(frozen=True)
class LoadFigures:
    clients: int
    runs: int
    duplicates: int
    deliveries: int
    seconds: float
    statuses: dict[int, int]  # HTTP status -> count
    outcomes: dict[str, int]  # the answer's outcome label (processed, duplicate, in_progress, ...) -> count
    p50_ms: float
    p95_ms: float

    @property
    def throughput(self) -> float:
        return self.deliveries / self.seconds

    def handover(self, executions: int) -> dict[str, float]:
        """The figures in the shape the template's benchmark reads with --load-json (its LOAD_FIELDS)."""
        return {
            "clients": self.clients,
            "runs": self.runs,
            "deliveries_per_run": self.duplicates,
            "executions": executions,
            "errors_5xx": sum(count for status, count in self.statuses.items() if status >= 500 or status == 0),
            "throughput_per_s": round(self.throughput, 1),
            "p50_ms": round(self.p50_ms, 1),
            "p95_ms": round(self.p95_ms, 1),
        }

    def summary(self) -> str:
        return (
            f"{self.deliveries} deliveries in {self.seconds:.2f} s = {self.throughput:.0f}/s; "
            f"latency p50 {self.p50_ms:.1f} ms, p95 {self.p95_ms:.1f} ms; statuses {self.statuses}; "
            f"outcomes {self.outcomes}"
        )


def measure_load(server: Server, headers_of_run, runs: int = 50, duplicates: int = 4, clients: int = 8) -> LoadFigures:
    """`runs` scheduled runs, each delivered `duplicates` times back to back, by `clients` concurrent clients.

    headers_of_run(i) gives run i's delivery headers. Duplicates of one run are queued together, so they
    arrive while the first is still being handled: the contention Scheduler's at-least-once delivery makes.
    """
    queue = [headers_of_run(i) for i in range(runs) for _ in range(duplicates)]
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        answers = list(pool.map(server.deliver, queue))
    seconds = time.monotonic() - started
    latencies = sorted(answer.seconds * 1000 for answer in answers)
    statuses: dict[int, int] = {}
    outcomes: dict[str, int] = {}
    for answer in answers:
        statuses[answer.status] = statuses.get(answer.status, 0) + 1
        label = answer.text.split(":", 1)[0]
        outcomes[label] = outcomes.get(label, 0) + 1
    percentiles = statistics.quantiles(latencies, n=100, method="inclusive")
    return LoadFigures(
        clients, runs, duplicates, len(answers), seconds, statuses, outcomes, percentiles[49], percentiles[94]
    )


class Fleet:
    """The servers of one test, all on its run collection, with one executions file and one outputs collection."""

    def __init__(self, collection: str, workdir: Path) -> None:
        self.collection = collection
        self.outputs = f"{collection}-outputs"
        self.executions_path = workdir / "executions.txt"
        self.workdir = workdir
        self.servers: list[Server] = []

    def start(self, config_change: Callable[[Config], Config] | None = None, **env: str) -> Server:
        """A new server (not yet ready: call wait_ready, so that several can boot at once), run by the test's
        configuration (config.current()) as `config_change` changes it, on this fleet's collection."""
        index = len(self.servers)
        model = (config_change or (lambda same: same))(configuration.current())
        model = dataclasses.replace(model, collection=self.collection)
        config_path = self.workdir / f"server-{index}.config"
        # served_job.py's SERVED_CONFIG: the model itself, pickled (a read-only mapping as a plain dict).
        copyreg.pickle(MappingProxyType, lambda mapping: (dict, (dict(mapping),)))
        config_path.write_bytes(pickle.dumps(model))
        served = {
            "SERVED_CONFIG": str(config_path),
            "SERVED_EXECUTIONS": str(self.executions_path),
            "SERVED_OUTPUTS": self.outputs,
            "SERVED_SIGNAL": str(self.workdir / f"server-{index}.signal"),
        }
        server = Server({**served, **env}, self.workdir / f"server-{index}.log")
        self.servers.append(server)
        return server

    def executions(self) -> list[str]:
        """run_id of each time the work started its effect, in order."""
        if not self.executions_path.exists():
            return []
        return [line.split()[0] for line in self.executions_path.read_text().splitlines()]

    def stop_all(self) -> None:
        for server in self.servers:
            server.kill()


def everywhere(**seconds: int) -> Callable[[Config], Config]:
    """Fleet.start's config_change: these numbers (lease, attempt_deadline...) in seconds, for every job."""
    return lambda config: config.everywhere(**{name: dt.timedelta(seconds=value) for name, value in seconds.items()})
