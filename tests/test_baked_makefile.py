"""The baked Makefile on a fresh bake: `make dev` serves the function, `make fire` delivers to it, and
`make -n deploy` is config.yaml's check, then terraform init + apply, passing only the variables given."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
import re
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from pathlib import Path

import pytest
from conftest import bake, config_file
from scheduled_dedup_tools.firestore_emulator import free_port

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


@contextlib.contextmanager
def make_dev(project, log, **env):
    """`make dev` in its own process group on a free port; yields (port, process); killed if still running after."""
    port = free_port()
    with open(log, "w") as out:
        process = subprocess.Popen(
            ["make", "--no-print-directory", MAKE_PY, "dev", f"PORT={port}"],
            cwd=project,
            env={**os.environ, **env},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        wait_for_http(f"http://127.0.0.1:{port}/", process, seconds=120)
        yield port, process
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        for pid in dev_servers_of(project):  # the function dev_server.py starts runs in a session of its own
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def dev_servers_of(project) -> list[int]:
    """The processes still running this project's dev server (the tools package's, run in the project)."""
    return processes_with(DEV_SERVER, cwd=project)


def ctrl_c(process, log):
    """SIGINT to the group, as a terminal sends it; returns make dev's whole output once it has stopped."""
    os.killpg(process.pid, signal.SIGINT)
    process.wait(timeout=60)
    deadline = time.monotonic() + 30  # make may exit before dev_server.py has finished stopping
    while "==> stopped" not in (output := log.read_text()) and time.monotonic() < deadline:
        time.sleep(0.2)
    return output


@pytest.fixture
def dev_server(project, emulator_host, tmp_path):
    """`make dev` with private data on the shared emulator."""
    log = tmp_path / "make-dev.log"
    private = config_file(
        project, tmp_path / "config.yaml", project="make-dev-test", collection=f"runs-{uuid.uuid4().hex[:12]}"
    )
    with make_dev(project, log, FIRESTORE_EMULATOR_HOST=emulator_host, **private) as (port, process):
        yield port, process, log


def tree_environments(root: int) -> list[dict[str, str]]:
    """The environment of a process and every live descendant (/proc: ppid links; the function's server runs
    in a session of its own)."""
    parents = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])  # state, ppid
        except OSError:
            continue
    tree, grew = {root}, True
    while grew:
        grown = tree | {pid for pid, parent in parents.items() if parent in tree}
        tree, grew = grown, grown != tree
    environments = []
    for pid in sorted(tree):
        try:
            raw = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        environments.append(dict(item.split("=", 1) for item in raw.decode().split("\0") if "=" in item))
    return environments


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

    # Ctrl-C stops the function and `make dev` exits.
    output = ctrl_c(process, log)
    assert "ready: http://127.0.0.1:" in output and "FIRESTORE_EMULATOR_HOST=" in output
    # One short line per record for a person, not Cloud Logging's JSON (the deployed function keeps that).
    outcomes = [line for line in output.splitlines() if " processed " in line or " duplicate " in line]
    assert len(outcomes) == 2 and all(len(line) <= 200 and "{" not in line for line in outcomes), outcomes
    assert f"nightly-report-nightly {sent.replace('Z', '+00:00')}" in outcomes[0]
    # The work's lines too, logged in its own process (stop.py): a person's line each, none of them JSON.
    assert any("scheduled work for nightly" in line for line in output.splitlines()), output
    assert not [line for line in output.splitlines() if line.startswith("{")], output
    assert "==> stopped" in output
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=2)


def test_rerun_at_make_dev_runs_a_finished_run_once_more_once(project, emulator_host, tmp_path):
    """`runs.py rerun` sends to `make dev` by default, as `fire` and `backfill` do (--queue: the deliveries queue)."""
    private = config_file(
        project, tmp_path / "config.yaml", project="make-dev-test", collection=f"runs-{uuid.uuid4().hex[:12]}"
    )
    env = {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host, **private}
    time_sent = (dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(hours=1)).isoformat()
    time_sent = time_sent.replace("+00:00", "Z")

    def runs(*args):
        command = [sys.executable, "-m", "scheduled_dedup_tools.runs", *args]
        return subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=120, check=False)

    with make_dev(project, tmp_path / "make-dev.log", FIRESTORE_EMULATOR_HOST=emulator_host, **private) as (port, _):
        fired = make(project, "fire", "JOB=nightly", f"TIME={time_sent}", f"PORT={port}", **private)
        assert "<== 200 processed" in fired.stdout, fired.stdout + fired.stderr
        rerun = ["rerun", "nightly", time_sent, "--reason", "input fixed", "--by", "ana@example.com"]
        first = runs(*rerun, "--rerun-id", "fix-1", "--port", str(port))
        again = runs(*rerun, "--rerun-id", "fix-1", "--port", str(port))  # a retried command: the same request, once
        shown = runs("show", "nightly", time_sent)
    assert first.returncode == 0 and ": 200 processed" in first.stdout, first.stdout + first.stderr
    assert again.returncode == 0 and ": 200 duplicate" in again.stdout, again.stdout + again.stderr
    assert '"rerun_id": "fix-1"' in shown.stdout and '"status": "completed"' in shown.stdout, shown.stdout


def test_make_dev_runs_no_reloader(project, dev_server):
    """functions-framework's --debug reloader (werkzeug: a child with WERKZEUG_RUN_MAIN set) watched the whole
    tree, .venv included, at most of a core and with endless inotify warnings; edits are picked up by a restart."""
    port, process, log = dev_server
    environments = tree_environments(process.pid)
    assert len(environments) >= 4  # make, dev_server.py, the function's server and its worker
    assert [env for env in environments if "WERKZEUG_RUN_MAIN" in env] == []
    assert "watchdog" not in log.read_text()


def printed(log, pattern, seconds=30):
    """The first group of `pattern` once make dev has printed it (it prints after the function first answers)."""
    deadline = time.monotonic() + seconds
    while not (found := re.search(pattern, log.read_text())) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert found, f"make dev never printed {pattern}: {log.read_text()}"
    return found[1]


def test_make_dev_keeps_the_emulators_data_across_a_restart(tmp_path_factory):
    """A run recorded before Ctrl-C is still there after the next `make dev` (its own emulator, exported to
    .emulator-data/ at the stop, imported at the start)."""
    project = bake(tmp_path_factory.mktemp("make-dev-data"))
    environ = {key: value for key, value in os.environ.items() if key != "FIRESTORE_EMULATOR_HOST"}
    an_hour_ago = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0) - dt.timedelta(hours=1)
    time_sent = an_hour_ago.strftime("%Y-%m-%dT%H:%M:%SZ")  # inside the retention window
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)
        first_log = project / "first.log"
        with make_dev(project, first_log) as (port, process):
            fired = make(project, "fire", "JOB=nightly", f"TIME={time_sent}", f"PORT={port}")
            assert "<== 200 processed" in fired.stdout, fired.stdout + fired.stderr
            assert "saved the emulator's data" in ctrl_c(process, first_log)
        second_log = project / "second.log"
        with make_dev(project, second_log) as (port, process):
            host = printed(second_log, r"FIRESTORE_EMULATOR_HOST=(\S+)")
            shown = subprocess.run(
                [sys.executable, "-m", "scheduled_dedup_tools.runs", "show", "nightly", time_sent],
                cwd=project, env={**environ, "FIRESTORE_EMULATOR_HOST": host}, capture_output=True, text=True,
                timeout=60, check=False,
            )  # fmt: skip
            again = make(project, "fire", "JOB=nightly", f"TIME={time_sent}", f"PORT={port}")
            ctrl_c(process, second_log)
    assert shown.returncode == 0 and '"status": "completed"' in shown.stdout, shown.stdout + shown.stderr
    assert "<== 200 duplicate" in again.stdout


# make dev's command line: `python -m scheduled_dedup_tools.dev_server`, in the project's directory.
DEV_SERVER = b"-m\0scheduled_dedup_tools.dev_server\0"


def processes_with(*parts: bytes, cwd: Path | None = None) -> list[int]:
    """The live processes whose command line holds every one of `parts` (NUL-separated arguments), in `cwd` if given."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            if all(part in cmdline.read_bytes() for part in parts) and (
                cwd is None or (cmdline.parent / "cwd").resolve() == cwd.resolve()
            ):
                found.append(int(cmdline.parent.name))
    return found


def serving_on(project, port: int) -> list[int]:
    """The project's function servers (its dev server's `serve`) on `port`."""
    return processes_with(DEV_SERVER, f"--port\0{port}\0".encode(), cwd=project)


def gone_within(find, seconds: float = 30) -> list[int]:
    """What `find()` still returns after waiting up to `seconds` for it to be empty."""
    deadline = time.monotonic() + seconds
    while (left := find()) and time.monotonic() < deadline:
        time.sleep(0.3)
    return left


def test_a_killed_make_dev_leaves_no_function_running(project, dev_server):
    """SIGKILL runs no `finally`: the function's server (a session of its own) must notice its parent is gone."""
    port, process, _ = dev_server
    assert serving_on(project, port)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    assert gone_within(lambda: serving_on(project, port)) == []


def test_make_dev_stops_when_its_emulator_dies(tmp_path_factory):
    project = bake(tmp_path_factory.mktemp("make-dev-emulator"))
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("FIRESTORE_EMULATOR_HOST", raising=False)
        log = project / "dev.log"
        with make_dev(project, log) as (port, process):
            emulator_port = printed(log, r"FIRESTORE_EMULATOR_HOST=\S+:(\d+)")
            emulators = processes_with(b"java", f"--port\0{emulator_port}\0".encode())
            assert emulators, "the emulator make dev started was not found"
            for pid in emulators:
                os.killpg(pid, signal.SIGKILL)
            process.wait(timeout=60)
            left = gone_within(lambda: serving_on(project, port))
    assert "the emulator stopped" in log.read_text()
    assert left == []


def test_fire_refuses_a_bad_time_and_a_missing_job(project):
    bad_time = make(project, "fire", "JOB=nightly", "TIME=yesterday", f"PORT={free_port()}")
    assert bad_time.returncode != 0
    assert "TIME='yesterday': is not an RFC 3339 timestamp" in bad_time.stderr
    no_job = make(project, "fire")
    assert no_job.returncode != 0
    assert "usage: make fire JOB=<job id>" in no_job.stderr


def test_make_deploy_is_the_config_check_then_terraform_passing_only_the_variables_given(project):
    """config.yaml's rules first (Terraform checks shapes only). terraform/variables.tf holds the baked answers and
    a *.tfvars file overrides them: a -var on the command line beats every *.tfvars file ("Variable Definition
    Precedence", developer.hashicorp.com/terraform/language/values/variables), so make passes one only when asked."""
    dry = make(project, "-n", "deploy")
    assert dry.returncode == 0, dry.stderr
    commands = [line for line in dry.stdout.splitlines() if line.startswith("terraform") or line.endswith(" config.py")]
    assert commands[0].endswith("python config.py"), commands
    assert commands[1:] == ["terraform -chdir=terraform init", "terraform -chdir=terraform apply"]
    assert "-var" not in dry.stdout
    given = make(project, "-n", "deploy", "ALERT_EMAIL=ops@example.com", "CREATE_DATABASE=false")
    assert given.returncode == 0, given.stderr
    assert given.stdout.splitlines()[-1] == (
        "terraform -chdir=terraform apply -var=alert_email=ops@example.com -var=create_firestore_database=false"
    )
    assert "with -var=alert_email=ops@example.com -var=create_firestore_database=false" in given.stdout


def test_a_team_bakes_deploy_passes_no_database_variable(tmp_path):
    """A team bake's database is terraform/bootstrap's (its create_firestore_database): the root declares no such
    variable, so a -var for it would fail the apply; make passes none."""
    team = bake(tmp_path, state_bucket="acme-tf-state", repository="acme/report")
    given = make(team, "-n", "deploy", "ALERT_EMAIL=ops@example.com", "CREATE_DATABASE=false")
    assert given.returncode == 0, given.stderr
    assert given.stdout.splitlines()[-1] == "terraform -chdir=terraform apply -var=alert_email=ops@example.com"
    assert 'variable "create_firestore_database"' not in (team / "terraform" / "variables.tf").read_text()


def test_make_smoke_checks_the_project_and_region_of_config_yaml(project):
    """runs.py smoke reads them in config.yaml, as the function and Terraform do: make's variables override neither."""
    dry = make(project, "-n", "smoke", "PROJECT=other-project", "REGION=us-central1")
    assert dry.returncode == 0, dry.stderr
    (command,) = [line for line in dry.stdout.splitlines() if "scheduled_dedup_tools.runs smoke" in line]
    assert command.rstrip() == f"{sys.executable} -m scheduled_dedup_tools.runs smoke"
    assert "other-project" not in dry.stdout


def test_every_target_says_what_it_does(project):
    makefile = (project / "Makefile").read_text()
    for target in ("venv", "dev", "fire", "test", "lint", "deploy"):
        assert re.search(rf"^{target}:.*## \S", makefile, re.M), f"{target} has no help text"
    for target in ("dev", "fire", "test", "lint", "deploy"):
        assert f'@echo "==> make {target}' in makefile, f"{target} does not print what it does"
    assert all(line.startswith("\t") for line in makefile.splitlines() if line.lstrip().startswith("@"))
