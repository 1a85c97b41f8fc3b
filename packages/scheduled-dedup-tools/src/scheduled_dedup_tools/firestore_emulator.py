"""Start, wait for, save and stop Google's Firestore emulator (the official one: transactions isolate).

Used by the tests' fixture and `make dev` (whose emulator's data is saved across restarts: the README).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import requests

INSTALL_HINT = (
    "Google's Firestore emulator was not found. Install it with `apt-get install google-cloud-cli-firestore-emulator "
    "openjdk-17-jre-headless` (or `gcloud components install cloud-firestore-emulator`), or point "
    "FIRESTORE_EMULATOR_HOST at a running one."
)
JAR = Path("platform", "cloud-firestore-emulator", "cloud-firestore-emulator.jar")
MAIN_CLASS = "com.google.cloud.datastore.emulator.firestore.CloudFirestore"


class EmulatorNotFound(RuntimeError):
    pass


def find_jar() -> Path:
    """The emulator's jar, from the Cloud SDK that `gcloud` belongs to (or CLOUDSDK_ROOT)."""
    gcloud = shutil.which("gcloud")
    sdk = Path(gcloud).resolve().parent.parent if gcloud else None
    for root in (os.environ.get("CLOUDSDK_ROOT"), sdk, "/usr/lib/google-cloud-sdk", "/usr/share/google-cloud-sdk"):
        if root and (Path(root) / JAR).is_file():
            return Path(root) / JAR
    raise EmulatorNotFound(INSTALL_HINT)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def answer(url: str) -> bytes | None:
    """The body `url` answers a GET with (an HTTP error's included), or None when nothing answers."""
    try:
        return requests.get(url, timeout=1).content
    except requests.RequestException:
        return None


def is_ready(host: str) -> bool:
    return (answer(f"http://{host}/") or b"").strip() == b"Ok"


def wait_until(ready: Callable[[], bool], process: subprocess.Popen, seconds: float, failure: str) -> None:
    """Poll `ready`; RuntimeError(failure) if `process` exits or `seconds` pass first."""
    deadline = time.monotonic() + seconds
    while not ready():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(failure)
        time.sleep(0.2)


class Emulator:
    """One emulator process, in its own process group (its Java child must die with it)."""

    def __init__(self, port: int | None = None, log_path: Path | None = None, data: Path | None = None) -> None:
        self.data = data  # where `save` exports the data to, and the next emulator starts from (its metadata file)
        self.import_data = next(data.glob("*/*.overall_export_metadata"), None) if data else None
        self.port = port or free_port()
        self.host = f"127.0.0.1:{self.port}"
        self.log_path = log_path or Path(os.environ.get("TMPDIR", "/tmp")) / f"firestore-emulator-{self.port}.log"
        self.process: subprocess.Popen | None = None

    def start(self, timeout: float = 60.0) -> Emulator:
        java = shutil.which("java")
        if not java:
            raise EmulatorNotFound("Java 17+ is needed to run the Firestore emulator. " + INSTALL_HINT)
        command = [java, "-Duser.language=en", "-cp", str(find_jar()), MAIN_CLASS, "start",
                   "--host", "127.0.0.1", "--port", str(self.port)]  # fmt: skip
        if self.import_data:
            command += ["--import-data", str(self.import_data)]
        # Output to a file, never an unread pipe: the emulator logs a stack trace per lock timeout.
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            failure = f"Firestore emulator did not start; its log: {self.log_path}"
            wait_until(lambda: is_ready(self.host), self.process, timeout, failure)
            # A cold emulator's first writes take seconds (JIT), longer than the handler's RPC timeout,
            # which would turn a test's first delivery into a spurious 5xx: a few writes through REST first.
            documents = f"http://{self.host}/v1/projects/warm-up/databases/(default)/documents/warm-up"
            for number in range(3):
                body = {"fields": {"n": {"integerValue": str(number)}}}
                requests.post(f"{documents}?documentId=w{number}", json=body, timeout=60).raise_for_status()
        except (RuntimeError, OSError):  # requests' errors are OSErrors
            self.stop()
            raise
        return self

    def stop(self) -> None:
        if self.process:
            stop_group(self.process)

    def save(self, project: str, database: str) -> None:
        """Replace `data` by an export of one database, made through the emulator's REST endpoint (the jar's
        --export-on-exit wrote nothing here: emulator 1.19.9, it serves the Firebase CLI); OSError keeps the old."""
        fresh = self.data.with_name(self.data.name + ".new")
        shutil.rmtree(fresh, ignore_errors=True)
        fresh.mkdir(parents=True)
        body = {"database": f"projects/{project}/databases/{database}", "export_directory": str(fresh)}
        url = f"http://{self.host}/emulator/v1/projects/{project}:export"
        try:
            requests.post(url, json=body, timeout=60).raise_for_status()
        except OSError:  # requests' errors are OSErrors
            shutil.rmtree(fresh, ignore_errors=True)  # nothing half-written left beside the project
            raise
        shutil.rmtree(self.data, ignore_errors=True)
        fresh.rename(self.data)


def stop_group(process: subprocess.Popen, timeout: float = 10) -> None:
    """SIGTERM a process started with start_new_session=True and its whole group; SIGKILL if it lingers."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@contextlib.contextmanager
def running_emulator() -> Iterator[str]:
    """The emulator FIRESTORE_EMULATOR_HOST names, else one started (and exported) until the block ends."""
    host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    if host:
        yield host
        return
    emulator = Emulator().start()
    os.environ["FIRESTORE_EMULATOR_HOST"] = emulator.host
    try:
        yield emulator.host
    finally:
        emulator.stop()
        del os.environ["FIRESTORE_EMULATOR_HOST"]
