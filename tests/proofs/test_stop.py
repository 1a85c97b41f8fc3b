"""The stop and the one answer per delivery, on real functions-framework servers with the deployed threading and
timeout settings (terraform/modules/scheduled-dedup/function.tf, environment_variables).

The work runs in a warm worker process, killed at the job's deadline (stop.py); the handler is never interrupted,
so every delivery is answered with one outcome line whatever the work does, and the instance serves on. The
deadline here is short: the attempt deadline less the release margin (config.Config.stop_after).
"""

import concurrent.futures
import datetime as dt
import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

import pytest
from conftest import records, scheduler_headers
from live_server import everywhere, wait_for_file

import stop
from config import RELEASE_MARGIN
from run_context import RunContext, Started, TerminalJobError, UnknownJob

pytestmark = pytest.mark.faults


def deployed_env(stop_after_seconds: int, threads: int = 2) -> dict[str, object]:
    """What function.tf sets (CLOUD_RUN_TIMEOUT_SECONDS: the function timeout, gunicorn's backstop), with a short
    deadline (Fleet.start's config_change); THREADS follows max_instance_request_concurrency there."""
    deadline = int(RELEASE_MARGIN.total_seconds()) + stop_after_seconds
    return {
        "CLOUD_RUN_TIMEOUT_SECONDS": "300",
        "THREADED_TIMEOUT_ENABLED": "false",
        "THREADS": str(threads),
        "LOG_EXECUTION_ID": "true",
        "config_change": everywhere(attempt_deadline=deadline),
    }


# The looping work is stopped after 1 s; work that ends by itself gets 8 s (the first run on a server also
# starts its fork server, stop.py).
LOOP_STOP_SECONDS = 1
DEPLOYED_ENV = deployed_env(8)
DELIVERIES = 40
# Generous bounds for a loaded machine: a stopped delivery is answered at the stop plus a kill and one write.
STOPPED_WITHIN_SECONDS = LOOP_STOP_SECONDS + 15
NEXT_ANSWER_WITHIN_SECONDS = 10


def outcome_lines(server, job):
    """The job's delivery outcome lines (a `takeover` line has no http_status)."""
    return [line for line in server.log_lines() if line.get("job") == job and "http_status" in line]


def schedule_times(now, count):
    return [(now - dt.timedelta(minutes=minute)).isoformat() for minute in range(count)]


def deliver_runs(server, job, now, count, clients):
    """`count` runs of `job` (its fire times of the last minutes), `clients` at a time: their answers."""
    deliveries = [scheduler_headers(job, time) for time in schedule_times(now, count)]
    with concurrent.futures.ThreadPoolExecutor(max_workers=clients) as pool:
        return list(pool.map(lambda headers: server.deliver(headers, timeout=60), deliveries))


@pytest.mark.parametrize("clients", [4, 1], ids=["4-at-a-time", "1-at-a-time"])
def test_work_looping_over_firestore_past_the_deadline_is_stopped_and_every_delivery_answered(
    fleet, collection, now, clients
):
    """Each delivery's own Firestore loop (through either client) is killed at the deadline; the handler's client
    is never touched by the stop, so every delivery releases its claim and answers, and the instance serves on."""
    jobs = {"loop_firestore_shared": "loops-shared", "loop_firestore_own": "loops-own"}
    env = deployed_env(LOOP_STOP_SECONDS, threads=max(2, clients))
    servers = {misdeed: fleet.start(**env, SERVED_FIRST_RUN_DOES=misdeed) for misdeed in jobs}
    for misdeed, server in servers.items():
        # Once its fork server runs (the deadline covers its start): a run of another job, stopped.
        deliver_started(server.wait_ready(), scheduler_headers(f"warm-up-{jobs[misdeed]}", now.isoformat()))

    for misdeed, server in servers.items():
        answers = deliver_runs(server, jobs[misdeed], now, DELIVERIES // len(jobs), clients)

        for answer in answers:
            assert answer.status == 500, answer
            # Stopped; or, on a loaded machine, not started before the deadline (a fork of the fork server).
            assert (
                answer.text.startswith(
                    "retryable_failure: retryable failure, run released for a retry: stopped at the job's deadline"
                )
                or answer.text == NOT_STARTED
            ), answer.text
            assert answer.seconds < STOPPED_WITHIN_SECONDS, answer
        lines = outcome_lines(server, jobs[misdeed])
        assert len(lines) == len(answers) == DELIVERIES // len(jobs)
        assert {(line["outcome"], line["http_status"]) for line in lines} == {("retryable_failure", 500)}
        assert len({line["run_id"] for line in lines}) == len(lines)  # one line per delivery, none twice

        # The next delivery of a run whose first execution looped (not one stopped while the first run on the
        # server started its fork server) does the work, and promptly.
        looped = next(line for line in reversed(lines) if line["run_id"] in fleet.executions())
        retried = server.deliver(scheduler_headers(jobs[misdeed], looped["schedule_time"]), timeout=60)

        assert retried.status == 200 and retried.text.startswith("processed"), retried
        assert retried.seconds < NEXT_ANSWER_WITHIN_SECONDS
    statuses = [record["status"] for record in records(collection).values()]
    assert statuses == ["completed", "completed"]  # every stopped claim was released: only the two retried runs


MISDEEDS = {
    # misdeed: (the answer's status, the start of its text)
    "sys_exit": (500, "retryable_failure: retryable failure, run released for a retry: SystemExit: 2"),
    "os_exit": (
        500,
        "retryable_failure: retryable failure, run released for a retry: the work's process ended without an "
        "answer (exit code 3)",
    ),
    "base_exception": (500, "retryable_failure: retryable failure, run released for a retry: NotAnException: "),
    "keyboard_interrupt": (500, "retryable_failure: retryable failure, run released for a retry: KeyboardInterrupt"),
    "unprintable_error": (
        500,
        "retryable_failure: retryable failure, run released for a retry: Unprintable: <Unprintable whose str() and "
        "repr() fail>",
    ),
}


def test_whatever_the_work_does_each_delivery_gets_one_answer_and_the_next_runs_the_work(fleet, collection, now):
    """sys.exit, os._exit, a BaseException, KeyboardInterrupt, an error whose str() and repr() fail: each
    answered 5xx with one outcome line and released, and the next delivery (one server each, at once) runs it."""
    servers = {misdeed: fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_DOES=misdeed) for misdeed in MISDEEDS}
    for server in servers.values():
        server.wait_ready()

    for misdeed, (status, text) in MISDEEDS.items():
        server, headers = servers[misdeed], scheduler_headers(misdeed, now.isoformat())
        answer = server.deliver(headers, timeout=60)

        assert (answer.status, answer.text[: len(text)]) == (status, text), (misdeed, answer)
        (line,) = outcome_lines(server, misdeed)
        assert (line["outcome"], line["http_status"], line["severity"]) == ("retryable_failure", 500, "ERROR")

        retried = server.deliver(headers, timeout=60)

        assert retried.status == 200 and retried.text.startswith("processed"), (misdeed, retried)
        assert len(outcome_lines(server, misdeed)) == 2
    runs = {record["job_name"]: record["status"] for record in records(collection).values()}
    assert runs == dict.fromkeys(MISDEEDS, "completed")
    assert len(fleet.executions()) == 2 * len(MISDEEDS)


def test_a_terminal_error_that_cannot_be_printed_is_still_recorded_failed(fleet, collection, now):
    server = fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_DOES="unprintable_terminal").wait_ready()
    headers = scheduler_headers("unprintable-terminal", now.isoformat())

    answer = server.deliver(headers, timeout=60)

    assert answer.status == 200, answer  # 2xx: Scheduler stops retrying
    # str() fails, so its repr() stands for the message.
    assert answer.text == "terminal_failure: terminal failure, not retried: UnprintableTerminal()\n"
    (record,) = records(collection).values()
    assert (record["status"], record["last_error"]) == ("failed", "UnprintableTerminal()")
    (line,) = outcome_lines(server, "unprintable-terminal")
    assert line["outcome"] == "terminal_failure"
    assert server.deliver(headers).text.startswith("duplicate")


def test_the_work_logs_from_its_own_process_with_the_runs_fields(fleet, collection, now):
    server = fleet.start(**DEPLOYED_ENV).wait_ready()

    answer = server.deliver(scheduler_headers("logs", now.isoformat()))

    assert answer.status == 200, answer
    (work_line,) = [line for line in server.log_lines() if line.get("message") == "served work started"]
    (outcome,) = outcome_lines(server, "logs")
    fields = ("run_id", "attempt_id", "attempt", "job", "schedule_time")
    assert {field: work_line.get(field) for field in fields} == {field: outcome[field] for field in fields}
    assert work_line["severity"] == "INFO"


class NotShown(BaseException):
    """What a broken __str__ may raise: not even an Exception."""


class Unshowable(Exception):
    def __str__(self):
        raise NotShown("not even this")

    __repr__ = __str__


ENDINGS = {
    # what the work raises (made in the test: pytest itself cannot print an Unshowable): how it ended, as told
    "sys-exit": (lambda: SystemExit(2), stop.Ended.RAISED, "SystemExit: 2"),
    "keyboard-interrupt": (KeyboardInterrupt, stop.Ended.RAISED, "KeyboardInterrupt"),
    "generator-exit": (lambda: GeneratorExit("late"), stop.Ended.RAISED, "GeneratorExit: late"),
    "unshowable": (Unshowable, stop.Ended.RAISED, "Unshowable: <Unshowable whose str() and repr() fail>"),
    "terminal": (lambda: TerminalJobError("bad input"), stop.Ended.TERMINAL, "TerminalJobError: bad input"),
    "unknown-job": (lambda: UnknownJob("no work"), stop.Ended.UNKNOWN_JOB, "UnknownJob: no work"),
}


@pytest.mark.parametrize("case", ENDINGS)
def test_how_the_work_ended_is_told_whatever_it_raised(case, run_context):
    make, how, error = ENDINGS[case]

    def work(context):
        raise make()

    ending = stop.ending_of(work, run_context)

    assert (ending.how, ending.error) == (how, error)
    assert ending.traceback.startswith("Traceback") and "raise make()" in ending.traceback


def test_what_the_work_returned_is_told_as_text_even_when_its_str_fails(run_context):
    assert stop.ending_of(lambda context: None, run_context) == stop.Ending(stop.Ended.RETURNED)
    assert stop.ending_of(lambda context: 42, run_context).result == "42"
    assert (
        stop.ending_of(lambda context: Unshowable(), run_context).result == "<Unshowable whose str() and repr() fail>"
    )
    assert len(stop.ending_of(lambda context: "x" * 5000, run_context).result) == stop.MESSAGE_LIMIT


EXECUTION = "projects/p-123456/locations/europe-west1/jobs/nightly-job/executions/run-1"


def starts_an_execution(context):
    """A proxy target's work (job.run): it starts an execution that runs on without it."""
    return Started(EXECUTION)


def test_a_started_execution_comes_back_from_the_works_process_by_its_name(run_context):
    """The handler records a proxy's run `started` with its execution's name (main.work_then_finish), so the work's
    own process tells a Started apart from a result, and hands back the name."""
    ending = stop.run_until_stopped(starts_an_execution, run_context, {}, time.monotonic() + 60)

    assert ending == stop.Ending(stop.Ended.STARTED, execution=EXECUTION)


@pytest.fixture
def run_context():
    return RunContext("0" * 64, "j", "j", dt.datetime(2026, 1, 1, tzinfo=dt.UTC), "a", 1, "p-123456", "europe-west1")


IMPORT_STOP_SECONDS = 5
NOT_STARTED = (
    "retryable_failure: retryable failure, run released for a retry: the work's process could not start: "
    "TimeoutError: no process before the job's deadline\n"
)

# --- What the work started dies with it, the fork server's death kills the work, the start is within the deadline.
# Each process of the work (served_job.LATE_EFFECT) tells its pid, then waits for the test's go before its effect:
# the test says go once the delivery is answered (and retried), waits until the process is gone (killed, or done),
# and reads the final state: no effect file. No race decides it: a process that survived always does its effect.

HELPER_ENDINGS = {
    # misdeed: (the answer's status, the start of its text)
    "subprocess_helper_then_loop": (500, "retryable_failure: retryable failure, run released for a retry: stopped at"),
    "fork_helper_then_loop": (500, "retryable_failure: retryable failure, run released for a retry: stopped at"),
    "subprocess_helper_then_return": (200, "processed"),
    "fork_helper_then_return": (200, "processed"),
}


def deliver_started(server, headers, answers=None):
    """The delivery, again while its work's process could not start before the deadline (the first on a loaded
    server, its fork server starting: nothing ran, the run was released); `answers` gets the answer."""
    deadline = time.monotonic() + 120
    while (answer := server.deliver(headers, timeout=60)).text == NOT_STARTED and time.monotonic() < deadline:
        pass
    if answers is not None:
        answers.append(answer)
    return answer


def late_effects(server, role: str, dies_within: float = 0) -> list[str]:
    """Says go to the process of `role` (its pid in the server's signal file), waits until it is gone; its effects.
    `dies_within`: how long it may take to die before the go (a kill the test does not wait for)."""
    pid = json.loads(server.signal_path.read_text())[role]
    wait_gone(pid, dies_within)
    server.signal_path.with_name(server.signal_path.name + ".go").touch()
    assert wait_gone(pid, 60), f"{role} {pid} still runs 60 s after its go"
    effect = server.signal_path.with_name(server.signal_path.name + ".effect")
    return effect.read_text().splitlines() if effect.exists() else []


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def gone(pid: int) -> bool:
    """No such process, or only its zombie (whoever inherited it may not reap it)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, ProcessLookupError):
        return True


@pytest.mark.parametrize("misdeed", HELPER_ENDINGS)
def test_a_process_the_work_started_is_killed_with_it_at_the_deadline_and_after_a_report(fleet, now, misdeed):
    """A helper the work started (subprocess.Popen, a multiprocessing fork) would do the effect again beside the
    retry: its whole process group is killed at the deadline, and after a report, before the run is recorded."""
    status, text = HELPER_ENDINGS[misdeed]
    server = fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_DOES=misdeed).wait_ready()

    answer = deliver_started(server, scheduler_headers(misdeed.replace("_", "-"), now.isoformat()))

    assert (answer.status, answer.text[: len(text)]) == (status, text), answer
    assert late_effects(server, "helper") == []


def test_a_dead_fork_server_never_leaves_the_work_running_past_the_release(fleet, now):
    """The fork server killed while the work runs: the handler sees the work's process as ended (its sentinel
    closes) and must kill it before the release, or the retry's effect gets a second one beside it."""
    server = fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_DOES="late_effect").wait_ready()
    headers = scheduler_headers("fork-server-dies", now.isoformat())
    answers = []
    thread = threading.Thread(target=deliver_started, args=(server, headers, answers), daemon=True)
    thread.start()
    fork_server = json.loads(wait_for_file(server.signal_path, timeout=60))["parent"]

    os.kill(fork_server, signal.SIGKILL)
    thread.join(60)

    assert answers[0].status == 500 and "released for a retry" in answers[0].text, answers
    retried = server.deliver(headers, timeout=60)
    assert retried.status == 200 and retried.text.startswith("processed"), retried
    assert late_effects(server, "work") == []


def test_the_work_dies_with_its_handlers_process(fleet, now):
    """The work is a session of its own (kill_group): when the server dies (a crashed instance: its process group
    SIGKILLed), the work kills itself rather than run on unstopped beside the next attempt."""
    server = fleet.start(**DEPLOYED_ENV, SERVED_FIRST_RUN_DOES="late_effect").wait_ready()
    headers = scheduler_headers("handler-dies", now.isoformat())
    threading.Thread(target=deliver_started, args=(server, headers), daemon=True).start()
    wait_for_file(server.signal_path, timeout=60)

    server.kill()

    assert late_effects(server, "work", dies_within=15) == []


def test_a_module_that_blocks_at_import_is_answered_within_the_deadline_and_its_fork_server_replaced(
    fleet, now, tmp_path
):
    """The fork server's start imports the work's modules: one that blocks there is answered at the deadline with
    one outcome line; once no start could use it for stop.FORK_SERVER_STUCK_SECONDS it is killed, and a later
    delivery starts a new one (this time the import passes)."""
    blocks = tmp_path / "import-blocks"
    blocks.touch()
    server = fleet.start(**deployed_env(IMPORT_STOP_SECONDS), SERVED_IMPORT_BLOCKS=str(blocks)).wait_ready()
    headers = scheduler_headers("import-blocks", now.isoformat())

    answer = server.deliver(headers, timeout=40)

    assert (answer.status, answer.text) == (500, NOT_STARTED), answer
    assert answer.seconds < IMPORT_STOP_SECONDS + STOPPED_WITHIN_SECONDS
    assert [line["outcome"] for line in outcome_lines(server, "import-blocks")] == ["retryable_failure"]
    blocks.unlink()
    deliveries, deadline = 1, time.monotonic() + stop.FORK_SERVER_STUCK_SECONDS + 60
    while (answer := server.deliver(headers, timeout=40)).status != 200:
        deliveries += 1
        assert (answer.status, answer.text) == (500, NOT_STARTED), answer
        assert time.monotonic() < deadline, "the stuck fork server was never replaced"
    assert answer.text.startswith("processed"), answer
    assert len(outcome_lines(server, "import-blocks")) == deliveries + 1
    assert len(fleet.executions()) == 1


# --- The warm worker (issue 27): one process serves run after run; replaced when it was stopped, died, or its run left
# anything a fresh worker lacks. The works below are module-level: the stop sends them to the worker by name.


def worker_pid(context):
    return os.getpid()


def leaves_a_process(context):
    """Its pid, and the pid of the process it left running."""
    return f"{os.getpid()} {subprocess.Popen(['sleep', '60']).pid}"


def leaves_an_orphan(context):
    """A grandchild whose parent ended: only a reaper of every descendant (the worker) still sees it."""
    shell = subprocess.run(
        ["sh", "-c", "sleep 60 >/dev/null 2>&1 & echo $!"], capture_output=True, check=True, text=True
    )
    return f"{os.getpid()} {shell.stdout.strip()}"


def leaves_a_thread(context):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    return os.getpid()


def joins_its_thread(context):
    thread = threading.Thread(target=time.sleep, args=(0.01,))
    thread.start()
    thread.join()
    return os.getpid()


def changes_the_cwd(context):
    os.chdir("/")
    return os.getpid()


def changes_the_environment(context):
    os.environ["LEFT_BY_A_RUN"] = "1"
    return os.getpid()


def installs_a_signal_handler(context):
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    return os.getpid()


def changes_the_umask(context):
    os.umask(0o077)
    return os.getpid()


def loops(context):
    while True:
        time.sleep(0.01)


def run_in_worker(work, context, seconds=60):
    return stop.run_until_stopped(work, context, {}, time.monotonic() + seconds)


@pytest.fixture
def fresh_pool():
    """No warm worker from another test: each test sees the pool it makes."""
    stop._retire_idle()
    yield
    stop._retire_idle()


def test_one_worker_serves_run_after_run_and_a_run_that_cleans_up_keeps_it(run_context, fresh_pool):
    pids = {run_in_worker(work, run_context).result for work in (worker_pid, joins_its_thread, worker_pid)}

    assert len(pids) == 1 and str(os.getpid()) not in pids


LEFTOVERS = (
    leaves_a_process,
    leaves_an_orphan,
    leaves_a_thread,
    changes_the_cwd,
    changes_the_environment,
    installs_a_signal_handler,
    changes_the_umask,
)


@pytest.mark.parametrize("work", LEFTOVERS, ids=[work.__name__ for work in LEFTOVERS])
def test_a_run_that_leaves_anything_behind_gets_its_worker_killed_and_the_next_run_a_fresh_one(
    run_context, fresh_pool, work
):
    """A process or thread of the work still running after its report, or process state it changed, would reach the
    next run (or do an effect beside a retry): the worker and its whole group are killed before the run is recorded,
    and the next run starts a fresh worker, which sees none of it."""
    first = run_in_worker(worker_pid, run_context).result

    ending = run_in_worker(work, run_context)
    after = run_in_worker(worker_pid, run_context).result

    assert ending.how is stop.Ended.RETURNED and ending.result.split()[0] == first
    # Killed before the run was recorded; SIGKILL takes a moment to end a process.
    assert all(wait_gone(int(pid), 10) for pid in ending.result.split()), "the worker or what its run left runs on"
    assert after != first


def test_a_worker_stopped_at_the_deadline_is_replaced_and_one_that_died_idle_too(run_context, fresh_pool):
    looping = run_in_worker(worker_pid, run_context).result

    stopped = run_in_worker(loops, run_context, seconds=1)
    idle = run_in_worker(worker_pid, run_context).result
    os.kill(int(idle), signal.SIGKILL)
    assert wait_gone(int(idle), 10)
    after = run_in_worker(worker_pid, run_context)

    assert stopped.how is stop.Ended.STOPPED and gone(int(looping))
    assert idle != looping
    assert after.how is stop.Ended.RETURNED and after.result not in (looping, idle)


def slow_worker_pid(context):
    time.sleep(0.5)
    return os.getpid()


def test_runs_at_once_each_hold_a_worker_of_their_own(run_context, fresh_pool):
    """Concurrent deliveries (max_instance_request_concurrency above 1) never share a worker: a pool."""
    warm = run_in_worker(worker_pid, run_context).result
    with concurrent.futures.ThreadPoolExecutor(max_workers=3) as pool:
        endings = list(pool.map(lambda _: run_in_worker(slow_worker_pid, run_context), range(3)))

    pids = {ending.result for ending in endings}
    assert [ending.how for ending in endings] == [stop.Ended.RETURNED] * 3
    assert len(pids) == 3 and warm in pids
    assert len(stop._idle) == 3


def tells_its_run(context):
    """What reached the worker: its context and the run's log fields."""
    import run_log  # the worker's own (configured by stop.py)

    return repr((context, dict(run_log.RUN_FIELDS.get())))


def test_the_work_gets_its_context_and_the_runs_fields_as_sent_whatever_they_hold(run_context, fresh_pool):
    """The run goes to the worker by marshal (plain values: cheap), or by pickle when marshal cannot carry a value:
    either way the work sees the context and the log fields the handler sent, the schedule time to the microsecond
    and in UTC."""
    sent = RunContext(**{**vars(run_context), "schedule_time": dt.datetime(2026, 3, 29, 1, 30, 0, 123456, dt.UTC)})
    plain = {"run_id": sent.run_id, "attempt": 2}
    rich = plain | {"since": dt.datetime(2026, 1, 1, tzinfo=dt.UTC)}  # a datetime: marshal cannot carry it

    for fields in (plain, rich):
        ending = stop.run_until_stopped(tells_its_run, sent, fields, time.monotonic() + 60)

        assert ending.how is stop.Ended.RETURNED, ending
        assert ending.result == repr((sent, fields))
