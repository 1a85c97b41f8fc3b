"""The stop: the work of a run runs in a process of its own, which the handler kills at the job's deadline.

Why a process. An exception raised into the request's thread (functions-framework's threaded timeout,
PyThreadState_SetAsyncExc) lands at an arbitrary instruction: inside gRPC client code it leaves the channel's
lock owned by a thread that never releases it, and every later call on that channel hangs. A killed process
takes its channels and locks with it; the handler's own threads and calls are never interrupted, so it can
always release the claim and answer.

Why a fork server. gRPC supports fork only before any gRPC object exists ("use after fork",
github.com/grpc/grpc/blob/master/doc/fork_support.md), and the handler's gRPC threads run. multiprocessing's fork
server is single-threaded, started once per instance, imports the work's modules and makes no gRPC object; each
child (a fork, not an interpreter start) makes its own clients.

What comes back: an `Ending` of plain strings, each stringified so that a failing `__str__` or `__repr__` cannot
stop the report. A child killed at the deadline (SIGKILL) runs no cleanup code of the work.

What is killed: the child is a session of its own, and its whole process group is killed after every ending (a
report, a death, the deadline, a dead fork server), before the handler records the run: a process the work started
(subprocess, a multiprocessing fork) cannot do the effect again beside the retry. The child kills its own group if
the handler's process dies. The deadline covers the start too: a fork server stuck importing the work's modules is
killed (the next run starts another) and the delivery is answered.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import multiprocessing
import multiprocessing.connection
import os
import signal
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from multiprocessing import forkserver

import run_log
from run_context import RunContext, Started, TerminalJobError, UnknownJob

# The fork server's context (the platform default differs across Python versions: name it).
PROCESSES = multiprocessing.get_context("forkserver")
# How long a killed or finished child may take to be reaped: SIGKILL cannot be ignored.
REAP_SECONDS = 5.0
# A fork server that no start could use for this long is stuck (a module whose import blocks): killed. Above its
# imports' time on a loaded instance (7 s seen at a load average of 18), so that short deadlines never kill a slow one
# over and over.
FORK_SERVER_STUCK_SECONDS = 15.0
_waited_since: dict[int, float] = {}  # fork server's pid -> when a start first waited for it in vain
# What the child waits for before the work: only a handler that waits for it sends it.
GO = b"go"
# Bounds on what a child reports (a result is recorded up to 1500 characters, ledger.RunLedger.complete).
MESSAGE_LIMIT = 1500
TRACEBACK_LIMIT = 8000


class Ended(enum.StrEnum):
    """How the work of one delivery ended."""

    RETURNED = "returned"
    STARTED = "started"  # returned run_context.Started: a proxy target's execution runs on, to be followed
    TERMINAL = "terminal"  # raised TerminalJobError: record the run failed
    UNKNOWN_JOB = "unknown_job"  # raised UnknownJob: a deploy gives the job its work
    RAISED = "raised"  # anything else, BaseException included (SystemExit, KeyboardInterrupt)
    DIED = "died"  # the process ended without a report: os._exit, a signal, out of memory
    STOPPED = "stopped"  # still running at the deadline: killed
    NOT_STARTED = "not_started"  # no process could be started for it


# The work's own errors that end it otherwise than Ended.RAISED.
RAISED_AS = ((TerminalJobError, Ended.TERMINAL), (UnknownJob, Ended.UNKNOWN_JOB))


@dataclasses.dataclass(frozen=True)
class Ending:
    how: Ended
    result: str | None = None  # what the work returned, as text (None for None)
    error_type: str = ""
    message: str = ""
    traceback: str = ""
    exit_code: int | None = None  # DIED: the process's exit code (negative: the signal that ended it)
    execution: str = ""  # STARTED: the execution's full resource name

    @property
    def error(self) -> str:
        """`Type: message`, the way Python prints an error."""
        return f"{self.error_type}: {self.message}" if self.message else self.error_type


def shown(value: object, limit: int = MESSAGE_LIMIT) -> str:
    """str(value), else repr(value), else a placeholder naming its type: never raises."""
    for show in (str, repr):
        try:
            text = show(value)
            if isinstance(text, str):
                return text[:limit]
        except BaseException:  # noqa: BLE001, S112 - a broken __str__ may raise anything, SystemExit included
            continue
    return f"<{type(value).__name__} whose str() and repr() fail>"


def ending_of(work: Callable[[RunContext], object], context: RunContext) -> Ending:
    """Calls the work here and says how it ended; never raises (the child's whole job)."""
    try:
        result = work(context)
    except BaseException as error:  # noqa: BLE001 - the work's own SystemExit or KeyboardInterrupt ends the work only
        return ending_after(error)
    if isinstance(result, Started):
        return Ending(Ended.STARTED, execution=shown(result.execution))
    return Ending(Ended.RETURNED, result=None if result is None else shown(result))


def ending_after(error: BaseException) -> Ending:
    """How work that raised `error` ended; never raises."""
    how = next((how for kind, how in RAISED_AS if isinstance(error, kind)), Ended.RAISED)
    try:
        trace = "".join(traceback.format_exception(error))[-TRACEBACK_LIMIT:]
    except BaseException:  # noqa: BLE001 - the traceback module guards str() itself; anything else: no traceback
        trace = ""
    return Ending(how, error_type=type(error).__name__, message=shown(error), traceback=trace)


def _child(
    work: Callable[[RunContext], object],
    context: RunContext,
    fields: Mapping[str, object],
    report: multiprocessing.connection.Connection,
) -> None:
    """The work's process: its log lines carry the run's fields; it reports, then exits at once (no atexit,
    no wait for threads the work left running)."""
    os.setsid()  # its own group: kill_group takes what the work starts with it
    handler = multiprocessing.parent_process().sentinel  # at EOF once the handler's process is gone
    threading.Thread(target=_die_with, args=(handler,), daemon=True).start()
    run_log.configure_work_logging(fields)
    try:
        report.recv_bytes()  # the go: EOFError (no work) if the handler gave up before the start ended
        ending = ending_of(work, context)
        sys.stdout.flush()  # before the report: the handler kills the group once it has it
        sys.stderr.flush()
        report.send(ending)
    finally:
        os._exit(0)


def _die_with(handler: int) -> None:
    """Kills the work's group once the handler's process is gone: no one would kill it at the deadline."""
    multiprocessing.connection.wait([handler])
    os.killpg(0, signal.SIGKILL)


def kill_group(pid: int | None) -> None:
    """SIGKILL to the work's process group (its id is the work's pid); nothing if none is left."""
    if pid is not None:  # ProcessLookupError: every process of it ended, or the child is not its leader yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def run_until_stopped(
    work: Callable[[RunContext], object],
    context: RunContext,
    fields: Mapping[str, object],
    stop_at: float,
    preload: Iterable[str] = (),
) -> Ending:
    """Runs the work in a child process until it ends or time.monotonic() reaches `stop_at`; never raises.

    `preload`: the modules the fork server imports once, so that no child imports them again."""
    PROCESSES.set_forkserver_preload(sorted({__name__, *preload}))
    ours, theirs = PROCESSES.Pipe()  # the child's go, then its report
    process = PROCESSES.Process(target=_child, args=(work, context, dict(fields), theirs), name=f"run-{context.run_id}")
    try:
        not_started = _start(process, theirs, stop_at)
        if not_started:
            return not_started
        with contextlib.suppress(OSError):  # a child already dead: _wait tells how it ended
            ours.send_bytes(GO)
        return _wait(process, ours, stop_at)
    finally:
        ours.close()  # a child that got no go (started after the deadline) finds EOF and ends without the work


def _start(process, theirs: multiprocessing.connection.Connection, stop_at: float) -> Ending | None:
    """Starts the work's process before `stop_at`: None once it runs. The start waits for the fork server, whose own
    start imports the work's modules; one stuck there for FORK_SERVER_STUCK_SECONDS is killed, and the next start
    starts another."""
    failed: list[Ending] = []

    def start() -> None:
        try:
            process.start()
        except Exception as error:  # noqa: BLE001 - no process (fork failed, the work cannot be pickled): a retry may
            failed.append(Ending(Ended.NOT_STARTED, error_type=type(error).__name__, message=shown(error)))
        finally:
            theirs.close()

    began = time.monotonic()
    starter = threading.Thread(target=start, name=f"start-{process.name}", daemon=True)
    starter.start()
    starter.join(max(0.0, stop_at - began))
    if not starter.is_alive():
        return failed[0] if failed else None
    server = forkserver._forkserver  # the one PROCESSES uses
    with server._lock:
        pid = server._forkserver_pid
        if pid is not None and time.monotonic() - _waited_since.setdefault(pid, began) > FORK_SERVER_STUCK_SECONDS:
            os.kill(pid, signal.SIGKILL)
            server._stop_unlocked()  # reaps it and forgets it: the next start starts a new one
    return Ending(Ended.NOT_STARTED, error_type="TimeoutError", message="no process before the job's deadline")


def _wait(process, reader: multiprocessing.connection.Connection, stop_at: float) -> Ending:
    """The child's report, or how it ended without one; the child is reaped either way."""
    ending = None
    try:
        ready = multiprocessing.connection.wait([reader, process.sentinel], max(0.0, stop_at - time.monotonic()))
        if reader in ready or reader.poll(0):  # a report sent just before the exit is read first
            try:
                ending = reader.recv()
            except (EOFError, OSError):
                ending = None
        elif not ready:
            ending = Ending(Ended.STOPPED)
    finally:
        # Whatever the ending, the group goes before the run is recorded; a fork server that died (its sentinel
        # closed) left the work running, unknown to the process object.
        kill_group(process.pid)
        if process.exitcode is None:  # not yet its group's leader (still starting)
            process.kill()
        process.join(REAP_SECONDS)
    if ending is None:
        ending = Ending(Ended.DIED, exit_code=process.exitcode)
    if process.exitcode is not None:
        process.close()
    return ending
