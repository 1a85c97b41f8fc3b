"""The stop: the work of a run runs in a warm worker process, which the handler kills at the job's deadline.

A process, as an exception raised into the request's thread (PyThreadState_SetAsyncExc) may leave a gRPC channel's
lock held for ever; the handler is never interrupted, so it always releases the claim and answers. A fork server, as
gRPC supports fork only before any gRPC object exists (github.com/grpc/grpc/blob/master/doc/fork_support.md). Warm (a
process per run cost 8x the CPU): a worker serves run after run, one at a time (`_idle`), until killed, dead, or its
run left anything (`leftovers`). Frugal per run (the CPU caches go cold between runs): one message each way, two polls,
no pickle machinery, enum look-up or selector set-up. The worker's process group is killed at the deadline, at its
death and after a run that left a process, before the run is recorded, and by itself if the handler's process dies.
"""

from __future__ import annotations

import _signal
import _thread
import atexit
import contextlib
import ctypes
import datetime as dt
import enum
import marshal
import math
import multiprocessing
import multiprocessing.connection
import os
import pickle
import select
import signal
import struct
import sys
import threading
import time
import traceback
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from multiprocessing import forkserver

import run_log
from run_context import RunContext, Started, TerminalJobError, UnknownJob

PROCESSES = multiprocessing.get_context("forkserver")  # named: the default differs across Python versions
REAP_SECONDS = 5.0  # for a killed or finished child to be reaped (SIGKILL cannot be ignored)
# A fork server no start could use for this long is stuck: killed. Above its imports' time on a loaded instance (7 s).
FORK_SERVER_STUCK_SECONDS = 15.0
_waited_since: dict[int, float] = {}  # fork server's pid -> when a start first waited for it in vain
LEFTOVER_GRACE_SECONDS = 0.05  # for the work's threads to end after a run before they count as left behind
PR_SET_CHILD_SUBREAPER = 36  # prctl(2), linux/prctl.h
# The signals whose handler a run may change (as numbers: signal.valid_signals() makes an enum of each, 0.2 ms).
CATCHABLE = tuple(sorted(int(number) for number in signal.valid_signals() - {signal.SIGKILL, signal.SIGSTOP}))
MESSAGE_LIMIT = 1500  # what a worker reports of a message (ledger.TEXT_LIMIT)
TRACEBACK_LIMIT = 8000
HEADER = struct.Struct("!i")  # a message's length, ahead of it
BUFFER = 65536  # what one read takes: a pipe's whole buffer


class Ended(enum.StrEnum):
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


class Ending(typing.NamedTuple):
    """How the work of one delivery ended (a tuple: cheaper to make than a frozen dataclass)."""

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

    def values(self) -> tuple:
        """Its fields as plain values (marshal cannot carry an enum member)."""
        return (self.how.value, *self[1:])

    @classmethod
    def of(cls, values: tuple) -> Ending:
        return cls(ENDED[values[0]], *values[1:])


ENDED = {how.value: how for how in Ended}  # Ended by value, without the enum's own look-up


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


def packed(value: object) -> bytes:
    """marshal's bytes (several times cheaper than pickle's on a cold cache), else pickle's."""
    try:
        return marshal.dumps(value)
    except ValueError:  # a value marshal cannot carry (a datetime, a str subclass): pickle's general way
        return pickle.dumps(value)


def unpacked(data: bytes | memoryview) -> object:
    """`packed`'s value: pickle's bytes start with its PROTO opcode (0x80), marshal's never do."""
    return pickle.loads(data) if data[0] == pickle.PROTO[0] else marshal.loads(data)


_sent_functions: dict[Callable, bytes] = {}  # a module-level work function, pickled once (by reference: its name)
_received_functions: dict[bytes, Callable] = {}  # the worker's side: each name looked up once


def work_reference(work: Callable) -> bytes:
    """The work pickled (a lambda raises); a plain function's is cached."""
    if type(work) is not types.FunctionType:
        return pickle.dumps(work)
    reference = _sent_functions.get(work)
    if reference is None:
        reference = _sent_functions[work] = pickle.dumps(work)
    return reference


def work_of(reference: bytes) -> Callable:
    work = _received_functions.get(reference)
    if work is None:
        work = pickle.loads(reference)
        if type(work) is types.FunctionType:
            _received_functions[reference] = work
    return work


def context_values(context: RunContext) -> dict[str, object]:
    """The context's fields as plain values: its schedule time in ISO 8601 (lossless: datetime.fromisoformat)."""
    return {**vars(context), "schedule_time": context.schedule_time.isoformat()}


def context_of(values: dict[str, object]) -> RunContext:
    """The context made as pickle restores one (cheaper than a frozen dataclass's __init__)."""
    context = object.__new__(RunContext)
    context.__dict__.update(values, schedule_time=dt.datetime.fromisoformat(values["schedule_time"]))
    return context


def send(fd: int, message: bytes) -> None:
    """One message, its length ahead of it, in one write (a pipe takes a run's or a report's whole)."""
    data = HEADER.pack(len(message)) + message
    while data:
        data = data[os.write(fd, data) :]


def receive(fd: int) -> memoryview:
    """One message, in one read when it fits; EOFError at the end of the pipe."""
    data = os.read(fd, BUFFER)
    while len(data) < HEADER.size or len(data) < HEADER.size + HEADER.unpack_from(data)[0]:
        more = os.read(fd, BUFFER)
        if not more:
            raise EOFError
        data += more
    return memoryview(data)[HEADER.size :]


class Worker:
    """One warm worker, seen from the handler: its process and two one-way pipes (cheaper than a socket pair)."""

    def __init__(self) -> None:
        their_runs, self.runs = PROCESSES.Pipe(duplex=False)
        self.reports, their_reports = PROCESSES.Pipe(duplex=False)
        self.run_fd, self.report_fd = self.runs.fileno(), self.reports.fileno()
        self.theirs = (their_runs, their_reports)  # closed here once it started: its end of each pipe is its own
        # The runs it took (shared memory, no message), against those sent: a death before taking one did not run it.
        self.taken = PROCESSES.RawValue("Q", 0)
        self.sent = 0
        self.process = PROCESSES.Process(target=_serve, args=(*self.theirs, self.taken), name="stop-worker")
        # Its report pipe and sentinel, polled together by a poll object made once (started).
        self.watch = None

    def started(self) -> None:
        self.watch = select.poll()
        for fd in (self.report_fd, self.process.sentinel):
            self.watch.register(fd, select.POLLIN)

    def alive(self) -> bool:
        """Neither it nor its fork server has ended, and no stray report waits: one poll."""
        return not self.watch.poll(0)

    def retire(self) -> int | None:
        """Kills its group (the worker and anything it started) and reaps it; its exit code. Never raises."""
        kill_group(self.process.pid)
        exit_code = None
        with contextlib.suppress(Exception):
            if self.process.exitcode is None:  # not yet its group's leader (still starting)
                self.process.kill()
            self.process.join(REAP_SECONDS)
            exit_code = self.process.exitcode
            if exit_code is not None:
                self.process.close()
        self.close()
        return exit_code

    def close(self) -> None:
        """Closes the handler's ends of its pipes: at EOF, a worker ends (and a dead one's reports are never read)."""
        self.runs.close()
        self.reports.close()


_idle: list[Worker] = []  # warm workers no run holds; a run takes one (the pool grows to the runs at once)
_idle_lock = threading.Lock()


def _serve(runs: multiprocessing.connection.Connection, reports: multiprocessing.connection.Connection, taken) -> None:
    """The worker's process: runs one run after another and ends after a run that left anything."""
    os.setsid()  # its own group: kill_group takes what the work starts with it
    _become_subreaper()
    handler = multiprocessing.parent_process().sentinel  # at EOF once the handler's process is gone
    threading.Thread(target=_die_with, args=(handler,), daemon=True, name="die-with-handler").start()
    run_log.configure_work_logging({})
    own_threads, fresh = _thread._count(), _state(kept=True)
    their_runs, reports = runs.fileno(), reports.fileno()
    try:
        while True:
            try:
                message = receive(their_runs)
            except EOFError:  # the handler closed the pipe: no more runs
                break
            taken.value += 1
            try:
                reference, values, fields = unpacked(message)
                work, context = work_of(reference), context_of(values)
            except BaseException as error:  # noqa: BLE001 - the work's module fails to load: told like its own error
                ending = ending_after(error)
            else:
                run_log.RUN_FIELDS.set(fields)  # the run's fields on the work's log lines
                ending = ending_of(work, context)
            sys.stdout.flush()  # before the report: the handler may kill the group once it has it
            sys.stderr.flush()
            left = leftovers(own_threads, fresh)
            send(reports, packed((ending.values(), left)))
            if left:
                break
    finally:
        os._exit(0)


def _become_subreaper() -> None:
    """Orphans of the work's processes become the worker's children, so that waitpid sees every descendant."""
    with contextlib.suppress(Exception):  # not Linux: _children_left sees only its own children
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _die_with(handler: int) -> None:
    """Kills the work's group once the handler's process is gone: no one would kill it at the deadline."""
    multiprocessing.connection.wait([handler])
    os.killpg(0, signal.SIGKILL)


def _state(*, kept: bool = False) -> dict[str, object]:
    """What a run may change in its process that the next run would inherit; read raw (signal.getsignal makes enums)."""
    mask = os.umask(0o22)
    os.umask(mask)
    handlers = list(map(_signal.getsignal, CATCHABLE))
    environment = os.environ._data.copy() if kept else os.environ._data
    return {"cwd": os.getcwd(), "environment": environment, "signal handlers": handlers, "umask": mask}


def leftovers(own_threads: int, fresh: Mapping[str, object]) -> str:
    """What the run left behind, or "": a process or thread still running, the process state it changed."""
    until = time.monotonic() + LEFTOVER_GRACE_SECONDS
    while (threads := _thread._count() - own_threads) and time.monotonic() < until:
        time.sleep(0.001)  # a thread the work joined may take a moment to go
    left = ["a process it started still runs"] if _children_left() else []
    left += [f"{threads} thread(s) it started still run"] if threads else []
    state = _state()
    left += [f"it changed the {name}" for name, value in state.items() if value != fresh[name]]
    return "; ".join(left)


def _children_left() -> bool:
    """Reaps the worker's ended children; True if one still runs (a subreaper's children: every descendant)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return False
        if pid == 0:
            return True


def kill_group(pid: int | None) -> None:
    """SIGKILL to the work's process group (its id is the worker's pid); nothing if none is left."""
    if pid is not None:  # ProcessLookupError: every process of it ended, or the worker is not its leader yet
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def run_until_stopped(
    work: Callable[[RunContext], object],
    context: RunContext,
    fields: Mapping[str, object],
    stop_at: float,
    preload: Iterable[str] = (),
) -> Ending:
    """Runs the work in a warm worker until it ends or time.monotonic() reaches `stop_at`; never raises.
    `preload`: the modules the fork server imports once."""
    try:  # packed first: nothing is sent if that fails
        message = packed((work_reference(work), context_values(context), dict(fields)))
    except Exception as error:  # noqa: BLE001 - the work cannot be pickled: nothing runs
        return Ending(Ended.NOT_STARTED, error_type=type(error).__name__, message=shown(error))
    while True:
        worker = _take_idle() or _start(stop_at, preload)
        if isinstance(worker, Ending):
            return worker
        try:
            send(worker.run_fd, message)
        except OSError:  # it died idle (out of memory, a signal): another one
            worker.retire()
            continue
        worker.sent += 1
        ending = _wait(worker, stop_at)
        if ending is not None:
            return ending


def milliseconds(seconds: float | None) -> int | None:
    """A poll's timeout: whole milliseconds, rounded up (never early); None waits for ever."""
    return None if seconds is None else math.ceil(seconds * 1000)


def _take_idle() -> Worker | None:
    """A warm worker still alive, or None; a dead one is retired."""
    while True:
        with _idle_lock:
            if not _idle:
                return None
            worker = _idle.pop()  # the last used: its pages are the warmest
        if worker.alive():
            return worker
        worker.retire()


def _put_idle(worker: Worker) -> None:
    with _idle_lock:
        _idle.append(worker)


def _retire_idle() -> None:
    with _idle_lock:
        workers = _idle[:]
        _idle.clear()
    for worker in workers:
        worker.retire()


atexit.register(_retire_idle)  # before multiprocessing's own exit handler, which would wait for every worker to end


def _start(stop_at: float, preload: Iterable[str]) -> Worker | Ending:
    """A new worker, started before `stop_at`, else NOT_STARTED; one started late is left idle for the next run."""
    PROCESSES.set_forkserver_preload(sorted({__name__, *preload}))
    worker, failed, gave_up = Worker(), [], threading.Event()

    def start() -> None:
        try:
            worker.process.start()
            worker.started()
        except Exception as error:  # noqa: BLE001 - no process (fork failed): a retry may find one
            failed.append(Ending(Ended.NOT_STARTED, error_type=type(error).__name__, message=shown(error)))
            worker.close()
        finally:
            for end in worker.theirs:
                end.close()
        with _idle_lock:
            if gave_up.is_set() and not failed:
                _idle.append(worker)  # started too late for its run: warm for the next
            gave_up.set()

    began = time.monotonic()
    starter = threading.Thread(target=start, name="start-stop-worker", daemon=True)
    starter.start()
    starter.join(max(0.0, stop_at - began))
    with _idle_lock:
        if gave_up.is_set():  # the start ended: it is ours
            return failed[0] if failed else worker
        gave_up.set()
    server = forkserver._forkserver  # the one PROCESSES uses
    with server._lock:
        pid = server._forkserver_pid
        if pid is not None and time.monotonic() - _waited_since.setdefault(pid, began) > FORK_SERVER_STUCK_SECONDS:
            os.kill(pid, signal.SIGKILL)
            server._stop_unlocked()  # reaps it and forgets it: the next start starts a new one
    return Ending(Ended.NOT_STARTED, error_type="TimeoutError", message="no process before the job's deadline")


def _wait(worker: Worker, stop_at: float) -> Ending | None:
    """The worker's report, or how the run ended without one; None if the worker died before it took the run."""
    ending, left, exit_code = None, "no report", None
    try:
        ready = worker.watch.poll(milliseconds(max(0.0, stop_at - time.monotonic())))
        # A report sent just before the worker's exit is read first.
        if worker.report_fd in dict(ready) or worker.reports.poll(0):
            try:
                values, left = unpacked(receive(worker.report_fd))
                ending = Ending.of(values)
            except Exception:  # noqa: BLE001 - EOF, a broken pipe, a report cut short: none
                ending, left = None, "no report"
        elif not ready:
            ending, left = Ending(Ended.STOPPED), "stopped"
    finally:  # a dead fork server (its sentinel closed) left the work running too
        if left:
            exit_code = worker.retire()
        else:
            _put_idle(worker)
    if ending is None and worker.taken.value < worker.sent:
        return None
    return ending or Ending(Ended.DIED, exit_code=exit_code)
