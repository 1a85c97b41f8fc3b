"""`make demo` (tests/demo.py): its transcript shows the three answers, and it leaves no process behind."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.bake

DEMO = [sys.executable, str(ROOT / "tests" / "demo.py")]


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_demo_processes_once_skips_the_replay_and_answers_409_mid_run(emulator_host, tmp_path):
    result = subprocess.run(
        [*DEMO, "--build-dir", str(tmp_path / "demo")],
        env={**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host},
        capture_output=True,
        text=True,
        timeout=120,
    )
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    assert "job.py replaced by a job that works 2 s" in out
    assert "Not emulated: the OIDC token" in out
    expected = [
        r"1\. job 'nightly', run \S+: first delivery\n +-> 200 processed: run processed +"
        r"\[expected 200 processed: OK\]",
        r"2\. job 'nightly', run \S+: the same run again \(a retry\)\n +-> 200 duplicate: .*"
        r"\[expected 200 duplicate: OK\]",
        r"3\. .*delivered while another attempt holds the live lease\n +-> 409 in_progress: attempt [0-9a-f]{32} holds "
        r"the lease until .*\[expected 409 in_progress: OK\]",
        r"that other attempt, 2 s later\n +-> 200 processed",
    ]
    for pattern in expected:
        assert re.search(pattern, out), pattern
    assert len(re.findall(r"^  status +completed$", out, re.M)) == 2
    assert re.search(r"WARNING +outcome=in_progress", out)
    server_pid = int(re.search(r"Function: .*pid (\d+)", out)[1])
    assert gone(server_pid)


def test_demo_interrupted_stops_the_function_and_its_emulator(tmp_path):
    env = {key: value for key, value in os.environ.items() if key != "FIRESTORE_EMULATOR_HOST"}
    demo = subprocess.Popen([*DEMO, "--build-dir", str(tmp_path / "demo")], env=env, stdout=subprocess.PIPE, text=True)
    try:
        lines = []
        for line in demo.stdout:
            lines.append(line)
            if line.startswith("Function:"):
                break
        demo.send_signal(signal.SIGINT)  # Ctrl-C while the emulator and the function server are up
        demo.wait(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
    transcript = "".join(lines)
    emulator_pid = int(re.search(r"Firestore emulator: started at \S+, pid (\d+)", transcript)[1])
    server_pid = int(re.search(r"Function: .*pid (\d+)", transcript)[1])
    assert demo.returncode != 0
    assert gone(emulator_pid) and gone(server_pid), transcript
