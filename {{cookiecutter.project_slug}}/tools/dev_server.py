"""`make dev`: Google's Firestore emulator + the function under functions-framework, reloading on edits.

Prints the function's URL and FIRESTORE_EMULATOR_HOST, then runs until Ctrl-C (or SIGTERM), which
stops both. An emulator already named by FIRESTORE_EMULATOR_HOST is used instead of a new one.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from firestore_emulator import Emulator, EmulatorNotFound, stop_group

ROOT = Path(__file__).resolve().parent.parent


def answers(url: str) -> bool:
    """True once the function answers HTTP at all (a bare GET is a 400: no Scheduler headers)."""
    try:
        urllib.request.urlopen(url, timeout=1).close()
    except urllib.error.HTTPError:
        return True
    except (urllib.error.URLError, OSError):
        return False
    return True


def start_function(port: int, emulator_host: str) -> subprocess.Popen:
    # --debug: Flask's reloader restarts the function when a .py file changes. Own process group,
    # so the reloader's child goes down with it.
    command = [sys.executable, "-m", "functions_framework", "--target", "handle_scheduled_job",
               "--source", str(ROOT / "main.py"), "--host", "127.0.0.1", "--port", str(port), "--debug"]  # fmt: skip
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)


def interrupt(*_: object) -> None:
    """SIGTERM (a test, a process manager) ends the run as Ctrl-C does: through main's `finally`."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8080, help="the function's port")
    parser.add_argument("--emulator-port", type=int, default=None, help="the emulator's port (default: a free one)")
    args = parser.parse_args(argv)

    signal.signal(signal.SIGTERM, interrupt)
    # Ctrl-C works even when a non-interactive shell started us with SIGINT ignored (a `&` job).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    emulator = None
    emulator_host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    function = None
    try:
        if not emulator_host:
            print("==> starting Google's Firestore emulator", flush=True)
            try:
                emulator = Emulator(args.emulator_port).start()
            except EmulatorNotFound as error:
                print(error, file=sys.stderr)
                return 2
            emulator_host = emulator.host
        url = f"http://127.0.0.1:{args.port}/"
        print(f"==> starting the function (functions-framework --debug, reloads on edits) at {url}", flush=True)
        function = start_function(args.port, emulator_host)
        deadline = time.monotonic() + 60
        while not answers(url):
            if function.poll() is not None or time.monotonic() > deadline:
                print(f"the function did not start on port {args.port}", file=sys.stderr)
                return 1
            time.sleep(0.2)
        print(f"FIRESTORE_EMULATOR_HOST={emulator_host}", flush=True)
        print(f"ready: {url}  (fire a delivery: make fire JOB=<job id>; Ctrl-C stops both)", flush=True)
        function.wait()
        return function.returncode
    except KeyboardInterrupt:
        return 0
    finally:
        if function is not None:
            stop_group(function)
        if emulator is not None:
            emulator.stop()
        print("==> stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
