"""The proofs' fixtures (a pytest plugin: tests/proofs/run.py loads it with `-p proof_fixtures`): real
functions-framework servers, and a Firestore in front of the emulator that fails the calls a test arms."""

import dataclasses
import os

import pytest
from fake_firestore import FaultyFirestore
from google.cloud import firestore
from live_server import Fleet

import config

PROJECT = os.environ.get("DEDUP_TEST_PROJECT", "dedup-test-project")


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "faults: a real server SIGKILLed mid-delivery, or its Firestore hung or stopped; then retries"
    )
    config.addinivalue_line("markers", "load: concurrent duplicate deliveries on a real server; prints throughput")


@pytest.fixture
def fleet(collection, tmp_path):
    """Real functions-framework server processes on this test's collection (harness/live_server.py); killed after."""
    servers = Fleet(collection.id, tmp_path)
    yield servers
    servers.stop_all()


@pytest.fixture(scope="session")
def faulty_firestore(emulator_host):
    """A gRPC server in front of the emulator that fails the calls a test arms (harness/fake_firestore.py)."""
    fake = FaultyFirestore(emulator_host).start()
    yield fake
    fake.stop()


@pytest.fixture
def firestore_through(faulty_firestore, monkeypatch):
    """The handler's Firestore client talks to the emulator through faulty_firestore; disarmed after."""
    client = firestore_client_of(faulty_firestore.host)
    monkeypatch.setattr("ledger.firestore_client", lambda project, database: client)
    yield faulty_firestore
    faulty_firestore.clear()


def firestore_client_of(host):
    """A client of the Firestore at `host` (a client reads FIRESTORE_EMULATOR_HOST when it is made)."""
    previous = os.environ.get("FIRESTORE_EMULATOR_HOST")
    os.environ["FIRESTORE_EMULATOR_HOST"] = host
    try:
        return firestore.Client(project=PROJECT, database=config.load().database)
    finally:
        if previous is None:
            del os.environ["FIRESTORE_EMULATOR_HOST"]
        else:
            os.environ["FIRESTORE_EMULATOR_HOST"] = previous


def a_job(job_id: str, schedule: str, time_zone: str, **fields: object) -> config.Job:
    """A job of these schedule fields (and `fields`), with the defaults' numbers: what the audit judges by."""
    return dataclasses.replace(config.load().audit, job_id=job_id, schedule=schedule, time_zone=time_zone, **fields)
