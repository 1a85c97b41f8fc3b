"""The baked handler side by side with the seed's two-transaction sample, on Google's Firestore emulator.

Measures, in one run:
- Firestore RPCs per fresh run, per replay of a completed run and per takeover of an expired lease, for
  the baked handler (main.handle_delivery: the real path behind the HTTP entry point) and for the
  seed's sample (benchmarks/seed_sample.py), counted by name at the gRPC channel;
- median and p95 latency of a fresh run for both, and their ratio;
- cold import time and peak RSS of the baked main.py against a bare functions-framework function that
  imports google-cloud-firestore (benchmarks/bare_function.py), each in fresh processes;
- the stop's cost per delivery (the baked stop.py: the work in a warm worker, forked once from a fork server)
  against the in-thread call of the work: wall time per delivery, the first run's (which starts the fork
  server), the fork server's memory and a worker's own (benchmarks/stop_cost.py sets it beside the seed's
  sample and the per-process stop it replaced, at 1 to 1,000 jobs);
- the load figures of the load test, if it hands them over with --load-json (see LOAD_FIELDS).

It proves the template against the seed, so it lives in the template, not in a bake. Run it from a
baked project's directory (FIRESTORE_EMULATOR_HOST if set, else it starts an emulator); `make bench` bakes one:
    python /path/to/template/benchmarks/run.py [--runs 200] [--import-runs 7] [--write FILE] [--json out.json]
Prints one Markdown table (figures.py). Exits 1 if the baked handler's RPC counts exceed their targets.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import hashlib
import json
import logging
import os
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Mapping
from pathlib import Path

ROOT = Path.cwd()  # the baked project under test
BENCHMARKS = Path(__file__).resolve().parent
if not (ROOT / "dedup.py").is_file():
    sys.exit(f"benchmarks/run.py: {ROOT} is not a baked project (no dedup.py); run it from a bake's directory")
sys.path[:0] = [str(ROOT), str(BENCHMARKS)]

import dedup  # noqa: E402
import grpc  # noqa: E402
import ledger  # noqa: E402
import seed_sample  # noqa: E402
import stop_probe  # noqa: E402
from figures import LOAD_FIELDS, document, over_target, read_load, summary, table  # noqa: E402
from google.cloud import firestore  # noqa: E402
from google.cloud.logging.handlers import StructuredLogHandler  # noqa: E402
from keys import JOB_NAME_HEADER, SCHEDULE_TIME_HEADER, read_run_key  # noqa: E402
from ledger import RunLedger, firestore_client  # noqa: E402
from scheduled_dedup_tools.firestore_emulator import Emulator, EmulatorNotFound  # noqa: E402

PROJECT = "dedup-benchmark"
WARMUP_RUNS = 5

# Measured in a fresh interpreter: the time to import one module, and the process's peak RSS after it.
# Peak RSS is VmHWM, not getrusage's ru_maxrss: that survives exec, so a child of this (larger) process
# would report the parent's size.
IMPORT_PROBE = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
start = time.perf_counter()
__import__(sys.argv[2])
seconds = time.perf_counter() - start
peak = next(line for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({"seconds": seconds, "peak_rss_kb": int(peak.split()[1])}))
"""


class RpcCounter(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor):
    """Records the method name (Commit, BatchGetDocuments, BeginTransaction, ...) of every call sent."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def take(self) -> collections.Counter[str]:
        """The calls since the last take."""
        taken = collections.Counter(self.calls)
        self.calls.clear()
        return taken

    def intercept_unary_unary(self, continuation, client_call_details, request):
        self.calls.append(client_call_details.method.rsplit("/", 1)[-1])
        return continuation(client_call_details, request)

    def intercept_unary_stream(self, continuation, client_call_details, request):
        self.calls.append(client_call_details.method.rsplit("/", 1)[-1])
        return continuation(client_call_details, request)


def count_rpcs(client: firestore.Client) -> RpcCounter:
    """Route an emulator client's channel through a counter. Must precede the client's first call: the
    client opens its channel then (through `_emulator_channel`) and binds every RPC stub to it."""
    if client._firestore_api_internal is not None:
        raise RuntimeError("count_rpcs: the client has already opened its channel")
    counter = RpcCounter()
    open_channel = client._emulator_channel
    client._emulator_channel = lambda transport: grpc.intercept_channel(open_channel(transport), counter)
    return counter


def scheduler_headers(job: str, schedule_time: dt.datetime) -> dict[str, str]:
    return {
        JOB_NAME_HEADER: job,
        SCHEDULE_TIME_HEADER: schedule_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


class Side:
    """One handler under test: how to deliver to it, and how to leave a claim whose attempt died."""

    name: str
    counter: RpcCounter

    def deliver(self, headers: Mapping[str, str]) -> tuple[int, str]:
        raise NotImplementedError

    def crashed_claim(self, headers: Mapping[str, str]) -> None:
        raise NotImplementedError

    def as_another_instance(self) -> None:
        """From now on, deliveries reach it as they would reach another instance (the seed's keeps nothing)."""


class Baked(Side):
    """The baked handler, through main.handle_delivery with its own (counted) cached Firestore client."""

    name = "Baked handler"

    def __init__(self, setup_client: firestore.Client) -> None:
        import main  # after the environment is set: the first client is made from it

        self.main = main
        # The work is empty on both sides, as in the seed's sample: what is measured is the protocol
        # (whatever job.py the chosen target bakes, e.g. one that calls a Google API). The RPCs are counted
        # with the work in its own process (the stop, as deployed); the latency against the seed with the
        # work called in-thread, as the seed does: the stop's own cost is measured on its own (measure_stop).
        main.run = stop_probe.empty_work
        self.config = stop_probe.baked_config()
        self.counter = count_rpcs(firestore_client(self.config.project, self.config.database))
        self.setup = RunLedger(self.config, client=setup_client)

    def deliver(self, headers: Mapping[str, str]) -> tuple[int, str]:
        outcome, detail = self.main.handle_delivery(headers)
        return self.main.ANSWERS[outcome][0], f"{outcome}: {detail}"

    def as_another_instance(self) -> None:
        ledger._done_here.clear()  # the runs this instance saw done (ledger.DONE_HERE_LIMIT)

    def crashed_claim(self, headers: Mapping[str, str]) -> None:
        # The protocol's own claim, made one lease ago by an attempt that then died.
        now = dedup.utcnow()
        key = read_run_key(headers, self.config, now)
        self.setup.claim(key, now - self.config.lease - dt.timedelta(seconds=1))


class Seed(Side):
    """The seed's sample, with its own counted client and collection."""

    name = "Seed sample"

    def __init__(self, client: firestore.Client, setup_client: firestore.Client, collection: str) -> None:
        self.counter = count_rpcs(client)
        self.client = client
        self.setup = setup_client
        self.collection = collection

    def deliver(self, headers: Mapping[str, str]) -> tuple[int, str]:
        body, status = seed_sample.handle_scheduled_job(headers, self.client, self.collection)
        return status, body

    def crashed_claim(self, headers: Mapping[str, str]) -> None:
        # The seed's own claim_run, made one lease ago; its key as seed_sample.handle_scheduled_job makes it.
        job, time_text = headers[JOB_NAME_HEADER], headers[SCHEDULE_TIME_HEADER]
        ref = self.setup.collection(self.collection).document(hashlib.sha256(f"{job}/{time_text}".encode()).hexdigest())
        past = dt.datetime.now(dt.UTC) - seed_sample.LEASE - dt.timedelta(seconds=1)
        seed_sample.claim_run(self.setup.transaction(), ref, "crashed-attempt", past)


def expect(side: Side, what: str, answer: tuple[int, str], status: int) -> None:
    if answer[0] != status:
        raise RuntimeError(f"{side.name}, {what}: answered {answer}, expected HTTP {status}")


def measure_rpcs(side: Side, schedule_time: dt.datetime) -> dict[str, collections.Counter[str]]:
    fresh = scheduler_headers("rpc-fresh", schedule_time)
    takeover = scheduler_headers("rpc-takeover", schedule_time)
    side.counter.take()
    expect(side, "fresh run", side.deliver(fresh), 200)
    counts = {"fresh": side.counter.take()}
    expect(side, "replay", side.deliver(fresh), 200)
    counts["replay"] = side.counter.take()
    side.as_another_instance()
    expect(side, "replay on another instance", side.deliver(fresh), 200)
    counts["replay_elsewhere"] = side.counter.take()
    side.crashed_claim(takeover)
    side.counter.take()
    expect(side, "takeover", side.deliver(takeover), 200)
    counts["takeover"] = side.counter.take()
    return counts


def measure_stop(runs: int) -> dict:
    """The stop's figures (stop_probe.measure), in a fresh process of its own: its first run starts the fork
    server, as the first run on a new instance does, and its `__main__` (`-c`, as functions-framework's is a
    small script) is not run again in every work process, which a multiprocessing child does with a script's."""
    probe = f"import json, stop_probe; print(json.dumps(stop_probe.measure({runs})))"
    pythonpath = os.pathsep.join([str(ROOT), str(BENCHMARKS)])
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": pythonpath},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def time_fresh_runs(sides: list[Side], runs: int, schedule_time: dt.datetime) -> dict[str, list[float]]:
    """Seconds per fresh run, the sides interleaved so that both see the same machine load."""
    seconds: dict[str, list[float]] = {side.name: [] for side in sides}
    rpcs: dict[str, set[int]] = {side.name: set() for side in sides}
    for i in range(-WARMUP_RUNS, runs):
        for side in sides:
            headers = scheduler_headers(f"latency-{i + WARMUP_RUNS}", schedule_time)
            side.counter.take()
            start = time.perf_counter()
            answer = side.deliver(headers)
            elapsed = time.perf_counter() - start
            expect(side, "fresh run", answer, 200)
            if i >= 0:
                seconds[side.name].append(elapsed)
                rpcs[side.name].add(side.counter.take().total())
    for side in sides:  # a fresh run's cost is deterministic: the counted run stands for all
        if len(rpcs[side.name]) != 1:
            raise RuntimeError(f"{side.name}: fresh runs cost different RPC counts: {sorted(rpcs[side.name])}")
    return seconds


def import_once(module_dir: Path, module: str) -> dict[str, float]:
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE, str(module_dir), module],
        cwd=module_dir,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def measure_imports(repetitions: int) -> dict[str, dict[str, float]]:
    """Median import time and peak RSS of main.py and of the bare function, interleaved like the latency."""
    probes = {"baked": (ROOT, "main"), "bare": (BENCHMARKS, "bare_function")}
    samples: dict[str, list[dict[str, float]]] = {name: [] for name in probes}
    for _ in range(repetitions):
        for name, probe in probes.items():
            samples[name].append(import_once(*probe))
    return {
        name: {
            "seconds": statistics.median(s["seconds"] for s in runs),
            "peak_rss_mb": statistics.median(s["peak_rss_kb"] for s in runs) / 1024,
        }
        for name, runs in samples.items()
    }


def benchmark(host: str, runs: int, import_runs: int, load: dict | None) -> dict:
    run = uuid.uuid4().hex[:8]
    os.environ["FIRESTORE_EMULATOR_HOST"] = host
    database = stop_probe.baked_config(project=PROJECT, collection=f"bench-{run}-baked").database
    setup = firestore.Client(project=PROJECT, database=database)
    # A just-started emulator's first answer can take longer than the handler's RPC timeout.
    setup.collection(f"bench-{run}-warmup").document("warmup").get(timeout=60)
    stop_figures = measure_stop(runs)  # first: its first call starts the fork server
    baked = Baked(setup)
    seed = Seed(firestore.Client(project=PROJECT, database=database), setup, f"bench-{run}-seed")
    # The function's JSON log lines are still formatted (part of its cost), then dropped.
    with open(os.devnull, "w") as devnull:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, StructuredLogHandler):
                handler.setStream(devnull)
        # A minute ago: inside the retention window, and keyed like a real Scheduler run.
        schedule_time = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
        rpcs = {"baked": measure_rpcs(baked, schedule_time), "seed": measure_rpcs(seed, schedule_time)}
        baked.main.run_until_stopped = stop_probe.in_thread
        seconds = time_fresh_runs([baked, seed], runs, schedule_time)
    return {
        "rpcs": rpcs,
        "latency": {"baked": summary(seconds[baked.name]), "seed": summary(seconds[seed.name])},
        "import": measure_imports(import_runs),
        "stop": stop_figures,
        "load": load,
    }


def at_least(minimum: int):
    def parse(text: str) -> int:
        if not text.isdigit() or int(text) < minimum:
            raise argparse.ArgumentTypeError(f"{text!r}: must be a whole number ≥ {minimum}")
        return int(text)

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=at_least(2), default=200, help="timed fresh runs per handler (≥ 2 for a p95)")
    parser.add_argument("--import-runs", type=at_least(1), default=7, help="fresh processes per import timing")
    parser.add_argument("--write", metavar="PATH", help="also write table, command, machine to this file")
    parser.add_argument("--json", metavar="PATH", help="also write the raw figures as JSON")
    parser.add_argument("--load-json", metavar="PATH", help="the load test's figures: " + ", ".join(LOAD_FIELDS))
    args = parser.parse_args(argv)
    load = read_load(args.load_json)

    emulator = None
    host = os.environ.get("FIRESTORE_EMULATOR_HOST")
    if not host:
        try:
            emulator = Emulator().start()
        except EmulatorNotFound as error:
            print(error, file=sys.stderr)
            return 2
        host = emulator.host
    try:
        results = benchmark(host, args.runs, args.import_runs, load)
    finally:
        if emulator:
            emulator.stop()

    report = table(results, args.runs, args.import_runs)
    print(report)
    command = shlex.join(["python", *sys.argv])
    if args.write:
        Path(args.write).write_text(document(report, command), encoding="utf-8")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, sort_keys=True), encoding="utf-8")
    failures = over_target(results["rpcs"]["baked"])
    for failure in failures:
        print(f"over target: {failure}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
