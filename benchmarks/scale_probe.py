"""One side of benchmarks/scale.py: run from a baked project's directory with N jobs configured.

Prints one JSON object: the CPU one fresh delivery costs (this process and its children: a stop that runs
the work in a child process pays there), median of --deliveries, through functions-framework's own app;
and the Firestore documents the audit reads per hour, counted at the gRPC channel, over --audits hourly
audits on a moved clock (the first, which may be a first sweep, is left out of the steady state and
reported on its own).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import logging
import os
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path.cwd()))

import grpc  # noqa: E402
from google.cloud import firestore  # noqa: E402
from stop_probe import baked_config, cpu_seconds  # noqa: E402  (this script's directory is on the path)


class DocumentCounter(grpc.UnaryStreamClientInterceptor, grpc.UnaryUnaryClientInterceptor):
    """Documents requested by BatchGetDocuments (every get and get_all of the client) and RunQuery calls."""

    def __init__(self) -> None:
        self.documents = 0

    def intercept_unary_stream(self, continuation, details, request):
        if details.method.endswith("/BatchGetDocuments"):
            self.documents += len(request.documents)
        return continuation(details, request)

    def intercept_unary_unary(self, continuation, details, request):
        return continuation(details, request)


COUNTER = DocumentCounter()
_open_channel = firestore.Client._emulator_channel
firestore.Client._emulator_channel = lambda self, transport: grpc.intercept_channel(
    _open_channel(self, transport), COUNTER
)


def headers(job: str, moment: dt.datetime) -> dict[str, str]:
    return {"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": moment.strftime("%Y-%m-%dT%H:%M:%SZ")}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--deliveries", type=int, default=30)
    parser.add_argument("--audits", type=int, default=4)
    args = parser.parse_args()

    import dedup
    import functions_framework

    config = baked_config()  # the reference bake (scale.py's REFERENCE) and this one read theirs alike

    app = functions_framework.create_app(target="handle_scheduled_job", source=str(Path.cwd() / "main.py"))
    client = app.test_client()
    logging.getLogger().handlers[0].setStream(open(os.devnull, "w"))  # noqa: SIM115 (formatted, then dropped)
    job = next(name for name, spec in config.jobs.items() if spec.job_id == "nightly")
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    costs = []
    for i in range(args.deliveries + 3):  # 3 warm-ups: the first delivery opens the channel
        before = cpu_seconds(own_first=False)
        answer = client.post("/", headers=headers(job, now - dt.timedelta(seconds=30 + i)))
        costs.append(cpu_seconds() - before)
        assert answer.status_code == 200 and answer.text.startswith("processed"), answer.text
    # Steady state: every job audited for days (the incremental audit's bookmark; an older reference version
    # reads a marker per job), so no audit is a job's first.
    start = now.replace(minute=0) + dt.timedelta(hours=1)
    since = start - dt.timedelta(days=2)
    store = firestore.Client(project=config.project, database=config.database).collection(config.collection)
    bookmark = {name: {"since": since, "judged_until": since} for name in config.jobs}
    store.document("audit-cursor").set({"jobs": bookmark, "last_full_sweep": None})
    batch = store._client.batch()
    for i, name in enumerate(config.jobs):
        batch.set(store.document(f"audit-start-{name}"), {"since": since, "job_name": name})
        if i % 400 == 399:
            batch.commit()
            batch = store._client.batch()
    batch.commit()
    real_utcnow = dedup.utcnow
    # The audit runs in this process, so that its reads are counted at this process's channel on the moved
    # clock (a bake whose stop.py runs the work in a process of its own: the same audit code, called here).
    handler = sys.modules["main"]
    if hasattr(handler, "run_until_stopped"):
        import stop

        handler.run_until_stopped = lambda work, context, fields, stop_at, preload=(): stop.ending_of(work, context)
    reads = []
    for hour in range(args.audits):
        moment = start + dt.timedelta(hours=hour)
        dedup.utcnow = lambda moment=moment: moment
        before = COUNTER.documents
        answer = client.post("/", headers=headers(config.audit_job, moment))
        assert answer.status_code == 200 and answer.text.startswith("processed"), answer.text
        reads.append(COUNTER.documents - before)
    dedup.utcnow = real_utcnow
    steady = reads[1:] or reads
    print(
        json.dumps(
            {
                "jobs": len(config.jobs),
                "cpu_ms_per_delivery": round(statistics.median(costs[3:]) * 1000, 2),
                "audit_reads_first": reads[0],
                "audit_reads_per_hour": round(statistics.mean(steady), 1),
            }
        )
    )


if __name__ == "__main__":
    main()
