"""One side of benchmarks/stop_cost.py: run from a baked project's directory with N jobs configured (two_bakes.py).

Prints one JSON object: fresh-run and replay latency (medians) and CPU per delivery of the seed's sample, of the
baked handler with the work called in-thread (the design before the stop), and of the baked handler with its own
stop (stop.py: whatever this bake's is), the three interleaved delivery by delivery so that they see the same machine
load; and the first run through the stop after an instance start (it starts the fork server and the work's process).
The work is the seed's empty work. CPU: stop_probe.cpu_seconds, a mean over the deliveries, fresh and replays apart.

Everything runs under the `__main__` guard: the stop's fork server imports this script again as its main module.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import statistics
import sys
import time
import uuid
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parent
sys.path[:0] = [str(Path.cwd()), str(BENCHMARKS)]


def measure(deliveries: int) -> dict:
    import run  # benchmarks/run.py: its handler and seed sides
    import stop
    import stop_probe
    from google.cloud import firestore
    from google.cloud.logging.handlers import StructuredLogHandler
    from stop_probe import cpu_seconds

    config = stop_probe.baked_config(project=run.PROJECT)
    setup = firestore.Client(project=config.project, database=config.database)
    setup.collection("stop-cost-warmup").document("warmup").get(timeout=60)
    baked = run.Baked(setup)
    seed = run.Seed(firestore.Client(project=config.project, database=config.database), setup, f"seed-{uuid.uuid4()}")
    with open(os.devnull, "w") as devnull:
        for handler in logging.getLogger().handlers:
            if isinstance(handler, StructuredLogHandler):
                handler.setStream(devnull)
        job = next(name for name, spec in config.jobs.items() if spec.job_id == "nightly")
        minute = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(minutes=1)
        times = iter(minute - dt.timedelta(seconds=second) for second in range(10**6))
        stopped = baked.main.run_until_stopped  # this bake's stop

        def through(stop_function):
            def deliver(headers):
                baked.main.run_until_stopped = stop_function
                return baked.deliver(headers)

            return deliver

        sides = {"seed": seed.deliver, "in_thread": through(stop_probe.in_thread), "stop": through(stopped)}
        through(stop_probe.in_thread)(run.scheduler_headers(job, next(times)))  # opens the handler's channel
        before, start = cpu_seconds(own_first=False), time.perf_counter()
        first = sides["stop"](run.scheduler_headers(job, next(times)))  # starts the fork server and the work's process
        first_ms, first_cpu_ms = (time.perf_counter() - start) * 1000, (cpu_seconds() - before) * 1000
        if first[0] != 200:
            raise RuntimeError(f"the first run through the stop: {first}")
        figures = {name: {"fresh": [], "replay": [], "fresh_cpu": [], "replay_cpu": []} for name in sides}
        for index in range(-run.WARMUP_RUNS, deliveries):
            for name, deliver in sides.items():
                headers = run.scheduler_headers(job, next(times))
                for kind in ("fresh", "replay"):
                    before, start = cpu_seconds(own_first=False), time.perf_counter()
                    answer = deliver(headers)
                    seconds, cpu = time.perf_counter() - start, cpu_seconds() - before
                    if answer[0] != 200:
                        raise RuntimeError(f"{name}, {kind}: {answer}")
                    if index >= 0:
                        figures[name][kind].append(seconds * 1000)
                        figures[name][f"{kind}_cpu"].append(cpu * 1000)
    return {
        "jobs": len(config.jobs),
        "first_run_ms": round(first_ms, 1),
        "first_run_cpu_ms": round(first_cpu_ms, 1),
        "warm_workers": len(getattr(stop, "_idle", ())),
        **{
            name: {
                "fresh_ms": round(statistics.median(values["fresh"]), 2),
                "replay_ms": round(statistics.median(values["replay"]), 2),
                "fresh_cpu_ms": round(statistics.mean(values["fresh_cpu"]), 2),
                "replay_cpu_ms": round(statistics.mean(values["replay_cpu"]), 2),
            }
            for name, values in figures.items()
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deliveries", type=int, default=100, help="timed fresh runs per side (each then replayed)")
    args = parser.parse_args()
    print(json.dumps(measure(args.deliveries)))


if __name__ == "__main__":
    main()
