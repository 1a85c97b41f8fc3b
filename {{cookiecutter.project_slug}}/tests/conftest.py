"""Fixtures: the app on the Firestore emulator (emulator_host: the tools package's plugin), a collection per test."""

import dataclasses
import datetime as dt
import io
import json
import logging
import os
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
import yaml
from functions_framework import create_app
from google.cloud import firestore
from google.cloud.logging.handlers import StructuredLogHandler

import config
import stop

PROJECT = os.environ.get("DEDUP_TEST_PROJECT", "dedup-test-project")


def in_this_process(work, context, fields, stop_at, preload=()):
    """main.run_until_stopped in the test's process, where a test can hold the work and fake its clients."""
    return stop.ending_of(work, context)


@pytest.fixture(scope="session")
def app(emulator_host):
    config.use(dataclasses.replace(config.load(), project=PROJECT))  # the session's runs, apart from other bakes'
    served = create_app("handle_scheduled_job", os.path.join(os.path.dirname(__file__), "..", "main.py"))
    sys.modules["main"].run_until_stopped = in_this_process
    return served


@pytest.fixture
def handler_module(app):
    """The main.py module the app serves (functions-framework loads its own copy as `main`)."""
    return sys.modules["main"]


@pytest.fixture
def collection(monkeypatch, emulator_host):
    name = f"runs-{uuid.uuid4().hex[:12]}"
    own = configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, project=PROJECT, collection=name))
    return firestore.Client(project=PROJECT, database=own.database).collection(name)


def configured(monkeypatch, change) -> config.Config:
    """Run this test by `change(config.current())`, e.g. `lambda loaded: loaded.everywhere(lease=...)`."""
    model = change(config.current())
    monkeypatch.setattr(config, "USED", model)
    return model


def config_file(path: Path, /, **keys: object) -> dict[str, str]:
    """config.yaml with top-level `keys` changed, at `path`; the environment that makes another process read it."""
    path.write_text(yaml.safe_dump({**config.load().source, **keys}), encoding="utf-8")
    return {config.FILE_VARIABLE: str(path)}


@pytest.fixture
def http(app, collection):
    return app.test_client()


@pytest.fixture
def log_lines():
    handler = next(h for h in logging.getLogger().handlers if isinstance(h, StructuredLogHandler))
    stream = io.StringIO()
    previous = handler.setStream(stream)
    yield lambda: [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]
    handler.setStream(previous)


@pytest.fixture
def now():
    return dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)


def scheduler_headers(job="nightly", time="2026-01-01T00:00:00Z", **extra):
    """The headers Cloud Scheduler sends (HTTP/1.1 spelling), plus any extra ones."""
    return {"X-CloudScheduler-JobName": job, "X-CloudScheduler-ScheduleTime": time, **extra}


def records(collection):
    return {doc.id: doc.to_dict() for doc in collection.stream()}


class Work:
    """Stands in for job.run: counts calls; call i can be held at a gate, fail, or fail terminally."""

    def __init__(self):
        self.calls = []
        self.gates = {}  # call index -> threading.Event the call waits for
        self.errors = {}  # call index -> exception the call raises

    def hold(self, call_index):
        self.gates[call_index] = threading.Event()
        return self.gates[call_index]

    def wait_for_calls(self, count, timeout=30):
        deadline = time.monotonic() + timeout
        while len(self.calls) < count:
            assert time.monotonic() < deadline, f"the work was called {len(self.calls)} times, not {count}"
            time.sleep(0.02)

    def __call__(self, context):
        index = len(self.calls)
        self.calls.append(context)
        if index in self.gates:
            assert self.gates[index].wait(timeout=30), "test never opened the gate"
        if index in self.errors:
            raise self.errors[index]


@pytest.fixture
def work(monkeypatch, handler_module):
    recorder = Work()
    monkeypatch.setattr(handler_module, "run", recorder)
    return recorder
