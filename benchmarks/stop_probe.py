"""The stop's cost per delivery (the baked stop.py) against today's in-thread call of the work; run.py runs
`measure` in a fresh process from the baked project's directory. The works are module-level, so that the
stop can send them to the work's process by name, as it sends job.run."""

from __future__ import annotations

import dataclasses
import datetime as dt
import importlib
import importlib.util
import multiprocessing.forkserver
import os
import resource
import statistics
import sys
import time
from pathlib import Path

import seed_sample


def baked_config(**changes: str):
    """The configuration of the bake on sys.path with `changes` (project, collection), for this process: config.use
    where the bake reads config.yaml through one typed model (issue 28; CONFIG_YAML names another file), else the
    DEDUP_* variables an older bake (a benchmark's reference) reads."""
    if importlib.util.find_spec("config") is not None and hasattr(config := importlib.import_module("config"), "use"):
        config.use(dataclasses.replace(config.current(), **changes))
        return config.current()
    os.environ.update({f"DEDUP_{key.upper()}": value for key, value in changes.items()})
    dedup = importlib.import_module("dedup")  # the oldest references kept DedupConfig there
    settings = dedup if hasattr(dedup, "DedupConfig") else importlib.import_module("settings")
    return settings.DedupConfig.from_env()


PRELOAD = ("audit", "job")  # what the baked main.py has the fork server import


def empty_work(context) -> None:
    """The seed sample's empty work: what is measured is the call around it."""
    seed_sample.run_job_logic()


def private_memory_kb(context) -> int:
    """The work's process's own memory (a warm worker's: not shared with the fork server it was forked from), in kB."""
    lines = Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]
    fields = dict(line.split(":", 1) for line in lines)
    return sum(int(fields[name].split()[0]) for name in ("Private_Clean", "Private_Dirty"))


def reaped_cpu_seconds(pid: int) -> float:
    """The user and system time of a process's reaped children, from /proc (clock ticks: 10 ms; the per-process
    stop's work processes, reaped by its fork server, cost some 20 ms each)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return 0.0
    return sum(int(tick) for tick in fields[13:15]) / os.sysconf("SC_CLK_TCK")  # cutime cstime


def process_cpu_seconds(pid: int) -> float:
    """A live process's own CPU time, every thread's, to the nanosecond: its process CPU clock (Linux's
    MAKE_PROCESS_CPUCLOCK(pid, CPUCLOCK_SCHED); Python has no clock_getcpuclockid). /proc's figures count in
    clock ticks (10 ms): a warm worker's fraction of a millisecond a run would be a mean of whole ticks. 0 once the
    process is gone."""
    try:
        return time.clock_gettime((~pid << 3) | 2)
    except OSError:
        return 0.0


def cpu_seconds(*, own_first: bool = True) -> float:
    """The CPU a delivery costs, wherever the stop puts the work: this process (with the children it reaped), its
    fork server (with the work's processes it reaped: a stop that forks one per run) and the stop's live warm
    workers (not reaped while they serve), if this bake's stop keeps any. A reading that starts an interval passes
    own_first=False, so that reading the other processes stays outside it (and inside none)."""
    server = getattr(multiprocessing.forkserver._forkserver, "_forkserver_pid", None)
    workers = [worker.process.pid for worker in list(getattr(sys.modules.get("stop"), "_idle", ()))]

    def elsewhere() -> float:
        seconds = resource.getrusage(resource.RUSAGE_CHILDREN)
        seconds = seconds.ru_utime + seconds.ru_stime
        if server is not None:
            seconds += process_cpu_seconds(server) + reaped_cpu_seconds(server)
        return seconds + sum(process_cpu_seconds(pid) for pid in workers)

    if own_first:
        own = time.process_time()
        return own + elsewhere()
    others = elsewhere()
    return others + time.process_time()


def in_thread(work, context, fields, stop_at, preload=()):
    """Today's in-thread call, in the shape of the baked main.run_until_stopped: the work called right here."""
    import stop

    return stop.ending_of(work, context)


def _ms(seconds: list[float]) -> dict[str, float]:
    ms = [s * 1000 for s in seconds]
    return {"median_ms": statistics.median(ms), "p95_ms": statistics.quantiles(ms, n=20, method="inclusive")[18]}


def measure(runs: int) -> dict:
    """Wall time and CPU (this process's and the worker's) per run through the stop and in-thread (interleaved: the
    same machine load), the first run's (it starts the fork server and a warm worker), the fork server's RSS and a
    warm worker's own memory. Run after run in a loop: the caches stay warm, unlike between real deliveries
    (benchmarks/stop_cost.py measures those)."""
    import stop
    from run_context import RunContext

    context = RunContext("0" * 64, "probe", "probe", dt.datetime.now(dt.UTC), "attempt", 1, "p-123456", "europe-west1")

    def in_process(work=empty_work):
        ending = stop.run_until_stopped(work, context, {}, time.monotonic() + 60, preload=PRELOAD)
        if ending.how is not stop.Ended.RETURNED:
            raise RuntimeError(f"the stop's run ended {ending}")
        return ending

    def in_this_thread():
        return in_thread(empty_work, context, {}, 0)

    start = time.perf_counter()
    in_process()
    first = time.perf_counter() - start
    seconds: dict[str, list[float]] = {"process": [], "thread": []}
    cpu: dict[str, list[float]] = {"process": [], "thread": []}
    for _ in range(runs):
        for name, call in (("process", in_process), ("thread", in_this_thread)):
            before, start = cpu_seconds(own_first=False), time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
            cpu[name].append(cpu_seconds() - before)
    server = multiprocessing.forkserver._forkserver._forkserver_pid  # this process's fork server
    rss = next(line for line in Path(f"/proc/{server}/status").read_text().splitlines() if line.startswith("VmRSS:"))
    return {
        **{name: _ms(seconds[name]) | {"cpu_ms": statistics.mean(cpu[name]) * 1000} for name in seconds},
        "first_ms": first * 1000,
        "fork_server_rss_mb": int(rss.split()[1]) / 1024,
        "work_process_private_mb": int(in_process(private_memory_kb).result) / 1024,
    }
