"""The source a test server serves: the real main.handle_scheduled_job, with a test job in place of job.run.

Run it as `functions-framework --target handle_scheduled_job --source tests/harness/served_job.py` with the
project's root on PYTHONPATH (tests/harness/live_server.py does that). Nothing here ships: production code has
no test hooks, this module wraps it from outside. Environment:
  SERVED_EXECUTIONS  a file that gets one line "<run_id> <attempt_id>" each time the work starts its
                     effect (one O_APPEND write, so the line survives a SIGKILL right after it)
  SERVED_OUTPUTS     a collection where the work creates outputs/{run_id} put-if-absent, the way a job
                     keys its effect by run_id so that a repeated run changes nothing
  SERVED_FAULT       before_work | after_work | after_finish: where the delivery stops (see `_stop_here`);
                     hold_after_work: the delivery pauses after the work until the test creates
                     SERVED_SIGNAL + ".go" (so the test can freeze the store before the finish is sent)
  SERVED_SIGNAL      a file created when the fault point is reached
  SERVED_FIRST_RUN_SECONDS  the work's first execution of a run takes this long before its effect
                     (later ones do not), in 10 ms steps of Python code, between which a request
                     timeout can stop it; with SERVED_FIRST_RUN_BLOCKING=1, in one time.sleep call
                     (C code)
  SERVED_FIRST_RUN_DOES  what the work's first execution of a run does instead of its effect (later ones
                     do the effect): a name `_misbehave` knows (loops over Firestore calls, exits,
                     raises what cannot be printed, starts a helper process, waits for the test)
  SERVED_CONFIG      a file: the configuration the server runs by, pickled (live_server.Fleet.start writes the
                     test's: its collection, jobs and numbers), used in place of config.yaml's
  SERVED_IMPORT_BLOCKS  a file: while it exists, the fork server's import of this module (stop.py's
                     preload) blocks for good, as a module whose import hangs would

Processes of the work (`_misbehave`) tell the test their pids in SERVED_SIGNAL (JSON), wait for the test's
SERVED_SIGNAL + ".go", then append a line to SERVED_SIGNAL + ".effect": an effect the stop must prevent.
"""

import contextlib
import logging
import multiprocessing
import os
import pickle
import subprocess
import sys
import time
from pathlib import Path

from google.api_core import exceptions as api_exceptions
from google.cloud import firestore

import config as configuration
import main
from ledger import RPC_TIMEOUT_SECONDS, RunLedger, firestore_client
from run_context import RunContext, TerminalJobError

if os.environ.get("SERVED_CONFIG"):  # the test's configuration, in this process and the work's
    configuration.use(pickle.loads(Path(os.environ["SERVED_CONFIG"]).read_bytes()))
handle_scheduled_job = main.handle_scheduled_job
logger = logging.getLogger("served_job")

# The fork server is a `python -c` process (multiprocessing/forkserver.py); the server's is functions-framework's.
if sys.argv[:1] == ["-c"] and Path(os.environ.get("SERVED_IMPORT_BLOCKS", "/nonexistent")).exists():
    while True:
        time.sleep(60)

# A process of the work: says its pid, waits for the test's go, then does an effect (`args`: the signal's path).
LATE_EFFECT = """
import json, os, pathlib, sys, time
signal, role = pathlib.Path(args[0]), args[1]
signal.with_name(signal.name + ".tmp").write_text(json.dumps({role: os.getpid(), "parent": os.getppid()}))
os.replace(signal.with_name(signal.name + ".tmp"), signal)
while not signal.with_name(signal.name + ".go").exists():
    time.sleep(0.01)
descriptor = os.open(signal.with_name(signal.name + ".effect"), os.O_WRONLY | os.O_APPEND | os.O_CREAT)
os.write(descriptor, f"{role} {os.getpid()}\\n".encode())
"""


def _stop_here(point: str) -> None:
    """At the configured fault point, signal the test and hang until it SIGKILLs the server."""
    if os.environ.get("SERVED_FAULT") == point:
        Path(os.environ["SERVED_SIGNAL"]).write_text(point)
        while True:
            time.sleep(60)


def _hold_here(point: str) -> None:
    """At the configured hold point, signal the test and wait until it says go."""
    if os.environ.get("SERVED_FAULT") == point:
        signal = Path(os.environ["SERVED_SIGNAL"])
        signal.write_text(point)
        go = signal.with_name(signal.name + ".go")
        while not go.exists():
            time.sleep(0.01)


def _take_long() -> None:
    """The slow first execution SERVED_FIRST_RUN_SECONDS asks for."""
    seconds = float(os.environ["SERVED_FIRST_RUN_SECONDS"])
    if os.environ.get("SERVED_FIRST_RUN_BLOCKING") == "1":
        time.sleep(seconds)
        return
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.01)


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("this error cannot be printed")

    __repr__ = __str__


class UnprintableTerminal(TerminalJobError):
    def __str__(self) -> str:
        raise RuntimeError("this terminal error cannot be printed")


class NotAnException(BaseException):
    """What a library may raise that `except Exception` does not catch."""


def _loop_over_firestore(client: firestore.Client) -> None:
    """Firestore calls without end: the stop lands inside one of them sooner or later."""
    probe = client.collection(os.environ["SERVED_OUTPUTS"]).document("probe")
    while True:
        probe.get(timeout=RPC_TIMEOUT_SECONDS)


def _start_helper(how: str) -> None:
    """Starts a helper process (a subprocess, or a multiprocessing fork) doing LATE_EFFECT; back once it runs."""
    signal = Path(os.environ["SERVED_SIGNAL"])
    args = [str(signal), "helper"]
    if how == "subprocess":
        subprocess.Popen([sys.executable, "-c", f"args = {args!r}\n{LATE_EFFECT}"])
    else:
        multiprocessing.get_context("fork").Process(target=exec, args=(LATE_EFFECT, {"args": args})).start()
    while not signal.exists():
        time.sleep(0.01)


def _misbehave(misdeed: str) -> None:
    config = configuration.current()
    if misdeed in ("subprocess_helper_then_return", "fork_helper_then_return"):
        _start_helper(misdeed.split("_")[0])
        return
    if misdeed in ("subprocess_helper_then_loop", "fork_helper_then_loop"):
        _start_helper(misdeed.split("_")[0])
        while True:
            time.sleep(0.01)
    if misdeed == "late_effect":  # the work itself does the late effect (its parent: the fork server)
        exec(LATE_EFFECT, {"args": [os.environ["SERVED_SIGNAL"], "work"]})
        return
    if misdeed == "loop_firestore_shared":  # the process's cached client, as the handler's own code uses it
        _loop_over_firestore(firestore_client(config.project, config.database))
    if misdeed == "loop_firestore_own":  # a client of the work's own
        _loop_over_firestore(firestore.Client(project=config.project, database=config.database))
    if misdeed == "sys_exit":
        sys.exit(2)
    if misdeed == "os_exit":
        os._exit(3)
    if misdeed == "base_exception":
        raise NotAnException("not an Exception")
    if misdeed == "keyboard_interrupt":
        raise KeyboardInterrupt
    if misdeed == "unprintable_error":
        raise Unprintable
    if misdeed == "unprintable_terminal":
        raise UnprintableTerminal
    raise AssertionError(f"SERVED_FIRST_RUN_DOES={misdeed!r}: not a misdeed")


def put_if_absent_job(context: RunContext) -> None:
    """Records the call, then writes its one effect keyed by run_id: a repeat finds it there and stops."""
    logger.info("served work started")  # from the work's process: the line must carry the run's fields
    _stop_here("before_work")
    executions = Path(os.environ["SERVED_EXECUTIONS"])
    first_run = not executions.exists() or context.run_id not in executions.read_text().split()
    line = f"{context.run_id} {context.attempt_id}\n".encode()
    descriptor = os.open(executions, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(descriptor, line)
    finally:
        os.close(descriptor)
    if first_run and os.environ.get("SERVED_FIRST_RUN_SECONDS"):
        _take_long()
    if first_run and os.environ.get("SERVED_FIRST_RUN_DOES"):
        _misbehave(os.environ["SERVED_FIRST_RUN_DOES"])
    config = configuration.current()
    outputs = firestore_client(config.project, config.database).collection(os.environ["SERVED_OUTPUTS"])
    # AlreadyExists: an earlier attempt of this run wrote it, so the effect happened once.
    with contextlib.suppress(api_exceptions.AlreadyExists):
        outputs.document(context.run_id).create(
            {"attempt_id": context.attempt_id, "attempt": context.attempt, "written_at": firestore.SERVER_TIMESTAMP},
            timeout=RPC_TIMEOUT_SECONDS,
        )
    _stop_here("after_work")
    _hold_here("hold_after_work")


_complete = RunLedger.complete


def _complete_then_stop(self: RunLedger, *args, **kwargs) -> None:
    _complete(self, *args, **kwargs)  # the finish commit lands ...
    _stop_here("after_finish")  # ... and the process dies before Scheduler gets the answer


main.run = put_if_absent_job
RunLedger.complete = _complete_then_stop
