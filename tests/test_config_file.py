"""Issue 17: one file, config.yaml, holds the jobs and their timing, and the project lives with it.

A bake with a nightly export that needs 10 minutes beside a */15 sync (each job its own deadline); a schedule
changed in the one file (the tools key no run twice); a job added (its Scheduler job in Terraform's plan, its run
served locally) - each on a real bake, its Terraform offline, its runs on the Firestore emulator.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import zoneinfo
from pathlib import Path

import pytest
import rules
import yaml
from conftest import bake

from tests.terraform_offline import terraform

pytestmark = [pytest.mark.bake, pytest.mark.terraform]

EXPORT = {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin", "attempt_deadline_seconds": 600}
SYNC = {"schedule": "*/15 * * * *"}


@pytest.fixture(scope="module")
def export_and_sync(tmp_path_factory) -> Path:
    """Every other answer at its default."""
    return bake(tmp_path_factory.mktemp("export-sync"), jobs={"export": EXPORT, "sync": SYNC})


def copy_of(project: Path, tmp_path: Path) -> Path:
    copy = tmp_path / project.name
    shutil.copytree(project, copy, ignore=shutil.ignore_patterns(".terraform", "__pycache__", ".pytest_cache"))
    return copy


def python(project: Path, code: str, env: dict[str, str] | None = None) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=project, capture_output=True, text=True, timeout=120, env=env
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def emulator_env(emulator_host: str, project: Path) -> dict[str, str]:
    """The emulator's environment for a copy of a bake, whose config.yaml names a project of its own: its runs stay
    apart from other bakes' on the shared emulator."""
    own = "cfg-" + hashlib.sha256(str(project).encode()).hexdigest()[:12]
    file = project / "config.yaml"
    file.write_text(re.sub(r"(?m)^project: .*$", f"project: {own}", file.read_text(encoding="utf-8"), count=1))
    return {**os.environ, "FIRESTORE_EMULATOR_HOST": emulator_host}


def deliver(project: Path, env: dict[str, str], job_id: str, schedule_time: dt.datetime) -> str:
    """One Scheduler-like delivery to the function served by functions-framework (its WSGI app, in process)."""
    code = f"""
import functions_framework, yaml
config = yaml.safe_load(open("config.yaml"))
app = functions_framework.create_app(target="handle_scheduled_job", source="main.py")
answer = app.test_client().post("/", headers={{
    "X-CloudScheduler-JobName": config["slug"] + "-" + {job_id!r},
    "X-CloudScheduler-ScheduleTime": {schedule_time.strftime("%Y-%m-%dT%H:%M:%SZ")!r},
}})
print(answer.status_code, answer.get_data(as_text=True).strip())
"""
    return python(project, code, env).strip().splitlines()[-1]


def last_fire(hour: int, minute: int, zone: str, days_ago: int) -> dt.datetime:
    local = dt.datetime.now(zoneinfo.ZoneInfo(zone)).replace(hour=hour, minute=minute, second=0, microsecond=0)
    return (local - dt.timedelta(days=days_ago)).astimezone(dt.UTC)


def test_export_and_sync_bake_each_with_its_own_deadline(export_and_sync):
    """Today's template refuses this bake (one deadline for every job: "one fault can keep a run busy for
    1559 s" at */15) or the key (attempt_deadline_seconds is no job key)."""
    written = yaml.safe_load((export_and_sync / "config.yaml").read_text())
    assert written["jobs"]["export"] == EXPORT
    assert written["jobs"]["sync"] == SYNC
    printed = python(
        export_and_sync,
        "import config, json; c = config.load(); print(json.dumps({j.job_id: [j.timing['attempt_deadline_seconds'],"
        " j.timing['lease_seconds'], j.attempt_deadline.total_seconds()] for j in c.jobs.values()}))",
    )
    assert json.loads(printed) == {"export": [600, 660, 600.0], "sync": [300, 360, 300.0]}
    checked = subprocess.run([sys.executable, "config.py"], cwd=export_and_sync, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    # Terraform gives each Scheduler job its own deadline, and the function the largest (root.tftest.hcl, mocks).
    tf = export_and_sync / "terraform"
    assert terraform(tf, "init", "-backend=false").returncode == 0
    tested = terraform(tf, "test", "-filter=tests/scheduled_dedup.tftest.hcl")
    assert tested.returncode == 0, tested.stdout[-3000:] + tested.stderr[-3000:]


def test_a_schedule_changed_in_the_one_file_keys_no_run_twice(export_and_sync, emulator_host, tmp_path):
    """The trap of two live sources: a schedule changed where Terraform reads it, the tools reading another
    copy, and backfill listing each real run as missing. With one file, the tools see what is deployed."""
    project = copy_of(export_and_sync, tmp_path)
    env = emulator_env(emulator_host, project)
    before = last_fire(2, 0, "Europe/Berlin", 2)
    assert deliver(project, env, "export", before).startswith("200 processed")
    config_file = project / "config.yaml"
    config_file.write_text(config_file.read_text().replace('schedule: "0 2 * * *"', 'schedule: "0 4 * * *"', 1))
    after = last_fire(4, 0, "Europe/Berlin", 1)
    assert deliver(project, env, "export", after).startswith("200 processed")

    def missed(since: dt.datetime, *extra: str) -> list[dict]:
        window = ["--since", since.isoformat(), "--until", (since + dt.timedelta(days=1)).isoformat()]
        result = subprocess.run(
            [sys.executable, "-m", "scheduled_dedup_tools.runs", "missed", *window, "--job", "export", "--json",
             *extra],
            cwd=project, capture_output=True, text=True, timeout=120, env=env,
        )  # fmt: skip
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    day = after.astimezone(zoneinfo.ZoneInfo("Europe/Berlin")).replace(hour=0, minute=0)
    assert missed(day) == [], "the run at the new time is there: nothing to backfill"
    expected = missed(day, "--all")
    assert [(run["schedule_time"], run["state"]) for run in expected] == [
        (after.strftime("%Y-%m-%dT%H:%M:%SZ"), "completed")
    ]


def add_job(project: Path, job_id: str, schedule: str, work: bool) -> None:
    config_file = project / "config.yaml"
    config_file.write_text(config_file.read_text() + f'  {job_id}:\n    schedule: "{schedule}"\n')
    if work:
        job = project / "job.py"
        text = job.read_text()
        opening = re.search(r"WORK: dict\[.*\] = \{\n", text)
        work = f"def {job_id}_work(context: RunContext) -> None:\n    pass\n\n\n"  # the job's own work function
        job.write_text(
            text[: opening.start()] + work + text[opening.start() : opening.end()]
            + f'    "{job_id}": {job_id}_work,\n' + text[opening.end() :]
        )  # fmt: skip


# The bake's test that config.yaml's jobs are job.py's WORK (a function bake's tests/test_job.py; the example test
# beside it checks the template's stub work, which an added job's work is not).
JOB_WORK_TEST = "tests/test_job.py::test_the_jobs_of_config_yaml_are_the_jobs_of_job_work"


def test_adding_a_job_is_config_yaml_and_job_work(export_and_sync, emulator_host, tmp_path):
    project = copy_of(export_and_sync, tmp_path)
    # config.yaml alone: the bake's own test says the two disagree.
    add_job(project, "weekly", "0 6 * * 1", work=False)
    alone = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", JOB_WORK_TEST],
        cwd=project, capture_output=True, text=True, timeout=300, env=emulator_env(emulator_host, project),
    )  # fmt: skip
    assert alone.returncode != 0 and "config.yaml's jobs and job.py's WORK" in alone.stdout, alone.stdout[-2000:]
    # And its work in job.py: the test passes, Terraform plans its Scheduler job, its run is served.
    shutil.rmtree(project)
    project = copy_of(export_and_sync, tmp_path)
    add_job(project, "weekly", "0 6 * * 1", work=True)
    both = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_config.py", JOB_WORK_TEST],
        cwd=project, capture_output=True, text=True, timeout=300, env=emulator_env(emulator_host, project),
    )  # fmt: skip
    assert both.returncode == 0, both.stdout[-3000:]
    tf = project / "terraform"
    assert terraform(tf, "init", "-backend=false").returncode == 0
    graph = terraform(tf, "graph")
    assert graph.returncode == 0 and "google_cloud_scheduler_job.this" in graph.stdout
    # root.tftest.hcl: one Scheduler job per job of config.yaml, named <slug>-<job id> (plan and apply, mocks).
    planned = terraform(tf, "test", "-filter=tests/root.tftest.hcl")
    assert planned.returncode == 0, planned.stdout[-3000:] + planned.stderr[-3000:]
    now = dt.datetime.now(dt.UTC)
    monday = now.replace(hour=6, minute=0, second=0, microsecond=0) - dt.timedelta(days=now.weekday())
    monday -= dt.timedelta(days=7) if monday > now else dt.timedelta(0)  # the last Monday 06:00 that has passed
    assert deliver(project, emulator_env(emulator_host, project), "weekly", monday).startswith("200 processed")


# ---------------------------------------------------------------- issue 24: per-job timing, everywhere

LONG = {"schedule": "0 4 * * *", "attempt_deadline_seconds": 1800}
MID = {"schedule": "30 4 * * *", "time_zone": "Europe/Berlin", "attempt_deadline_seconds": 900}
NIGHTLY = {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}  # cookiecutter.json's job
# Cloud Scheduler's RetryConfig limits (rules.MAX_RETRY_COUNT, MAX_BACKOFF_SECONDS) and Cloud Tasks' task attempts
# (rules.ATTEMPT_DEADLINE_RANGE: also Task.dispatch_deadline's range for HTTP tasks).
LIMITS = {"retry_count": 5, "min_backoff_seconds": 3600, "max_backoff_seconds": 3600, "attempt_deadline_seconds": 1800}


@pytest.fixture(scope="module")
def long_jobs(tmp_path_factory) -> Path:
    """A 30-minute and a 15-minute job beside the default one; every other answer at its default."""
    return bake(tmp_path_factory.mktemp("long-jobs"), jobs={"nightly": NIGHTLY, "long": LONG, "mid": MID})


def check_config(project: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "config.py"], cwd=project, capture_output=True, text=True, timeout=120)


def test_a_30_minute_job_bakes_with_every_other_answer_at_its_default(long_jobs, export_and_sync):
    """Today's template refuses this bake: the retry waits come from the defaults' deadline only ("raise
    retry_count or min_backoff_seconds", retry_count already at its maximum of 5)."""
    written = yaml.safe_load((long_jobs / "config.yaml").read_text())
    assert written["defaults"] == yaml.safe_load((export_and_sync / "config.yaml").read_text())["defaults"]
    assert written["jobs"]["nightly"] == NIGHTLY
    for job_id, job, lease in (("long", LONG, 1860), ("mid", MID, 960)):
        # The job's own waits, derived from its own lease by the one formula; every other number the defaults'.
        assert written["jobs"][job_id] == job | rules.passing_waits(5, 3, lease)
    checked = check_config(long_jobs)
    assert checked.returncode == 0, checked.stderr
    assert "nightly-report-long: '0 4 * * *' in Etc/UTC; attempt_deadline_seconds 1800, lease_seconds 1860" in (
        checked.stdout
    )


def hinted(message: str) -> dict[str, dict[str, int]]:
    """The values a refusal names ("values that pass: jobs.x.min_backoff_seconds 75, ..."), by job id."""
    assert message.count("\n") == 0 and "values that pass: " in message, message
    values: dict[str, dict[str, int]] = {}
    for job_id, key, value in re.findall(
        r"jobs\.([a-z0-9-]+)\.([a-z_]+) ([0-9]+)", message.split("values that pass: ")[1]
    ):
        values.setdefault(job_id, {})[key] = int(value)
    return values


HAND_ADDED = {
    "deadline-only": {"attempt_deadline_seconds": 1800},
    "one-retry-long-lease": {"attempt_deadline_seconds": 1800, "retry_count": 1, "lease_seconds": 4000},
    "lease-no-waits-outlast": {"attempt_deadline_seconds": 1800, "lease_seconds": 18000},  # 5 x 3600 s = 18000
    "waits-equal-the-lease": {"attempt_deadline_seconds": 700, "lease_seconds": 750},  # 30+60+120+240+300
}


@pytest.mark.parametrize("numbers", list(HAND_ADDED.values()), ids=list(HAND_ADDED))
def test_a_hand_added_long_job_is_refused_with_values_that_pass(export_and_sync, tmp_path, numbers):
    """A job added to config.yaml by hand, its own deadline and no waits: `python config.py` refuses it in one line
    that names values which pass, never one beyond Cloud Scheduler's limits (retry_count 0-5, each backoff at most
    3600 s: RetryConfig, https://cloud.google.com/scheduler/docs/reference/rest/v1/projects.locations.jobs);
    written as named, the file passes. Today's refusal says "raise retry_count" at retry_count 5."""
    project = copy_of(export_and_sync, tmp_path)
    config_file = project / "config.yaml"
    original = config_file.read_text()
    written = "".join(f"    {key}: {value}\n" for key, value in numbers.items())
    config_file.write_text(original + '  late:\n    schedule: "0 5 * * *"\n' + written)
    refused = check_config(project)
    assert refused.returncode == 1 and "jobs.late.retry_count=" in refused.stderr, refused.stderr
    values = hinted(refused.stderr.strip())
    assert set(values) == {"late"}, refused.stderr
    for key, value in values["late"].items():
        assert value <= LIMITS.get(key, value), f"{key} {value} is beyond its limit: {refused.stderr}"
    fixed = {**numbers, **values["late"]}
    config_file.write_text(original + '  late:\n    schedule: "0 5 * * *"\n' + "".join(
        f"    {key}: {value}\n" for key, value in fixed.items()
    ))  # fmt: skip
    passed = check_config(project)
    assert passed.returncode == 0, f"the hint's values are refused: {refused.stderr}\n{passed.stderr}"


def test_the_waits_rule_holds_on_each_side_of_the_lease(export_and_sync, tmp_path):
    """Boundary: the defaults' waits (30+60+120+240+300 = 750 s) must add up to more than the job's lease, as
    config.yaml states it: a lease of 749 s passes, 750 s is refused (HAND_ADDED covers the refusal's hint)."""
    project = copy_of(export_and_sync, tmp_path)
    config_file = project / "config.yaml"
    original = config_file.read_text()
    for lease, code in ((749, 0), (750, 1)):
        job = f'  late:\n    schedule: "0 5 * * *"\n    attempt_deadline_seconds: 700\n    lease_seconds: {lease}\n'
        config_file.write_text(original + job)
        assert check_config(project).returncode == code, lease


@pytest.mark.parametrize(("deadline", "code"), [(14, 1), (15, 0), (1800, 0), (1801, 1)])
def test_a_jobs_own_deadline_holds_on_each_side_of_schedulers_range(export_and_sync, tmp_path, deadline, code):
    """A job's own attempt_deadline_seconds, as config.yaml states it: Scheduler's 15-1800 s, which is also the
    range of the dispatch deadline its Cloud Tasks deliveries carry (task_queue.enqueue)."""
    project = copy_of(export_and_sync, tmp_path)
    config_file = project / "config.yaml"
    waits = rules.passing_waits(5, 3, deadline + 60) or {}
    own = "".join(f"    {key}: {value}\n" for key, value in {"attempt_deadline_seconds": deadline, **waits}.items())
    config_file.write_text(config_file.read_text() + '  late:\n    schedule: "0 5 * * *"\n' + own)
    checked = check_config(project)
    assert checked.returncode == code, checked.stderr
    if code:
        assert "jobs.late.attempt_deadline_seconds=" in checked.stderr and "15-1800" in checked.stderr


def planned(project: Path) -> dict[str, dict]:
    """The bake's root Terraform planned against mock providers (`terraform test -verbose -json` prints the
    plan): {resource address: its planned values}."""
    tf = project / "terraform"
    test = tf / "tests" / "plan_only.tftest.hcl"
    mocks = "".join(f'mock_provider "{name}" {{}}\n' for name in ("google", "archive"))
    # The instants of history.tf, known at plan so that the audit job's header is (Terraform's "Mocks" page:
    # override_during = plan gives mocked values in the plan, not only at apply).
    mocks += 'mock_provider "time" {\n  override_during = plan\n  mock_resource "time_static" {\n'
    mocks += '    defaults = { rfc3339 = "2027-01-01T00:00:00Z" }\n  }\n}\n'
    test.write_text(
        mocks + '\nrun "plan" {\n  command         = plan\n  expect_failures = [check.alerts_reach_someone]\n}\n'
    )
    try:
        assert terraform(tf, "init", "-backend=false").returncode == 0
        result = terraform(tf, "test", f"-filter=tests/{test.name}", "-verbose", "-json", timeout=900)
    finally:
        test.unlink()
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for line in result.stdout.splitlines():
        message = json.loads(line)
        if message.get("type") == "test_plan":
            changes = message["test_plan"]["resource_changes"]
            return {change["address"]: change["change"]["after"] for change in changes}
    raise AssertionError(f"no plan printed:\n{result.stdout[-3000:]}")


@pytest.fixture(scope="module")
def long_jobs_plan(long_jobs, tmp_path_factory) -> dict[str, dict]:
    return planned(copy_of(long_jobs, tmp_path_factory.mktemp("long-jobs-plan")))


CORE = "module.scheduled_dedup."
# The Scheduler jobs: two calls of the core's scheduler-jobs module, the user's jobs and the audit's.
SCHEDULER_JOBS = CORE + "module.scheduler_jobs.google_cloud_scheduler_job.this"
AUDIT_JOB = CORE + 'module.audit_job.google_cloud_scheduler_job.this["audit"]'


def test_the_queue_retries_outlast_every_jobs_lease(long_jobs, long_jobs_plan):
    """One Cloud Tasks queue carries re-runs, backfills and catch-ups of every job: its retries must outlast the
    lease of the longest job, or a task answered 409 while a live attempt holds the run is dropped. Today it
    retries with the defaults' numbers (30 s ... 300 s: 750 s in all) against a 1860 s lease."""
    (retry,) = long_jobs_plan[CORE + "google_cloud_tasks_queue.deliveries"]["retry_config"]
    seconds = {key: int(retry[key].removesuffix("s")) for key in ("min_backoff", "max_backoff", "max_retry_duration")}
    waits = rules.retry_intervals_seconds(
        retry["max_attempts"] - 1, seconds["min_backoff"], seconds["max_backoff"], retry["max_doublings"]
    )
    printed = python(
        long_jobs,
        "import config, json; print(json.dumps({j.job_id: dict(j.timing) for j in config.load().jobs.values()}))",
    )
    for job_id, timing in json.loads(printed).items():
        assert sum(waits) > timing["lease_seconds"], (job_id, waits, timing)
        assert retry["max_attempts"] - 1 >= timing["retry_count"], (job_id, retry, timing)
        job = long_jobs_plan[f'{SCHEDULER_JOBS}["{job_id}"]']
        assert job["attempt_deadline"] == f"{timing['attempt_deadline_seconds']}s"
        (scheduler,) = job["retry_config"]
        assert scheduler["min_backoff_duration"] == f"{timing['min_backoff_seconds']}s", job_id
        assert scheduler["max_backoff_duration"] == f"{timing['max_backoff_seconds']}s", job_id
    assert all(value <= LIMITS["max_backoff_seconds"] for value in waits)


def test_every_name_python_and_terraform_must_agree_on_is_the_same(long_jobs, long_jobs_plan):
    """What the function and tools/runs.py name (config.Config, from config.yaml) against what Terraform
    creates: the deliveries queue (every re-run, backfill and catch-up goes there), each Scheduler job (the
    X-CloudScheduler-JobName the function expects), the audit job, the Firestore database and collection. The
    service accounts are Terraform's alone (no Python names one)."""
    code = (
        "import config, json; c = config.load(); print(json.dumps({'tasks_queue': c.tasks_queue, 'jobs': list(c.jobs),"
        " 'audit_job': c.audit_job, 'database': c.database, 'collection': c.collection, 'project': c.project,"
        " 'location': c.location}))"
    )
    baked = json.loads(python(long_jobs, code))
    queue = long_jobs_plan[CORE + "google_cloud_tasks_queue.deliveries"]
    assert baked["tasks_queue"] == f"projects/{queue['project']}/locations/{queue['location']}/queues/{queue['name']}"
    scheduled = {
        values["name"] for address, values in long_jobs_plan.items() if address.startswith(SCHEDULER_JOBS + "[")
    }
    assert set(baked["jobs"]) == scheduled == {f"nightly-report-{j}" for j in ("nightly", "long", "mid")}
    assert baked["audit_job"] == long_jobs_plan[AUDIT_JOB]["name"]
    ttl = long_jobs_plan[CORE + "google_firestore_field.expire_at"]
    assert (
        baked["database"]
        == long_jobs_plan[CORE + "module.project[0].google_firestore_database.this[0]"]["name"]
        == ttl["database"]
    )
    assert baked["collection"] == ttl["collection"]
    assert baked["project"] == queue["project"] and baked["location"] == queue["location"]
    # When the last apply changed the schedules (history.tf), as the audit's Scheduler job sends it: the digest is
    # the one the audit computes from config.yaml (a mismatch would silently never date a change).
    headers = long_jobs_plan[AUDIT_JOB]["http_target"][0]["headers"]
    name, expected = python(
        long_jobs,
        "import audit, config; jobs = config.load().jobs; print(audit.DEPLOYED_HEADER, audit.schedules_digest(jobs))",
    ).split()
    start, seen, digest = headers[name].split()
    assert (start, seen, digest) == ("2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z", expected)


@pytest.mark.parametrize(
    ("retention", "hint"),
    [
        (604800, "a value that passes: audit_interval_minutes 480"),  # 480 min + 46799 s fit in a day, 720 do not
        (47000, "values that pass: audit_interval_minutes 480, retention_seconds 75599"),
    ],
)
def test_an_audit_interval_a_slow_job_outgrows_is_refused_naming_one_that_passes(
    export_and_sync, tmp_path, retention, hint
):
    """A slow job (lease 17999 s, retries 6 x 1800 + 5 x 3600 s: settled after 46799 s) with the audit every 12 h
    would let a run go missing between two audits; the refusal names values that pass (the longest interval that
    fits, else the retention it needs), and written as named, the file passes. Today's refusal names none."""
    project = copy_of(export_and_sync, tmp_path)
    config_file = project / "config.yaml"
    text = config_file.read_text()
    text = re.sub(r"^audit_interval_minutes: .*$", "audit_interval_minutes: 720", text, flags=re.M)
    text = re.sub(r"^retention_seconds: .*$", f"retention_seconds: {retention}", text, flags=re.M)
    slow = {"attempt_deadline_seconds": 1800, "lease_seconds": 17999, "min_backoff_seconds": 3600}
    slow |= {"max_backoff_seconds": 3600}
    config_file.write_text(
        text + '  slow:\n    schedule: "0 5 * * *"\n' + "".join(f"    {k}: {v}\n" for k, v in slow.items())
    )
    refused = check_config(project)
    assert refused.returncode == 1 and "audit_interval_minutes=720" in refused.stderr, refused.stderr
    assert hint in refused.stderr, refused.stderr
    text = config_file.read_text()
    for key, value in re.findall(
        r"(audit_interval_minutes|retention_seconds) ([0-9]+)", refused.stderr.split("; ")[-1]
    ):
        text = re.sub(rf"^{key}: .*$", f"{key}: {value}", text, flags=re.M)
    config_file.write_text(text)
    passed = check_config(project)
    assert passed.returncode == 0, f"the hint's value is refused: {refused.stderr}\n{passed.stderr}"


def terraform_reads(workdir: Path, text: str) -> object:
    """config.yaml as Terraform's root reads it (yamldecode), evaluated by Terraform in a root of one output."""
    workdir.mkdir()
    (workdir / "config.yaml").write_text(text)
    (workdir / "main.tf").write_text('output "config" { value = yamldecode(file("${path.root}/config.yaml")) }\n')
    applied = terraform(workdir, "apply", "-auto-approve", "-input=false", f"-state={workdir / 'state'}")
    assert applied.returncode == 0, applied.stdout[-2000:] + applied.stderr[-2000:]
    return json.loads(terraform(workdir, "output", "-json", f"-state={workdir / 'state'}").stdout)["config"]["value"]


def test_terraform_and_the_function_read_the_baked_config_yaml_alike(export_and_sync, tmp_path):
    """Issue 24 item 6: one reading of every value: Terraform's yamldecode (YAML 1.2) and PyYAML (YAML 1.1)."""
    text = (export_and_sync / "config.yaml").read_text()
    assert terraform_reads(tmp_path / "tf", text) == yaml.safe_load(text)


def test_a_deadline_the_two_readers_read_differently_is_refused_before_terraform_reads_it(export_and_sync, tmp_path):
    """`attempt_deadline_seconds: 0600`: 600 s to Terraform (Scheduler's deadline), 384 s to the function (its
    stop): `python config.py`, which `make deploy` runs first, refuses it naming the key, the value and the rule."""
    text, count = re.subn(
        r"(?m)^(  attempt_deadline_seconds:) \d+$", r"\1 0600", (export_and_sync / "config.yaml").read_text()
    )
    assert count == 1
    assert terraform_reads(tmp_path / "tf", text)["defaults"]["attempt_deadline_seconds"] == 600
    assert yaml.safe_load(text)["defaults"]["attempt_deadline_seconds"] == 384
    (tmp_path / "config.yaml").write_text(text)
    checked = subprocess.run(
        [sys.executable, "config.py", str(tmp_path / "config.yaml")],
        cwd=export_and_sync,
        capture_output=True,
        text=True,
    )
    (line,) = checked.stderr.splitlines()
    assert checked.returncode == 1 and "defaults.attempt_deadline_seconds='0600'" in line and "leading zero" in line
