"""The protocol's pure parts: the state machine, schedule-time parsing, the configuration, import hygiene."""

import dataclasses
import datetime as dt
import hashlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from cronsim import CronSim

import config
import dedup
import rules
from config import RELEASE_MARGIN
from keys import RunKey, parse_schedule_time, read_run_key
from outcomes import InvalidDelivery, Misconfigured

NOW = dt.datetime(2026, 6, 1, 12, 0, tzinfo=dt.UTC)
LATER = NOW + dt.timedelta(minutes=5)
EARLIER = NOW - dt.timedelta(minutes=5)


@pytest.mark.parametrize(
    ("record", "decision"),
    [
        ({"status": "completed", "lease_expires": LATER, "expire_at": LATER}, dedup.Decision.DUPLICATE),
        ({"status": "failed", "lease_expires": EARLIER, "expire_at": LATER}, dedup.Decision.DUPLICATE),
        ({"status": "in_progress", "lease_expires": LATER, "expire_at": LATER}, dedup.Decision.IN_PROGRESS),
        ({"status": "in_progress", "lease_expires": EARLIER, "expire_at": LATER}, dedup.Decision.TAKE_OVER),
        ({"status": "in_progress", "lease_expires": NOW, "expire_at": LATER}, dedup.Decision.TAKE_OVER),
        ({"status": "completed", "lease_expires": EARLIER, "expire_at": EARLIER}, dedup.Decision.TAKE_OVER),
        ({"status": "in_progress", "lease_expires": LATER, "expire_at": NOW}, dedup.Decision.TAKE_OVER),
    ],
)
def test_decide(record, decision):
    assert dedup.decide(record, NOW) is decision


@pytest.mark.parametrize(
    ("status", "lease_expires", "rerun_id", "decision"),
    [
        ("completed", EARLIER, "r2", dedup.Decision.TAKE_OVER),  # a new re-run reopens a finished run
        ("failed", EARLIER, "r2", dedup.Decision.TAKE_OVER),
        ("completed", EARLIER, "r1", dedup.Decision.DUPLICATE),  # a retry of the re-run the record holds
        ("completed", EARLIER, "r0", dedup.Decision.DUPLICATE),  # and of every earlier one, for ever
        ("completed", EARLIER, "gone", dedup.Decision.TAKE_OVER),  # released after a retryable failure: it runs
        ("completed", EARLIER, None, dedup.Decision.DUPLICATE),
        ("in_progress", LATER, "r2", dedup.Decision.IN_PROGRESS),  # a re-run waits for a live attempt
    ],
)
def test_decide_a_rerun(status, lease_expires, rerun_id, decision):
    """The re-run rule is the state machine's too: the work runs once more per re-run id, never beside a live one."""
    reruns = [{"rerun_id": "r0"}, {"rerun_id": "gone", "released_at": EARLIER}, {"rerun_id": "r1"}]
    record = {"status": status, "lease_expires": lease_expires, "expire_at": LATER, "rerun_id": "r1", "reruns": reruns}
    assert dedup.decide(record, NOW, rerun_id) is decision


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-10-16T12:00:00Z", dt.datetime(2026, 10, 16, 12, tzinfo=dt.UTC)),
        ("2026-10-16T05:00:00-07:00", dt.datetime(2026, 10, 16, 12, tzinfo=dt.UTC)),
        ("2026-10-16t12:00:00z", dt.datetime(2026, 10, 16, 12, tzinfo=dt.UTC)),
        ("2026-10-16T12:00:00.123456789+00:00", dt.datetime(2026, 10, 16, 12, 0, 0, 123456, tzinfo=dt.UTC)),
        ("2026-10-16T23:30:00+14:00", dt.datetime(2026, 10, 16, 9, 30, tzinfo=dt.UTC)),
    ],
)
def test_parse_schedule_time(text, expected):
    assert parse_schedule_time(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "2026-10-16",
        "2026-10-16T12:00Z",
        "2026-10-16T12:00:00",
        "2026-13-01T00:00:00Z",
        "2026-10-16T12:00:00+24:00",
        "2026-10-16T12:00:60Z",
        " 2026-10-16T12:00:00Z",
        "2026-10-16T12:00:00Z\n",
        "２０２６-10-16T12:00:00Z",
    ],
)
def test_parse_schedule_time_refuses(text):
    with pytest.raises(ValueError):
        parse_schedule_time(text)


def test_the_accepted_window_ends_exactly_at_the_retention_and_the_max_future():
    """A record counts as absent from expire_at (schedule time + retention) on, so a delivery exactly one
    retention old is refused; one exactly max_future ahead is still a forced run's."""
    loaded = config.load()
    headers = {"X-CloudScheduler-JobName": "nightly"}

    def key_at(moment):
        stamp = moment.isoformat().replace("+00:00", "Z")
        return read_run_key(headers | {"X-CloudScheduler-ScheduleTime": stamp}, loaded, NOW)

    second = dt.timedelta(seconds=1)
    assert key_at(NOW - loaded.retention + second).schedule_time == NOW - loaded.retention + second
    with pytest.raises(InvalidDelivery, match="older than the retention window"):
        key_at(NOW - loaded.retention)
    assert key_at(NOW + loaded.max_future).schedule_time == NOW + loaded.max_future
    with pytest.raises(InvalidDelivery, match="in the future"):
        key_at(NOW + loaded.max_future + second)


def test_run_id_is_sha256_of_project_location_job_and_instant():
    key = RunKey("p-123456", "europe-west1", "nightly", NOW)
    material = b"p-123456\neurope-west1\nnightly\n2026-06-01T12:00:00+00:00"
    assert key.run_id == hashlib.sha256(material).hexdigest()
    assert len(key.run_id) == 64


def test_a_typed_override_changes_what_it_names_and_keeps_the_rest():
    """A test's or a local run's override goes through the model (dataclasses.replace, Config.everywhere)."""
    loaded = config.load()
    changed = dataclasses.replace(loaded, collection="elsewhere").everywhere(lease=dt.timedelta(seconds=7))
    assert changed.lease == dt.timedelta(seconds=7)
    assert {changed.lease_for(name) for name in [*changed.jobs, "unlisted"]} == {dt.timedelta(seconds=7)}
    assert changed.collection == "elsewhere"
    assert (changed.retention, changed.project, changed.attempt_deadline) == (
        loaded.retention,
        loaded.project,
        loaded.attempt_deadline,
    )


def with_defaults(**numbers) -> dict[str, object]:
    """The bake's config.yaml, as read, with these numbers in its defaults block."""
    raw = config.load().source
    return {**raw, "defaults": {**raw["defaults"], **numbers}}


@pytest.mark.parametrize(
    ("value", "rule"),
    [("abc", "a whole number"), (-5, "a whole number"), (0, "at least 1"), (1.5, "a whole"), (" 360", "a whole")],
)
def test_bad_setting_is_refused_naming_variable_and_value(value, rule):
    with pytest.raises(Misconfigured, match=rf"^config\.yaml: defaults\.lease_seconds={value!r}: must be {rule}"):
        config.from_raw(with_defaults(lease_seconds=value))


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [("project", "Bad_Project", "a GCP project id is"), ("region", "moon", "must be a GCP region")],
)
def test_bad_default_project_or_location_is_a_misconfiguration_not_a_bad_delivery(name, value, rule):
    with pytest.raises(Misconfigured, match=rf"='{value}': {rule}"):
        config.from_raw({**config.load().source, name: value})


def test_importing_main_opens_no_network_connection():
    probe = textwrap.dedent(
        """
        import socket
        def refuse(*args, **kwargs):
            raise AssertionError("network at import")
        socket.socket.connect = refuse
        socket.create_connection = refuse
        import main
        assert main.handle_scheduled_job
        """
    )
    root = Path(__file__).resolve().parent.parent
    result = subprocess.run([sys.executable, "-c", probe], cwd=root, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_each_job_is_keyed_by_its_scheduler_job_name_with_its_numbers_resolved_at_load():
    loaded = config.load()
    raw = loaded.source
    assert (loaded.project, loaded.location, loaded.collection) == (raw["project"], raw["region"], raw["collection"])
    assert set(loaded.jobs) == {loaded.scheduler_job_name(job_id) for job_id in raw["jobs"]}
    for name, job in loaded.jobs.items():
        assert name == loaded.scheduler_job_name(job.job_id)
        # Each job's own lease (its deadline + 60 unless it says), for its claims.
        assert loaded.lease_for(name) == job.lease == dt.timedelta(seconds=job.timing["lease_seconds"])
        assert job.attempt_deadline == dt.timedelta(seconds=job.timing["attempt_deadline_seconds"])
        assert job.retry_window == dt.timedelta(seconds=rules.job_retry_window_seconds(job.timing))


def test_a_process_runs_by_the_file_config_yaml_names(tmp_path):
    """A test's server, a task or `make dev` runs by another config.yaml (CONFIG_YAML, config.FILE_VARIABLE): the
    same model and rules as the deployed file's, no environment strings."""
    raw = config.load().source
    (tmp_path / "other.yaml").write_text(yaml.safe_dump({**raw, "collection": "elsewhere"}), encoding="utf-8")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump({**raw, "collection": "a/b"}), encoding="utf-8")
    code = "import config; print(config.current().collection)"
    root = Path(config.__file__).resolve().parent

    def collection(path: Path) -> subprocess.CompletedProcess:
        env = {**os.environ, config.FILE_VARIABLE: str(path)}
        return subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True)

    assert collection(tmp_path / "other.yaml").stdout.strip() == "elsewhere"
    refused = collection(tmp_path / "bad.yaml")
    assert refused.returncode != 0 and "bad.yaml: firestore_collection='a/b'" in refused.stderr, refused.stderr


def test_the_configuration_is_read_once_per_process_not_per_delivery(monkeypatch):
    """Issue 19 item 11: a delivery neither re-reads the job table nor builds a cron parser per job."""
    reads, parsers = [], []
    real_parse, real_cronsim = config.parse, CronSim
    monkeypatch.setattr(config, "parse", lambda *args, **kw: reads.append(1) or real_parse(*args, **kw))
    monkeypatch.setattr("schedules.CronSim", lambda *args: parsers.append(1) or real_cronsim(*args))
    monkeypatch.setattr(config, "USED", None)  # the file's, as deployed
    config._load.cache_clear()
    try:
        for _ in range(5):
            config.current()
    finally:
        config._load.cache_clear()
    assert len(reads) == 1
    assert parsers == []  # the function's load checks crons with rules.py, and expands none


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("jobs: [", r"^config\.yaml: is not YAML"),
        ("[1]", r"^config\.yaml: config\.yaml=\[1\]: must be a mapping"),
        ("slug: x", r"^config\.yaml: config\.yaml=\['slug'\]: unknown key\(s\) \[\] or missing key\(s\)"),
    ],
)
def test_a_broken_config_file_is_misconfigured_naming_it(monkeypatch, tmp_path, content, message):
    (tmp_path / "config.yaml").write_text(content)
    monkeypatch.setattr(config, "CONFIG_FILE", tmp_path / "config.yaml")
    monkeypatch.setattr(config, "USED", None)
    with pytest.raises(Misconfigured, match=message):
        config.current()


def test_the_work_is_stopped_at_its_jobs_attempt_deadline_less_the_release_margin():
    """Config.stop_after is the one place that says when (stop.py): a job's own deadline, else the defaults'
    (config.yaml: the audit job's and any job it does not list); Config.everywhere's (a test's) holds for every job."""
    jobs = {
        "quick": {"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "attempt_deadline_seconds": 60},
        "plain": {"schedule": "0 4 * * *", "time_zone": "Etc/UTC"},
    }
    loaded = config.load().with_jobs(jobs)
    defaults = dt.timedelta(seconds=loaded.source["defaults"]["attempt_deadline_seconds"])

    assert dt.timedelta(seconds=10) == RELEASE_MARGIN
    assert defaults > dt.timedelta(seconds=60)
    assert loaded.stop_after("quick") == dt.timedelta(seconds=50)
    assert loaded.stop_after("plain") == loaded.stop_after(loaded.audit_job) == defaults - RELEASE_MARGIN
    assert loaded.stop_after("unlisted") == defaults - RELEASE_MARGIN
    overridden = loaded.everywhere(attempt_deadline=dt.timedelta(seconds=30))
    assert {overridden.stop_after(name) for name in ("quick", "plain", "unlisted")} == {dt.timedelta(seconds=20)}


def test_the_baked_lease_outlasts_every_jobs_stop_and_release():
    """A lease that ended while the work still ran, or before its release was written, would let a retry take
    the run over and run the work twice; the baked settings (as Terraform deploys them) keep it longer."""
    loaded = config.load()
    for name in [*loaded.jobs, loaded.audit_job]:
        assert loaded.lease_for(name) >= loaded.stop_after(name) + RELEASE_MARGIN, name


@pytest.mark.parametrize("value", [10, 0, "abc", 1.5, -20])
def test_an_attempt_deadline_within_the_release_margin_is_refused_naming_it(value):
    """The least deadline config.yaml takes (rules.ATTEMPT_DEADLINE_RANGE) is above the release margin: a work
    stopped before it could start is refused at load."""
    assert rules.ATTEMPT_DEADLINE_RANGE[0] > RELEASE_MARGIN.total_seconds()
    with pytest.raises(Misconfigured, match=rf"defaults\.attempt_deadline_seconds={value!r}: must be"):
        config.from_raw(with_defaults(attempt_deadline_seconds=value))


@pytest.mark.parametrize("value", [10, 5, True, 12.5])
def test_a_jobs_attempt_deadline_within_the_release_margin_is_refused_naming_the_job(value):
    job = {"schedule": "0 3 * * *", "time_zone": "Etc/UTC", "attempt_deadline_seconds": value}
    with pytest.raises(Misconfigured, match=rf"jobs\.j\.attempt_deadline_seconds={value!r}: must be"):
        config.load().with_jobs({"j": job})


def test_a_job_with_its_own_deadline_gets_its_own_lease_and_settle(monkeypatch, tmp_path):
    """Per-job timing (config.yaml): a job that sets its own deadline claims with its own lease, and the audit waits
    its own lease and retry window; a job that sets none takes the defaults'."""
    raw = yaml.safe_load(config.CONFIG_FILE.read_text(encoding="utf-8"))
    long_job = {"schedule": "0 2 * * *", "attempt_deadline_seconds": 600}
    raw["jobs"] = {"long": long_job, "short": {"schedule": "0 3 * * *"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    settings = config.load(tmp_path / "config.yaml")
    long, short = (config.load(tmp_path / "config.yaml").scheduler_job_name(job) for job in ("long", "short"))
    assert settings.lease_for(long) == dt.timedelta(seconds=660)
    default_lease = dt.timedelta(
        seconds=raw["defaults"].get("lease_seconds", raw["defaults"]["attempt_deadline_seconds"] + 60)
    )
    assert settings.lease_for(short) == settings.lease == default_lease
    window = rules.retry_window_seconds(600, raw["defaults"]["retry_count"], raw["defaults"]["max_backoff_seconds"], 0)
    assert settings.settle_for(long) == dt.timedelta(seconds=660 + window)
    assert settings.jobs[long].attempt_deadline == dt.timedelta(seconds=600)
