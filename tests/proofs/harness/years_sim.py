"""A seeded, deterministic simulation of years of day-2 change, driving the real handler (issue 24's proof).

The bake's functions-framework app runs in this process (Flask's test client), on Google's Firestore emulator,
under a moved clock (dedup.utcnow, the protocol's one clock). Cloud Scheduler is modelled as
tests/scheduler_sim.py does (each fire time delivered, a non-2xx retried with the bake's retry_config); Cloud Tasks
(re-runs, backfills, catch-ups) by a queue that refuses a task id it holds. The operator's surfaces are the bake's
own: config (config.use, the jobs as config.yaml yields them) and a redeploy per change, `tools/runs.py` for `rerun`,
`backfill`, `fire` and `missed`. Moves (MOVE_KINDS) are interleaved with faults; every execution of the work is
recorded, and one job's work runs through the real stop (stop.py) and starts a helper process of its own, whose
effect is counted from a file.

The invariant: for each fire time of the schedule in force at that instant (this module keeps that history,
`Era`), exactly one execution of the work, or one named state that the audit's alerts and `runs.py missed` report
(skipped late, paused, DST skip, missing and alerted); never two executions of one run, a re-run id runs once, a
Force run once; nothing runs while its job is paused except an explicit re-run. Duplicates are checked after every
delivery, each fire time is judged once it has settled and the audit has seen it.

    python years_sim.py [--seed N] [--days D] [--jobs J] [--moves kind,...]   (inside a laid bake; YEARS_SIM_SEED)
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime as dt
import heapq
import importlib
import io
import itertools
import json
import logging
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

MOVE_KINDS = (
    "schedule_change",
    "timezone_change",
    "deadline_change",
    "add_remove",
    "pause",
    "force",
    "rerun",
    "backfill",
    "catch_up",
    "dst",
    "crash",
    "outage",
    "redeploy",
    "late_duplicate",
    "process_group",
)
# The eve of New York's spring forward (14 Mar); Europe's (28 Mar) and Sydney's fall back (4 Apr) follow.
START = dt.datetime(2027, 3, 13, tzinfo=dt.UTC)
QUEUE = "projects/dedup-test-project/locations/europe-west1/queues/sim-deliveries"
AUDIT_EVERY = dt.timedelta(hours=4)
# A fire time is judged this long after its settle time: the audits in between have seen it.
JUDGE_LAG = dt.timedelta(hours=9)
# The job whose work runs through the real stop: a deadline of 11 s stops it 1 s after it starts (RELEASE_MARGIN).
STOP_JOB_ID = "stopper"
STOP_DEADLINE_SECONDS = 11
HELPER_DELAY_SECONDS = 1.5  # the work's helper does its effect this long after it starts: after the stop
EFFECTS_ENV = "YEARS_SIM_EFFECTS"
EFFECTS = Path(os.environ.setdefault(EFFECTS_ENV, tempfile.mkdtemp(prefix="years-sim-effects-")))

# (cron, time zone, extra) the jobs are drawn from: several zones with daylight saving, at times it repeats or skips.
JOB_SHAPES = (
    ("30 2 * * *", "Europe/Berlin", {}),
    ("30 2 * * *", "America/New_York", {"dst_gap": "skip"}),
    ("30 1 * * *", "America/New_York", {}),
    ("30 2 * * *", "Australia/Sydney", {}),
    ("0 3 * * *", "Etc/UTC", {}),
    ("15 */6 * * *", "Etc/UTC", {}),
    ("0 9 * * 1-5", "Asia/Tokyo", {}),
    ("45 23 * * *", "America/Los_Angeles", {}),
    ("0 4 * * *", "Europe/London", {"max_lateness_seconds": 3600}),
    ("0 6 * * *", "Etc/UTC", {"catch_up": True, "max_lateness_seconds": 86400}),
    ("0 1 * * 0", "Europe/Paris", {}),
    ("10 12 * * *", "Asia/Kolkata", {}),
)
OTHER_CRONS = ("0 5 * * *", "30 3 * * *", "0 */8 * * *", "20 2 * * 1-5", "0 7 * * *")
OTHER_ZONES = ("Europe/Berlin", "America/Chicago", "Australia/Sydney", "Etc/UTC", "Pacific/Auckland")


class Crash(BaseException):
    """The instance dies mid-work (SIGKILL): nothing after this point of the delivery happens, no answer."""


@dataclasses.dataclass
class Era:
    """One job's schedule from `start` on (until the next era): its entry (config.yaml's keys, and its job_id), None
    once removed."""

    start: dt.datetime
    spec: dict | None


@dataclasses.dataclass(frozen=True)
class Execution:
    job: str
    schedule_time: dt.datetime
    trigger: str
    rerun_id: str | None
    at: dt.datetime
    paused: bool


def job_of(spec: dict, defaults):
    """The config.Job of a sim job's entry: what it sets, else the defaults' numbers (`defaults`: the audit's Job).
    Built directly, not through config.yaml's rules: the sim's stop job has a deadline (11 s) below their least."""
    numbers = {
        field: dt.timedelta(seconds=spec[f"{field}_seconds"])
        for field in ("attempt_deadline", "max_lateness")
        if f"{field}_seconds" in spec
    }
    choices = {key: spec[key] for key in ("paused", "catch_up", "dst_gap", "overlap") if key in spec}
    fields = {"job_id": spec["job_id"], "schedule": spec["schedule"], "time_zone": spec["time_zone"]}
    return dataclasses.replace(defaults, **fields, **numbers, **choices)


# ---------------------------------------------------------------- the work (also imported by the stop's fork server)


def effects_file(job_name: str) -> Path:
    return EFFECTS / f"{job_name}.effects"


def sim_work(context) -> None:
    """job.run's stand-in. In the handler's process it reports to the running simulation; in the stop's child
    (the stop job) it writes its effect to a file, and on an armed run starts a helper that does the effect after
    the stop, then hangs until the stop: a stop that leaves the helper running lets the effect happen twice."""
    if SIMULATION is not None and context.job_id != STOP_JOB_ID:
        return SIMULATION.work(context)
    line = f"{context.run_id} {context.schedule_time.isoformat()} {context.trigger} {context.rerun_id or '-'}\n"
    armed = EFFECTS / f"{context.run_id}.armed"
    if armed.exists():
        armed.unlink()
        path = str(effects_file(context.job_name))
        code = f"import time; time.sleep({HELPER_DELAY_SECONDS}); open({path!r}, 'a').write({line!r})"
        subprocess.Popen([sys.executable, "-c", code])  # noqa: S603 - the work's own helper process
        time.sleep(60)  # until the stop
    with effects_file(context.job_name).open("a") as effects:
        effects.write(line)


SIMULATION: Simulation | None = None


# ---------------------------------------------------------------- what the bake reports (the one adapter)


def reported(sim: Simulation, since: dt.datetime, until: dt.datetime) -> dict[tuple[str, dt.datetime], str]:
    """What the operator is told of each run expected in [since, until): `runs.py missed --all --json`'s state per
    (job, schedule time), with "+alerted" added where the audit's log line named it (audit_state). The one place
    that reads the bake's reports: a new audit API changes only this."""
    runs = importlib.import_module("scheduled_dedup_tools.runs")

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        status = runs.main(["missed", "--all", "--json", "--since", rfc(since), "--until", rfc(until)])
    assert status == 0, f"runs.py missed exited {status}"
    states = {}
    for row in json.loads(out.getvalue()):
        when = dt.datetime.fromisoformat(row["schedule_time"].replace("Z", "+00:00"))
        alerted = "+alerted" if (row["job"], when) in sim.alerts else ""
        states[row["job"], when] = row["state"] + alerted
    return states


def rfc(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class AuditAlerts(logging.Handler):
    """The audit's `scheduled run missing|stuck` lines, as (job, schedule time)."""

    def __init__(self, alerts: set) -> None:
        super().__init__()
        self.alerts = alerts

    def emit(self, record: logging.LogRecord) -> None:
        fields = getattr(record, "json_fields", {}) or {}
        if "audit_state" in fields:
            self.alerts.add((fields["job"], dt.datetime.fromisoformat(fields["schedule_time"])))


# ---------------------------------------------------------------- the simulation


@dataclasses.dataclass
class Tally:
    states: collections.Counter = dataclasses.field(default_factory=collections.Counter)
    duplicates: list = dataclasses.field(default_factory=list)
    unexplained: list = dataclasses.field(default_factory=list)
    deliveries: int = 0
    moves: collections.Counter = dataclasses.field(default_factory=collections.Counter)

    def table(self, seed: int, days: int, jobs: int, seconds: float) -> str:
        lines = [f"years_sim seed={seed} days={days} jobs={jobs} deliveries={self.deliveries} ({seconds:.0f} s)"]
        lines.append("  moves: " + ", ".join(f"{kind} {n}" for kind, n in sorted(self.moves.items())))
        lines += [f"  {state:<24} {count:>7}" for state, count in sorted(self.states.items())]
        lines.append(f"  {'duplicates':<24} {len(self.duplicates):>7}")
        lines += [f"    {count:>5} {cause}" for cause, count in causes(self.duplicates).most_common()]
        lines.append(f"  {'unexplained':<24} {len(self.unexplained):>7}")
        lines += [f"    {count:>5} {cause}" for cause, count in causes(self.unexplained).most_common()]
        lines += [f"    DUPLICATE {what}" for what in self.duplicates[:100]]
        lines += [f"    UNEXPLAINED {what}" for what in self.unexplained[:15]]
        return "\n".join(lines)


# What each listed failure says, by the words its line carries (the first that matches).
CAUSES = (
    ("re-run ", "a re-run id ran twice"),
    (STOP_JOB_ID, "the stop left the work's helper running: two effects"),
    ("never scheduled, ran", "a time never scheduled ran (a backfill of it)"),
    ("never scheduled, reported", "a time never scheduled reported due"),
    ("while its job was paused", "ran while its job was paused"),
    ("Force run", "a Force run did not run once"),
    ("1 execution(s), reported nothing", "ran, but the report lost it"),
    ("0 execution(s)", "did not run, and no report says why"),
    ("", "a run ran twice"),
)


def causes(failures: list[str]) -> collections.Counter:
    return collections.Counter(next(cause for words, cause in CAUSES if words in line) for line in failures)


class Simulation:
    def __init__(self, seed: int, days: int = 30, jobs: int = 6, moves=MOVE_KINDS, stop_runs: int = 2) -> None:
        from scheduled_dedup_tools import schedule_rules

        import config

        self.rng = random.Random(seed)
        self.seed, self.days, self.job_count, self.kinds = seed, days, jobs, set(moves)
        self.now = START
        self.token = uuid.uuid4().hex[:8]
        self.events: list = []
        self.order = itertools.count()
        self.eras: dict[str, list[Era]] = {}
        self.executions: list[Execution] = []
        self.alerts: set = set()
        self.tasks: set[str] = set()
        self.outage_until = START
        self.reading = False
        self.crash_next: set[str] = set()  # run ids whose next work call crashes the instance
        self.fail_next: set[str] = set()  # run ids whose next work call raises (retryable)
        self.tally = Tally()
        self.judged_until = START + dt.timedelta(days=1)
        self.stop_runs_left = stop_runs if "process_group" in self.kinds else 0
        self.stop_warm = False
        self.retries = schedule_rules.SchedulerRetries.of(config.load().defaults)
        self.audit_job = None
        self.base = None  # the configuration the run starts from (run), its jobs replaced at each change
        self.audit_headers: dict[str, str] = {}  # what the audit's Scheduler job sends (record_deploy)
        self.app = None
        self.progress = False  # a line on stderr every 30 simulated days (the long run)

    # ---- the world: config, deploys, the clock, Firestore

    def spec(self, name: str) -> dict | None:
        eras = self.eras.get(name)
        return eras[-1].spec if eras else None

    def live_jobs(self) -> dict[str, dict]:
        return {name: eras[-1].spec for name, eras in self.eras.items() if eras[-1].spec is not None}

    def change(self, name: str, spec: dict | None) -> None:
        """A change to config.yaml, deployed at once (a redeploy) by `terraform apply`."""
        self.eras.setdefault(name, []).append(Era(self.now, spec))
        self.configure()
        self.deploy()
        self.record_deploy()
        if spec is not None and not spec.get("paused"):
            self.plan_next_fire(name)

    def configure(self) -> None:
        """The configuration the function runs by: the bake's, with the live jobs (a typed override, config.use)."""
        import config

        config.use(dataclasses.replace(self.base, jobs={name: job_of(spec, self.base.audit) for name, spec in
                                                         self.live_jobs().items()}))  # fmt: skip

    def deploy(self) -> None:
        """A new instance: a new app (main.py loaded afresh), new clients and caches."""
        from functions_framework import create_app

        ledger = importlib.import_module("ledger")  # the bake's (one import block sorts alike in both lint configs)
        ledger.firestore_client.cache_clear()
        self.app = create_app("handle_scheduled_job", str(Path(ledger.__file__).with_name("main.py")))
        main = sys.modules["main"]
        main.run = sim_work
        main.run_until_stopped = self.run_until_stopped
        self.client = self.app.test_client()
        logging.getLogger().handlers[:] = [logging.NullHandler()]  # the outcome lines: not printed

    def record_deploy(self) -> None:
        """What an apply that changes a schedule gives the audit's Scheduler job (the module's history.tf): the
        instants before and after the change (whole seconds, as time_static's rfc3339), the schedules' digest."""
        import audit
        import config

        after = self.now.replace(microsecond=0) + dt.timedelta(seconds=1 if self.now.microsecond else 0)
        digest = audit.schedules_digest(config.current().jobs)
        self.audit_headers = {audit.DEPLOYED_HEADER: f"{rfc(self.now)} {rfc(after)} {digest}"}

    def run_until_stopped(self, work, context, fields, stop_at, preload=()):
        import stop

        if context.job_id == STOP_JOB_ID:  # the real stop: the work's own process, killed at the deadline
            return stop.run_until_stopped(work, context, fields, stop_at, preload)
        if context.run_id in self.crash_next:
            self.crash_next.discard(context.run_id)
            raise Crash
        return stop.ending_of(work, context)

    def work(self, context) -> None:
        if context.run_id in self.fail_next:
            self.fail_next.discard(context.run_id)
            if context.rerun_id:  # an operator backfills the day while the failed re-run waits for its retry
                self.at(self.now + dt.timedelta(seconds=5), self.backfill_around, context.schedule_time)
            raise RuntimeError("a retryable failure of the work (simulated)")
        spec = self.spec(context.job_name) or {}
        done = Execution(
            context.job_name,
            context.schedule_time,
            context.trigger,
            context.rerun_id,
            self.now,
            bool(spec.get("paused")),
        )
        self.executions.append(done)
        self.check_duplicate(done)

    def firestore_call(self, real):
        def call(method, *args, **kwargs):
            if self.now < self.outage_until and not self.reading:
                from google.api_core import exceptions

                def unavailable(*_args, **_kwargs):
                    raise exceptions.ServiceUnavailable("Firestore outage (simulated)")

                method = unavailable
            return real(method, *args, **kwargs)

        return call

    # ---- events

    def at(self, when: dt.datetime, action, *args) -> None:
        heapq.heappush(self.events, (when, next(self.order), action, args))

    def fire_times_after(self, spec: dict, after: dt.datetime, days: int = 9):
        import schedules

        rule = schedules.Schedule(spec["schedule"], spec["time_zone"], spec.get("dst_gap", schedules.END_OF_GAP))
        return [
            fire for fire in schedules.fire_times(rule, after, after + dt.timedelta(days=days)) if fire.moment > after
        ]

    def plan_next_fire(self, name: str) -> None:
        fires = self.fire_times_after(self.spec(name), self.now)
        if fires:
            era = len(self.eras[name])
            self.at(fires[0].moment, self.scheduler_fires, name, era, fires[0])

    def scheduler_fires(self, name: str, era: int, fire) -> None:
        """Cloud Scheduler at a fire time of the job (if the era it was planned in still holds)."""
        if len(self.eras[name]) != era:
            return
        self.plan_next_fire(name)
        reading = self.rng.choice(fire.readings) if "dst" in self.kinds else fire.readings[0]
        if self.spec(name).get("paused"):
            return
        if "late_duplicate" in self.kinds and self.rng.random() < 0.03:
            return self.at(self.now + dt.timedelta(seconds=self.rng.choice((90, 5400))), self.deliver, name, reading, 0)
        self.at(self.now + dt.timedelta(seconds=self.rng.randint(0, 20)), self.deliver, name, reading, 0)
        if "late_duplicate" in self.kinds and self.rng.random() < 0.05:  # a duplicate delivery, seconds or hours on
            self.at(self.now + dt.timedelta(seconds=self.rng.choice((3, 700, 7200))), self.deliver, name, reading, 0)
        if "dst" in self.kinds and len(fire.readings) > 1 and self.rng.random() < 0.5:  # the other reading too
            self.at(self.now + dt.timedelta(minutes=61), self.deliver, name, fire.readings[-1], 0)
        if "crash" in self.kinds and self.rng.random() < 0.04:
            self.crash_next.add(self.run_id(name, fire.instant or reading))
        # Armed from the stop job's second run on: its first starts the fork server, which the deadline covers.
        if "process_group" in self.kinds and name.endswith(STOP_JOB_ID) and self.stop_runs_left and self.stop_warm:
            self.stop_runs_left -= 1
            (EFFECTS / f"{self.run_id(name, fire.instant or reading)}.armed").touch()
        self.stop_warm = self.stop_warm or name.endswith(STOP_JOB_ID)

    def run_id(self, name: str, instant: dt.datetime, manual: bool = False) -> str:
        import keys

        return keys.RunKey("dedup-test-project", "europe-west1", name, instant, manual).run_id

    def deliver(
        self, name: str, schedule_time: dt.datetime, attempt: int, extra: dict | None = None, first=None
    ) -> int:
        """One delivery with Scheduler's headers; a failure is retried as Scheduler (or Cloud Tasks) would."""
        first = first or self.now
        headers = {
            "X-CloudScheduler-JobName": name,
            "X-CloudScheduler-ScheduleTime": rfc(schedule_time),
            **(extra or {}),
        }
        self.tally.deliveries += 1
        try:
            status = self.client.post("/", headers=headers).status_code
        except Crash:
            status = 0  # the connection broke
        if not 200 <= status < 300:
            at = self.now + dt.timedelta(seconds=self.retries.wait(attempt))
            if self.retries.allowed(attempt + 1, int((at - first).total_seconds())):
                self.at(at, self.deliver, name, schedule_time, attempt + 1, extra, first)
        elif "late_duplicate" in self.kinds and attempt == 0 and self.rng.random() < 0.02:  # the 2xx got lost
            self.at(self.now + dt.timedelta(seconds=30), self.deliver, name, schedule_time, 1, extra, first)
        return status

    def enqueue_run(self, queue, key, kind, deadline, rerun=None):
        """task_queue.enqueue_run's stand-in: Cloud Tasks refuses a task id it holds; a task is delivered soon."""
        import keys
        import task_queue

        name = task_queue.task_id(rerun.rerun_id if rerun else key.run_id, kind)
        if name in self.tasks:
            return False
        self.tasks.add(name)
        headers = keys.delivery_headers(key, rerun)
        extra = {k: v for k, v in headers.items() if k.startswith("X-Rerun")}
        self.at(
            self.now + dt.timedelta(seconds=self.rng.randint(5, 120)),
            self.deliver,
            key.job_name,
            key.schedule_time,
            0,
            extra,
        )
        return True

    def audit(self) -> None:
        self.at(self.now + AUDIT_EVERY, self.audit)
        self.deliver(self.audit_job, self.now, 0, self.audit_headers)

    def tool(self, *argv: str) -> int:
        """tools/runs.py, as an operator runs it."""
        runs = importlib.import_module("scheduled_dedup_tools.runs")

        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return runs.main(list(argv))

    # ---- moves

    def new_spec(self, index: int) -> dict:
        cron, zone, extra = JOB_SHAPES[index % len(JOB_SHAPES)]
        return {"job_id": f"j{index:02d}", "schedule": cron, "time_zone": zone, **extra}

    def pick(self, exclude_stop: bool = True) -> str | None:
        names = [n for n, s in self.live_jobs().items() if not (exclude_stop and s["job_id"] == STOP_JOB_ID)]
        return self.rng.choice(sorted(names)) if names else None

    def move(self) -> None:
        """One day-2 move of a kind the run was asked for, at a random moment; the next one planned."""
        self.at(self.now + dt.timedelta(hours=self.rng.uniform(6, 60)), self.move)
        kinds = sorted(self.kinds - {"dst", "crash", "late_duplicate", "process_group"})
        if not kinds:
            return
        kind = self.rng.choice(kinds)
        name = self.pick()
        if name is None:
            return
        self.tally.moves[kind] += 1
        getattr(self, f"move_{kind}")(name)

    def move_schedule_change(self, name: str) -> None:
        spec = dict(self.spec(name), schedule=self.rng.choice(OTHER_CRONS))
        self.change(name, spec)
        # Later, an operator backfills the days around the change (what `missed` lists).
        self.at(self.now + dt.timedelta(days=1), self.backfill_around, self.now)

    def move_timezone_change(self, name: str) -> None:
        spec = dict(self.spec(name), time_zone=self.rng.choice(OTHER_ZONES))
        self.change(name, spec)
        self.at(self.now + dt.timedelta(days=1), self.backfill_around, self.now)

    def backfill_around(self, moment: dt.datetime) -> None:
        """`runs.py backfill --queue` over the day before `moment` and up to an hour ago."""
        since = max(moment - dt.timedelta(hours=20), self.now - dt.timedelta(days=6))
        self.tool("backfill", "--since", rfc(since), "--until", rfc(self.now - dt.timedelta(hours=1)), "--queue", QUEUE)

    def move_deadline_change(self, name: str) -> None:
        self.change(name, dict(self.spec(name), attempt_deadline_seconds=self.rng.choice((60, 180, 600, 900, 1800))))

    def move_add_remove(self, name: str) -> None:
        if self.rng.random() < 0.5 and len(self.live_jobs()) > 2:
            self.change(name, None)
            if self.rng.random() < 0.5:  # added back later, its schedule as before
                spec = self.eras[name][-2].spec
                self.at(self.now + dt.timedelta(hours=self.rng.uniform(2, 72)), self.change, name, spec)
        else:
            index = len(self.eras)
            self.change(f"sim-{self.token}-j{index:02d}", self.new_spec(self.rng.randrange(len(JOB_SHAPES))))

    def move_pause(self, name: str) -> None:
        spec = self.spec(name)
        fires = self.fire_times_after(spec, self.now, days=3)
        if not fires or fires[0].instant is None:
            return
        fire = fires[0].instant
        key = self.run_id(name, fire)
        situation = self.rng.choice(("retry in flight", "missed then paused", "fire while paused"))
        if situation == "retry in flight":  # its first attempt fails; the retry comes once paused
            self.fail_next.add(key)
            self.at(fire + dt.timedelta(seconds=25), self.change, name, dict(spec, paused=True))
        elif situation == "missed then paused":  # Scheduler never delivers it (an outage of its own)
            self.at(fire - dt.timedelta(seconds=1), self.drop_deliveries, name, fire)
            self.at(fire + dt.timedelta(minutes=20), self.change, name, dict(spec, paused=True))
        else:  # paused now; an operator's `runs.py fire` while paused
            self.change(name, dict(spec, paused=True))
            self.at(fire + dt.timedelta(seconds=5), self.deliver, name, fire, 0)
        resume = fire + dt.timedelta(hours=self.rng.choice((1, 2, 30)))
        self.at(resume, self.resume, name)

    def drop_deliveries(self, name: str, fire: dt.datetime) -> None:
        """The next fire time of `name` is never delivered (its event is dropped)."""
        self.events = [e for e in self.events if not (e[2] == self.scheduler_fires and e[3][0] == name)]
        heapq.heapify(self.events)
        self.at(fire + dt.timedelta(seconds=1), self.plan_next_fire, name)

    def resume(self, name: str) -> None:
        spec = self.spec(name)
        if spec is not None and spec.get("paused"):
            self.change(name, {k: v for k, v in spec.items() if k != "paused"})

    def move_force(self, name: str) -> None:
        spec = self.spec(name)
        fires = [f for f in self.fire_times_after(spec, self.now + dt.timedelta(minutes=2), days=3) if f.instant]
        if spec.get("paused") or not fires:
            return
        self.forces.append((name, fires[0].instant))
        self.deliver(name, fires[0].instant, 0)
        if self.rng.random() < 0.3:  # a second press of Force run, or its retry
            self.deliver(name, fires[0].instant, 0)

    def move_rerun(self, name: str) -> None:
        done = [e for e in self.executions if e.job == name and e.trigger == "scheduled" and e.rerun_id is None]
        done = [e for e in done if self.now - e.schedule_time < dt.timedelta(days=5)]
        if not done:
            return
        run = self.rng.choice(done)
        ids = [f"r{uuid.UUID(int=self.rng.getrandbits(128)).hex[:12]}" for _ in range(2)]
        first, second = ids
        when = rfc(run.schedule_time)
        self.reruns.update(ids)
        if self.rng.random() < 0.3:  # the first re-run's work fails retryably once: its retry runs it
            self.fail_next.add(self.run_id(name, run.schedule_time))
        self.tool(
            "rerun", name, when, "--reason", "sim", "--by", "sim@example.com", "--rerun-id", first, "--queue", QUEUE
        )
        self.at(
            self.now + dt.timedelta(minutes=30),
            self.tool,
            "rerun",
            name,
            when,
            "--reason",
            "sim",
            "--by",
            "sim@example.com",
            "--rerun-id",
            second,
            "--queue",
            QUEUE,
        )
        # A late Cloud Tasks duplicate of the first re-run's task, after the second ran.
        extra = {"X-Rerun-Id": first, "X-Rerun-By": "sim@example.com", "X-Rerun-Reason": "sim"}
        self.at(self.now + dt.timedelta(minutes=90), self.deliver, name, run.schedule_time, 0, extra)

    def move_backfill(self, name: str) -> None:
        self.backfill_around(self.now - dt.timedelta(hours=12))

    def move_catch_up(self, name: str) -> None:
        catchers = [n for n, s in self.live_jobs().items() if s.get("catch_up") and not s.get("paused")]
        if not catchers:
            return
        name = self.rng.choice(sorted(catchers))
        fires = [f for f in self.fire_times_after(self.spec(name), self.now, days=3) if f.instant]
        if fires:
            self.at(fires[0].instant - dt.timedelta(seconds=1), self.drop_deliveries, name, fires[0].instant)

    def move_outage(self, name: str) -> None:
        self.outage_until = self.now + dt.timedelta(minutes=self.rng.choice((5, 40, 300)))

    def move_redeploy(self, name: str) -> None:
        self.deploy()

    # ---- the invariant

    def check_duplicate(self, done: Execution) -> None:
        """After every execution: never two of one run (a re-run id, a Force run: once each), none while paused."""
        same = [
            e
            for e in self.executions
            if e.job == done.job and e.schedule_time == done.schedule_time and e.trigger == done.trigger
        ]
        if done.rerun_id is not None:
            if sum(e.rerun_id == done.rerun_id for e in same) > 1:
                self.tally.duplicates.append(
                    f"re-run {done.rerun_id} of {done.job} {rfc(done.schedule_time)} ran again at {rfc(self.now)}"
                )
            return
        if sum(e.rerun_id is None for e in same) > 1:
            self.tally.duplicates.append(
                f"{done.job} {rfc(done.schedule_time)} ({done.trigger}) ran again at {rfc(self.now)}"
            )
        if done.paused:
            self.tally.unexplained.append(f"{done.job} {rfc(done.schedule_time)} ran while its job was paused")

    def expected(self, name: str, since: dt.datetime, until: dt.datetime):
        """(fire, paused) of each fire time in [since, until), each judged by the era in force at its instant."""
        import schedules

        eras = self.eras[name]
        found = []
        for era, following in zip(eras, [*eras[1:], None], strict=True):
            end = following.start if following else until
            low, high = max(since, era.start), min(until, end)
            if era.spec is None or low >= high:
                continue
            spec = era.spec
            rule = schedules.Schedule(spec["schedule"], spec["time_zone"], spec.get("dst_gap", schedules.END_OF_GAP))
            found += [(fire, bool(spec.get("paused"))) for fire in schedules.fire_times(rule, low, high)]
        return found

    def stop_job_executions(self, name: str) -> list[Execution]:
        path = effects_file(name)
        if not path.exists():
            return []
        done = []
        for line in path.read_text().splitlines():
            _run_id, when, trigger, rerun = line.split()
            done.append(
                Execution(
                    name, dt.datetime.fromisoformat(when), trigger, None if rerun == "-" else rerun, self.now, False
                )
            )
        return done

    def judge(self, since: dt.datetime, until: dt.datetime) -> None:
        """Every fire time in [since, until): one execution, or a named state the bake reports."""
        self.reading = True
        try:
            states = reported(self, since, until)
        finally:
            self.reading = False
        executions = list(self.executions)
        for name in self.eras:
            if name.endswith(STOP_JOB_ID):
                executions += self.stop_job_executions(name)
        runs = collections.Counter(
            (e.job, e.schedule_time) for e in executions if e.trigger == "scheduled" and e.rerun_id is None
        )
        expected_keys = set()
        for name in self.eras:
            for fire, paused in self.expected(name, since, until):
                key = (name, fire.instant or fire.moment)
                expected_keys.add(key)
                count, state = runs[key], states.get(key)
                where = f"{name} {rfc(key[1])} ({fire.wall:%Y-%m-%d %H:%M} {self.tz_at(name, key[1])})"
                if fire.instant is None:
                    named = "dst skip" if count == 0 else None
                elif count == 1:  # a removed job is no longer reported on: its runs are judged here alone
                    reports = state is not None or name in self.live_jobs()
                    named = (
                        "executed" if (state or "").split("+")[0] in ("completed", "failed") or not reports else None
                    )
                elif count > 1:
                    self.tally.duplicates.append(f"{where}: {count} executions (judged)")
                    continue
                elif paused and state == "paused":
                    named = "paused"
                elif (state or "").split("+")[0] == "skipped":  # late: alerted missing before it came, or not
                    named = "skipped late"
                elif state in ("missing+alerted", "stuck+alerted"):
                    named = "missing and alerted"
                else:
                    named = None
                if named is None:
                    self.tally.unexplained.append(f"{where}: {count} execution(s), reported {state or 'nothing'}")
                else:
                    self.tally.states[named] += 1
        for key, state in states.items():  # reported due, never scheduled
            if key not in expected_keys and state.split("+")[0] in ("missing", "stuck", "pending"):
                self.tally.unexplained.append(f"{key[0]} {rfc(key[1])}: never scheduled, reported {state}")
        for key, count in runs.items():
            if since <= key[1] < until and key not in expected_keys:
                self.tally.duplicates.append(f"{key[0]} {rfc(key[1])}: never scheduled, ran {count} time(s)")
        for name, instant in self.forces:
            if since <= instant < until:
                done = sum(1 for e in executions if (e.job, e.schedule_time, e.trigger) == (name, instant, "manual"))
                if done != 1:
                    self.tally.unexplained.append(f"Force run of {name} for {rfc(instant)}: {done} manual executions")
                else:
                    self.tally.states["force run"] += 1
        self.forces = [(n, i) for n, i in self.forces if i >= until]

    def tz_at(self, name: str, instant: dt.datetime) -> str:
        era = [e for e in self.eras[name] if e.start <= instant]
        return (era[-1].spec or {}).get("time_zone", "?") if era else "?"

    def judge_day(self) -> None:
        self.at(self.now + dt.timedelta(days=1), self.judge_day)
        if self.progress and (self.now - START).days % 30 == 0:
            print(f"day {(self.now - START).days}: {self.tally.deliveries} deliveries", file=sys.stderr, flush=True)
        until = self.now - JUDGE_LAG - dt.timedelta(hours=1)
        if until > self.judged_until:
            self.judge(self.judged_until, until)
            self.judged_until = until

    # ---- the run

    def run(self) -> Tally:
        global SIMULATION
        import audit
        import config
        import dedup
        import ledger
        import task_queue

        runs = importlib.import_module("scheduled_dedup_tools.runs")

        started = time.monotonic()
        previous = config.use(None)
        patched = [(dedup, "utcnow"), (task_queue, "enqueue_run"), (ledger, "firestore_call"), (runs, "PROGRESS_FROM")]
        saved = [(module, name, getattr(module, name)) for module, name in patched]
        alerts = AuditAlerts(self.alerts)
        audit.logger.addHandler(alerts)
        root = logging.getLogger()
        handlers = list(root.handlers)
        served = sys.modules.get("main")  # the suite's app serves this one: put back after the redeploys
        SIMULATION = self
        self.forces, self.reruns = [], set()
        try:
            self.base = dataclasses.replace(
                config.current(), collection=f"years-sim-{self.token}", tasks_queue=QUEUE, project="dedup-test-project"
            )
            dedup.utcnow = lambda: self.now
            task_queue.enqueue_run = self.enqueue_run
            ledger.firestore_call = self.firestore_call(saved[2][2])
            runs.PROGRESS_FROM = sys.maxsize  # no progress bars (drawn on the real stderr)
            self.audit_job = self.base.audit_job
            for index in range(self.job_count):
                self.eras[f"sim-{self.token}-j{index:02d}"] = [Era(START, self.new_spec(index))]
            if "process_group" in self.kinds:
                stop_spec = {"job_id": STOP_JOB_ID, "schedule": "0 12 * * *", "time_zone": "Etc/UTC",
                             "attempt_deadline_seconds": STOP_DEADLINE_SECONDS}  # fmt: skip
                self.eras[f"sim-{self.token}-{STOP_JOB_ID}"] = [Era(START, stop_spec)]
            self.configure()
            self.deploy()
            self.record_deploy()
            for name in self.eras:
                self.plan_next_fire(name)
            self.at(START + dt.timedelta(minutes=5), self.audit)
            self.at(START + dt.timedelta(days=1), self.judge_day)
            self.at(START + dt.timedelta(hours=self.rng.uniform(6, 30)), self.move)
            end = START + dt.timedelta(days=self.days)
            while self.events and self.events[0][0] < end:
                when, _, action, args = heapq.heappop(self.events)
                self.now = max(self.now, when)
                armed = any(EFFECTS.glob("*.armed"))
                action(*args)
                if armed and not any(EFFECTS.glob("*.armed")):  # an armed stop ran: its helper's delay passes
                    time.sleep(HELPER_DELAY_SECONDS + 1)
            self.now = end + JUDGE_LAG + dt.timedelta(hours=2)  # the last days settle; the audit sees them
            self.events = []
            for hours in range(0, 24, 4):
                self.now = end + dt.timedelta(hours=hours)
                self.deliver(self.audit_job, self.now, 0, self.audit_headers)
            self.now = end + dt.timedelta(days=1)
            self.judge(self.judged_until, end - dt.timedelta(hours=1))
        finally:
            SIMULATION = None
            for module, name, value in saved:
                setattr(module, name, value)
            audit.logger.removeHandler(alerts)
            root.handlers[:] = handlers
            if served is not None:
                sys.modules["main"] = served
            config.use(previous)
        self.seconds = time.monotonic() - started
        return self.tally


def simulate(seed: int, days: int = 30, jobs: int = 6, moves=MOVE_KINDS, stop_runs: int = 2) -> Simulation:
    sim = Simulation(seed, days, jobs, moves, stop_runs)
    sim.run()
    return sim


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=int(os.environ.get("YEARS_SIM_SEED", random.randrange(10**6))))
    parser.add_argument("--days", type=int, default=730)
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--moves", default="all", help="comma-separated MOVE_KINDS, or all")
    parser.add_argument("--stop-runs", type=int, default=6, help="runs of the stop job armed with a helper process")
    args = parser.parse_args(argv)
    moves = MOVE_KINDS if args.moves == "all" else tuple(args.moves.split(","))
    from scheduled_dedup_tools.firestore_emulator import running_emulator

    with running_emulator():
        sim = Simulation(args.seed, args.days, args.jobs, moves, args.stop_runs)
        sim.progress = True
        sim.run()
    print(sim.tally.table(args.seed, args.days, args.jobs, sim.seconds))
    print(f"replay: YEARS_SIM_SEED={args.seed} (same --days/--jobs/--moves)")
    return 1 if sim.tally.duplicates or sim.tally.unexplained else 0


if __name__ == "__main__":
    sys.exit(main())
