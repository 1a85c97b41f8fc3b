"""`make demo`: bake a sample project, serve it on Google's Firestore emulator, and replay what Cloud Scheduler
does to it: a first delivery is processed, its replay is skipped as a duplicate, and a delivery that arrives
while another attempt holds the run's live lease is answered 409.

    .venv/bin/python tests/demo.py [--build-dir build/demo]

Uses the emulator FIRESTORE_EMULATOR_HOST names if set (the template's tests pass their shared one), else
starts one. Stops everything it started, also on Ctrl-C or failure. Exits 1 if any answer is not the expected one.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import dataclasses
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import ROOT, bake, config_file

DEMO_PROJECT = "dedup-demo"  # the emulator project the demo's records live in
JOB_SECONDS = 2
# Replaces the baked job.py in the demo bake only: work slow enough for a duplicate to arrive mid-run.
DEMO_JOB = f'''"""Written by tests/demo.py over the baked job.py: work that takes {JOB_SECONDS} s."""

import logging
import time

from run_context import RunContext

logger = logging.getLogger(__name__)


def run(context: RunContext) -> None:
    logger.info("demo job: working {JOB_SECONDS} s on run %s", context.run_id[:12])
    time.sleep({JOB_SECONDS})
'''


class Demo:
    def __init__(self, build_dir: Path) -> None:
        self.build_dir = build_dir
        self.failures: list[str] = []
        self.server: subprocess.Popen | None = None
        self.emulator = None

    # --- setting up -------------------------------------------------------------------------------------

    def bake(self) -> None:
        shutil.rmtree(self.build_dir, ignore_errors=True)  # a clean bake on every run
        self.project = bake(self.build_dir)
        self.answers = json.loads((self.project / ".cookiecutter.json").read_text())
        (self.project / "job.py").write_text(DEMO_JOB)
        print(f"Baked the template with its defaults: {os.path.relpath(self.project)}")
        print(f"  (demo only) job.py replaced by a job that works {JOB_SECONDS} s, so a duplicate can arrive mid-run")
        # The bake's protocol module, and the tools package's emulator helper: one copy of each.
        sys.path[:0] = [str(self.project)]

    def start_emulator(self) -> str:
        from scheduled_dedup_tools import firestore_emulator

        host = os.environ.get("FIRESTORE_EMULATOR_HOST")
        if host:
            print(f"Firestore emulator: the running one at {host} (FIRESTORE_EMULATOR_HOST)")
        else:
            self.emulator = firestore_emulator.Emulator(log_path=self.build_dir / "firestore-emulator.log").start()
            host = self.emulator.host
            os.environ["FIRESTORE_EMULATOR_HOST"] = host
            print(
                f"Firestore emulator: started at {host}, pid {self.emulator.process.pid} "
                f"(log: {self.emulator.log_path})"
            )
        # Every document of the demo's project, deleted (a lock held by a killed client makes this 409).
        url = f"http://{host}/emulator/v1/projects/{DEMO_PROJECT}/databases/(default)/documents"
        urllib.request.urlopen(urllib.request.Request(url, method="DELETE"), timeout=10).close()
        return host

    def start_function(self, host: str) -> None:
        from scheduled_dedup_tools import firestore_emulator

        self.port = firestore_emulator.free_port()
        self.log_path = self.build_dir / "function.log"
        own = config_file(self.project, self.build_dir / "config.yaml", project=DEMO_PROJECT)  # the demo's own runs
        env = {**os.environ, "FIRESTORE_EMULATOR_HOST": host, **own, "PYTHONUNBUFFERED": "1"}
        command = [str(Path(sys.executable).parent / "functions-framework"), "--target", "handle_scheduled_job",
                   "--source", "main.py", "--port", str(self.port)]  # fmt: skip
        with open(self.log_path, "wb") as log:
            self.server = subprocess.Popen(
                command, cwd=self.project, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + 30
        while not self.listening():
            if self.server.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the function server did not start; its log: {self.log_path}")
            time.sleep(0.2)
        print(f"Function: functions-framework --target handle_scheduled_job, pid {self.server.pid}, port {self.port}")

    def listening(self) -> bool:
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def stop(self) -> None:
        if self.server:
            from scheduled_dedup_tools import firestore_emulator

            firestore_emulator.stop_group(self.server)
        if self.emulator:
            self.emulator.stop()

    # --- the deliveries ---------------------------------------------------------------------------------

    def headers(self, schedule_time: str) -> dict[str, str]:
        """What Cloud Scheduler sends, plus the project/location headers our Terraform adds to each job."""
        return {
            "User-Agent": "Google-Cloud-Scheduler",
            "X-CloudScheduler": "true",
            "X-CloudScheduler-JobName": self.job,
            "X-CloudScheduler-ScheduleTime": schedule_time,
            "X-Scheduler-Project": DEMO_PROJECT,  # the project this demo's function runs in (it serves only its own)
            "X-Scheduler-Location": self.answers["region"],
        }

    def deliver(self, schedule_time: str) -> tuple[int, str]:
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/", data=b"", headers=self.headers(schedule_time), method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, response.read().decode().strip()
        except urllib.error.HTTPError as error:
            return error.code, error.read().decode().strip()

    def check(self, step: str, answer: tuple[int, str], status: int, outcome: str) -> None:
        ok = answer[0] == status and answer[1].startswith(f"{outcome}:")
        print(f"{step}\n     -> {answer[0]} {answer[1]}   [expected {status} {outcome}: {'OK' if ok else 'FAILED'}]")
        if not ok:
            self.failures.append(f"{step.strip()}: got {answer[0]} {answer[1]!r}, expected {status} {outcome}")

    def record(self, schedule_time: str) -> tuple[dict | None, str]:
        """The run's Firestore record, read with the bake's own key function and configuration."""
        import config as configuration
        import dedup
        from keys import read_run_key
        from ledger import firestore_client

        config = dataclasses.replace(configuration.load(), project=DEMO_PROJECT)
        key = read_run_key(self.headers(schedule_time), config, dedup.utcnow())
        client = firestore_client(DEMO_PROJECT, config.database)
        snapshot = client.collection(config.collection).document(key.run_id).get()
        return snapshot.to_dict(), key.run_id

    def wait_for_live_lease(self, schedule_time: str) -> None:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            record, _ = self.record(schedule_time)
            if record and record["status"] == "in_progress":
                return
            if record:
                raise RuntimeError(f"the first attempt finished ({record['status']}) before the duplicate was sent")
            time.sleep(0.05)
        raise RuntimeError("the first attempt never claimed the run")

    def run(self) -> int:
        self.bake()
        self.start_function(self.start_emulator())
        self.job = next(iter(self.answers["jobs"]))
        minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
        first, second = (f"{t:%Y-%m-%dT%H:%M:%SZ}" for t in (minute - dt.timedelta(minutes=2), minute))
        print("\nDeliveries: POSTs with the headers Cloud Scheduler sends (User-Agent, X-CloudScheduler,")
        print("X-CloudScheduler-JobName/-ScheduleTime) and our Terraform's X-Scheduler-Project/-Location.")
        print("Not emulated: the OIDC token Scheduler signs in with (the deployed function requires it).\n")

        self.check(f"1. job {self.job!r}, run {first}: first delivery", self.deliver(first), 200, "processed")
        self.check(
            f"2. job {self.job!r}, run {first}: the same run again (a retry)", self.deliver(first), 200, "duplicate"
        )
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            attempt = pool.submit(self.deliver, second)
            self.wait_for_live_lease(second)
            self.check(
                f"3. job {self.job!r}, run {second}: delivered while another attempt holds the live lease",
                self.deliver(second),
                409,
                "in_progress",
            )
            self.check(f"   ... that other attempt, {JOB_SECONDS} s later", attempt.result(), 200, "processed")

        for schedule_time in (first, second):
            record, run_id = self.record(schedule_time)
            print(f"\nFirestore record of run {schedule_time} (document {run_id[:16]}...):")
            for field in (
                "status",
                "attempt_id",
                "attempts",
                "claimed_at",
                "finished_at",
                "lease_expires",
                "expire_at",
            ):
                print(f"  {field:<14} {record.get(field)}")
            if record["status"] != "completed":
                self.failures.append(f"run {schedule_time}: record status {record['status']!r}, expected 'completed'")
        self.print_function_log()
        print()
        if self.failures:
            print("DEMO FAILED:\n  " + "\n  ".join(self.failures))
            return 1
        print("Demo OK: processed once, the replay skipped, the concurrent delivery answered 409.")
        return 0

    def print_function_log(self) -> None:
        print(f"\nThe function's structured log, abridged (full JSON lines: {self.log_path}):")
        for line in self.log_path.read_text().splitlines():
            try:
                entry = json.loads(line)
            except json.JSONDecodeError:
                continue  # the server's own start-up lines
            if "run_id" in entry and "message" in entry:  # the delivery's lines, not the library's own
                print(
                    f"  {entry['severity']:<8} outcome={entry.get('outcome', '-'):<12} "
                    f"run_id={entry['run_id'][:12]} attempt={entry.get('attempt', '-')}  {entry['message']}"
                )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=ROOT / "build" / "demo")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)  # a transcript read as it happens (make demo, a pipe, test_demo)
    # SIGTERM unwinds like Ctrl-C, so the finally below stops what the demo started; Ctrl-C does even when a
    # non-interactive shell started us with SIGINT ignored (a `&` job, nohup), as the tools package's dev_server does.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    demo = Demo(args.build_dir.resolve())
    try:
        return demo.run()
    finally:
        demo.stop()


if __name__ == "__main__":
    sys.exit(main())
