"""`make dev`: Google's Firestore emulator + the function served as deployed (gunicorn), one short line per record.

Uses the emulator FIRESTORE_EMULATOR_HOST names, else starts one from .emulator-data/ (git-ignored), where the
project's database is saved at Ctrl-C or SIGTERM. No reloader: functions-framework's --debug one polled the tree at a
core's worth of CPU and missed edits. Nothing outlives it (exit_with_parent); it stops when its emulator dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from scheduled_dedup_tools.firestore_emulator import Emulator, answer, stop_group, wait_until

# The project's root: `python -m scheduled_dedup_tools.dev_server` runs there and imports its modules from it.
ROOT = Path.cwd()
DATA_DIR = ROOT / ".emulator-data"


def exit_with_parent() -> None:
    """Stop this process group (the server and its worker) once the process that started it is gone: the
    server runs in a session of its own, so nothing else would stop it after a SIGKILL of `make dev`."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(1)
        os.killpg(os.getpgrp(), signal.SIGTERM)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


def serve(port: int) -> None:
    """The function under functions-framework's own server (gunicorn, as deployed), with text logging."""
    from functions_framework import create_app
    from functions_framework._http import create_server
    from run_log import TEXT_LOGS_ENV

    exit_with_parent()
    os.environ[TEXT_LOGS_ENV] = "1"  # before main.py sets up logging; the work's processes inherit it
    app = create_app("handle_scheduled_job", str(ROOT / "main.py"))
    create_server(app, debug=False).run("127.0.0.1", port)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", nargs="?", choices=["serve"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, default=8080, help="the function's port")
    args = parser.parse_args(argv)
    if args.mode == "serve":
        serve(args.port)
        return 0

    # SIGTERM (a test, a process manager) ends the run as Ctrl-C does, through `finally`; and Ctrl-C works even
    # when a non-interactive shell started us with SIGINT ignored (a `&` job).
    for number in (signal.SIGINT, signal.SIGTERM):
        signal.signal(number, signal.default_int_handler)
    emulator = function = None
    host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    try:
        if not host:
            starting = Emulator(data=DATA_DIR)
            saved = f" from {DATA_DIR.name}/" if starting.import_data else ""
            print(f"==> starting Google's Firestore emulator{saved}", flush=True)
            emulator = starting.start()  # once started: saved and stopped at the end
            host = emulator.host
        url = f"http://127.0.0.1:{args.port}/"
        print(f"==> starting the function at {url} (no reloader: after an edit, Ctrl-C and make dev)", flush=True)
        # Its own process group, so gunicorn's worker goes down with it.
        command = [sys.executable, "-m", "scheduled_dedup_tools.dev_server", "serve", "--port", str(args.port)]
        env = {**os.environ, "FIRESTORE_EMULATOR_HOST": host, "PYTHONUNBUFFERED": "1"}
        function = subprocess.Popen(command, cwd=ROOT, env=env, start_new_session=True)
        # Any HTTP answer will do (a bare GET is a 400: no Scheduler headers).
        wait_until(lambda: answer(url) is not None, function, 60, f"the function did not start on port {args.port}")
        print(f"FIRESTORE_EMULATOR_HOST={host}", flush=True)
        print(f"ready: {url}  (fire a delivery: make fire JOB=<job id>; Ctrl-C stops both)", flush=True)
        while function.poll() is None:
            if emulator is not None and emulator.process.poll() is not None:
                print(f"the emulator stopped (exit {emulator.process.returncode}): stopping the function", flush=True)
                emulator = None  # nothing left to save
                return 1
            time.sleep(0.5)
        return function.returncode
    except RuntimeError as error:  # no emulator installed (EmulatorNotFound), or it or the function did not start
        print(error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 0
    finally:
        if function is not None:
            stop_group(function)
        if emulator is not None:
            import config as configuration

            config = configuration.current()
            try:  # a failed export keeps the previous one
                emulator.save(config.project, config.database)
                print(f"==> saved the emulator's data in {DATA_DIR.name}/ (the next `make dev` starts from it)")
            except OSError as error:
                print(f"the emulator's data was not saved ({error}); {DATA_DIR.name}/ keeps the previous run's")
            emulator.stop()
        print("==> stopped", flush=True)


if __name__ == "__main__":
    sys.exit(main())
