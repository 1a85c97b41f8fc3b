"""The baked Makefile on a fresh bake: `make dev` serves the function, `make fire` delivers to it, and
`make -n deploy` is config.yaml's check, then terraform init + apply with the baked variables."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid

import pytest
from conftest import bake
from firestore_emulator import free_port

pytestmark = pytest.mark.bake

# PY: the baked Makefile's interpreter; this venv already holds the baked project's pins.
MAKE_PY = f"PY={sys.executable}"


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    return bake(tmp_path_factory.mktemp("makefile"))


def make(project, *args, **env):
    return subprocess.run(
        ["make", "--no-print-directory", MAKE_PY, *args],
        cwd=project,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_http(url, process, seconds=60):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, "make dev exited before the function answered"
        try:
            urllib.request.urlopen(url, timeout=1).close()
            return
        except urllib.error.HTTPError:
            return  # any HTTP answer means the server is up (a bare GET is a 400)
        except (urllib.error.URLError, OSError):
            time.sleep(0.3)
    pytest.fail(f"make dev did not serve {url} within {seconds} s")


@pytest.fixture
def dev_server(project, emulator_host, tmp_path):
    """`make dev` in its own process group on a free port, with private data on the shared emulator."""
    port = free_port()
    log = tmp_path / "make-dev.log"
    env = {
        **os.environ,
        "FIRESTORE_EMULATOR_HOST": emulator_host,
        "DEDUP_PROJECT": "make-dev-test",
        "DEDUP_COLLECTION": f"runs-{uuid.uuid4().hex[:12]}",
    }
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", MAKE_PY, "dev", f"PORT={port}"],
            cwd=project,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", process)
        yield port, process, log
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def test_fire_at_make_dev_processes_then_skips_the_duplicate(project, dev_server):
    port, process, log = dev_server
    first = make(project, "fire", "JOB=nightly", f"PORT={port}")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "==> make fire" in first.stdout
    assert "<== 200 processed" in first.stdout
    # TIME defaulted to now, rounded down to the minute, in UTC; the replay sends the same time.
    sent = re.search(r"schedule_time=(\S+)", first.stdout)[1]
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:00Z", sent)
    second = make(project, "fire", "JOB=nightly", f"TIME={sent}", f"PORT={port}")
    assert second.returncode == 0, second.stdout + second.stderr
    assert "<== 200 duplicate" in second.stdout

    # Ctrl-C (SIGINT to the group, as a terminal sends it) stops the function and `make dev` exits.
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=30)
    deadline = time.monotonic() + 20  # make may exit before dev_server.py has finished stopping
    while "==> stopped" not in (output := log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert "ready: http://127.0.0.1:" in output and "FIRESTORE_EMULATOR_HOST=" in output
    assert "==> stopped" in output
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)


def test_fire_refuses_a_bad_time_and_a_missing_job(project):
    bad_time = make(project, "fire", "JOB=nightly", "TIME=yesterday", f"PORT={free_port()}")
    assert bad_time.returncode != 0
    assert "TIME='yesterday': is not an RFC 3339 timestamp" in bad_time.stderr
    no_job = make(project, "fire")
    assert no_job.returncode != 0
    assert "usage: make fire JOB=<job id>" in no_job.stderr


def test_make_deploy_is_terraform_init_then_apply_with_the_baked_variables(project):
    """config.yaml's rules first (Terraform checks shapes only); the project and region are config.yaml's alone."""
    dry = make(project, "-n", "deploy")
    assert dry.returncode == 0, dry.stderr
    commands = [line for line in dry.stdout.splitlines() if line.startswith("terraform") or line.endswith(" config.py")]
    assert commands[0].endswith("python config.py"), commands
    assert commands[1:] == [
        "terraform -chdir=terraform init",
        "terraform -chdir=terraform apply -var=create_firestore_database=true -var=alert_email=",
    ]
    # A default bake creates its database on a new project, and says when alerts reach nobody.
    assert "create database: true; alerts to: nobody" in dry.stdout


def test_every_target_says_what_it_does(project):
    makefile = (project / "Makefile").read_text()
    for target in ("venv", "dev", "fire", "test", "lint", "deploy"):
        assert re.search(rf"^{target}:.*## \S", makefile, re.M), f"{target} has no help text"
    for target in ("dev", "fire", "test", "lint", "deploy"):
        assert f'@echo "==> make {target}' in makefile, f"{target} does not print what it does"
    assert all(line.startswith("\t") for line in makefile.splitlines() if line.lstrip().startswith("@"))
