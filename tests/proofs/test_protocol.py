"""The protocol's pure parts: the state machine, schedule-time parsing, settings, import hygiene."""

import datetime as dt
import hashlib
import json
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
from keys import RunKey, parse_schedule_time, read_run_key
from outcomes import InvalidDelivery, Misconfigured
from settings import RELEASE_MARGIN, DedupConfig, baked_settings, parse_jobs

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
    config = DedupConfig.from_env({})
    headers = {"X-CloudScheduler-JobName": "nightly"}

    def key_at(moment):
        stamp = moment.isoformat().replace("+00:00", "Z")
        return read_run_key(headers | {"X-CloudScheduler-ScheduleTime": stamp}, config, NOW)

    second = dt.timedelta(seconds=1)
    assert key_at(NOW - config.retention + second).schedule_time == NOW - config.retention + second
    with pytest.raises(InvalidDelivery, match="older than the retention window"):
        key_at(NOW - config.retention)
    assert key_at(NOW + config.max_future).schedule_time == NOW + config.max_future
    with pytest.raises(InvalidDelivery, match="in the future"):
        key_at(NOW + config.max_future + second)


def test_run_id_is_sha256_of_project_location_job_and_instant():
    key = RunKey("p-123456", "europe-west1", "nightly", NOW)
    material = b"p-123456\neurope-west1\nnightly\n2026-06-01T12:00:00+00:00"
    assert key.run_id == hashlib.sha256(material).hexdigest()
    assert len(key.run_id) == 64


def test_settings_come_from_the_environment_with_baked_defaults():
    config = DedupConfig.from_env({"DEDUP_LEASE_SECONDS": "7", "DEDUP_COLLECTION": "elsewhere"})
    assert config.lease == dt.timedelta(seconds=7)
    assert config.collection == "elsewhere"
    assert config.retention == dt.timedelta(seconds=int(baked_settings()["DEDUP_RETENTION_SECONDS"]))
    assert config.project == baked_settings()["DEDUP_PROJECT"]


@pytest.mark.parametrize("value", ["abc", "-5", "0", "1.5", " 360", "²"])
def test_bad_setting_is_refused_naming_variable_and_value(value):
    with pytest.raises(ValueError, match=rf"DEDUP_LEASE_SECONDS='{value}': must be a positive whole number"):
        DedupConfig.from_env({"DEDUP_LEASE_SECONDS": value})


@pytest.mark.parametrize(
    ("name", "value", "rule"),
    [("DEDUP_PROJECT", "Bad_Project", "must be a GCP project id"), ("DEDUP_LOCATION", "moon", "must be a GCP region")],
)
def test_bad_default_project_or_location_is_a_misconfiguration_not_a_bad_delivery(name, value, rule):
    with pytest.raises(Misconfigured, match=rf"{name}='{value}': {rule}"):
        DedupConfig.from_env({name: value})


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


def test_unset_settings_come_from_config_yaml_and_the_environment_overrides_them():
    loaded = config.load()
    settings = DedupConfig.from_env({})
    assert (settings.project, settings.location, settings.collection) == (
        loaded.project,
        loaded.region,
        loaded.collection,
    )
    assert set(settings.jobs) == {loaded.scheduler_job_name(job_id) for job_id in loaded.jobs}
    for job_id, job in loaded.jobs.items():
        name = loaded.scheduler_job_name(job_id)
        # Each job's own lease (its deadline + 60 unless it says), for its claims.
        assert settings.lease_for(name) == dt.timedelta(seconds=job.timing["lease_seconds"])
        assert settings.jobs[name].attempt_deadline == dt.timedelta(seconds=job.timing["attempt_deadline_seconds"])
    assert DedupConfig.from_env({"DEDUP_COLLECTION": "elsewhere"}).collection == "elsewhere"
    overridden = DedupConfig.from_env({"DEDUP_LEASE_SECONDS": "7"})
    assert {overridden.lease_for(name) for name in overridden.jobs} == {dt.timedelta(seconds=7)}


def test_the_configuration_is_read_once_per_process_not_per_delivery(monkeypatch):
    """Issue 19 item 11: a delivery neither re-reads the job table nor builds a cron parser per job."""
    reads, parsers = [], []
    real_parse, real_cronsim = config.parse, CronSim
    monkeypatch.setattr(config, "parse", lambda *args, **kw: reads.append(1) or real_parse(*args, **kw))
    monkeypatch.setattr("settings.CronSim", lambda *args: parsers.append(1) or real_cronsim(*args))
    caches = (config._load, baked_settings, parse_jobs)
    for cache in caches:
        cache.cache_clear()
    try:
        for _ in range(5):
            settings = DedupConfig.from_env({})
    finally:
        for cache in caches:
            cache.cache_clear()
    assert len(reads) == 1
    assert len(parsers) == len(settings.jobs)


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
    baked_settings.cache_clear()
    try:
        with pytest.raises(Misconfigured, match=message):
            DedupConfig.from_env({})
    finally:
        baked_settings.cache_clear()


def test_the_work_is_stopped_at_its_jobs_attempt_deadline_less_the_release_margin():
    """DedupConfig.stop_after is the one place that says when (stop.py): a job's own deadline, else the
    defaults' (config.yaml: the audit job's and any job DEDUP_JOBS does not list); an environment's
    DEDUP_ATTEMPT_DEADLINE_SECONDS (a test's) holds for every job."""
    jobs = {
        "quick": {"job_id": "quick", "schedule": "0 3 * * *", "time_zone": "Etc/UTC", "attempt_deadline_seconds": 60},
        "plain": {"job_id": "plain", "schedule": "0 4 * * *", "time_zone": "Etc/UTC"},
    }
    config = DedupConfig.from_env({"DEDUP_JOBS": json.dumps(jobs)})
    defaults = dt.timedelta(seconds=int(baked_settings()["DEDUP_ATTEMPT_DEADLINE_SECONDS"]))

    assert dt.timedelta(seconds=10) == RELEASE_MARGIN
    assert defaults > dt.timedelta(seconds=60)
    assert config.stop_after("quick") == dt.timedelta(seconds=50)
    assert config.stop_after("plain") == config.stop_after(config.audit_job) == defaults - RELEASE_MARGIN
    assert config.stop_after("unlisted") == defaults - RELEASE_MARGIN
    overridden = DedupConfig.from_env({"DEDUP_JOBS": json.dumps(jobs), "DEDUP_ATTEMPT_DEADLINE_SECONDS": "30"})
    assert {overridden.stop_after(name) for name in ("quick", "plain", "unlisted")} == {dt.timedelta(seconds=20)}


def test_the_baked_lease_outlasts_every_jobs_stop_and_release():
    """A lease that ended while the work still ran, or before its release was written, would let a retry take
    the run over and run the work twice; the baked settings (as Terraform deploys them) keep it longer."""
    config = DedupConfig.from_env({})
    for name in [*config.jobs, config.audit_job]:
        assert config.lease_for(name) >= config.stop_after(name) + RELEASE_MARGIN, name


@pytest.mark.parametrize("value", ["10", "0", "abc", "1.5", "-20"])
def test_an_attempt_deadline_within_the_release_margin_is_refused_naming_it(value):
    rule = r"must be a whole number of seconds above the release margin \(10 s\)"
    with pytest.raises(Misconfigured, match=rf"DEDUP_ATTEMPT_DEADLINE_SECONDS='{value}': {rule}"):
        DedupConfig.from_env({"DEDUP_ATTEMPT_DEADLINE_SECONDS": value})


@pytest.mark.parametrize("value", [10, 5, "60", True, 12.5])
def test_a_jobs_attempt_deadline_within_the_release_margin_is_refused_naming_the_job(value):
    job = {"job_id": "j", "schedule": "0 3 * * *", "time_zone": "Etc/UTC", "attempt_deadline_seconds": value}
    with pytest.raises(Misconfigured, match=rf"DEDUP_JOBS.j.attempt_deadline_seconds={value!r}: must be"):
        parse_jobs(json.dumps({"j": job}))


def test_a_job_with_its_own_deadline_gets_its_own_lease_and_settle(monkeypatch, tmp_path):
    """Per-job timing (config.yaml): a job that sets its own deadline claims with its own lease, and the audit waits
    its own lease and retry window; a job that sets none takes the defaults'."""
    raw = yaml.safe_load(config.CONFIG_FILE.read_text(encoding="utf-8"))
    long_job = {"schedule": "0 2 * * *", "attempt_deadline_seconds": 600}
    raw["jobs"] = {"long": long_job, "short": {"schedule": "0 3 * * *"}}
    (tmp_path / "config.yaml").write_text(yaml.safe_dump(raw))
    monkeypatch.setattr(config, "CONFIG_FILE", tmp_path / "config.yaml")
    baked_settings.cache_clear()
    try:
        settings = DedupConfig.from_env({})
    finally:
        baked_settings.cache_clear()
    long, short = (config.load(tmp_path / "config.yaml").scheduler_job_name(job) for job in ("long", "short"))
    assert settings.lease_for(long) == dt.timedelta(seconds=660)
    default_lease = dt.timedelta(
        seconds=raw["defaults"].get("lease_seconds", raw["defaults"]["attempt_deadline_seconds"] + 60)
    )
    assert settings.lease_for(short) == settings.lease == default_lease
    window = rules.retry_window_seconds(600, raw["defaults"]["retry_count"], raw["defaults"]["max_backoff_seconds"], 0)
    assert settings.settle_for(long) == dt.timedelta(seconds=660 + window)
    assert settings.jobs[long].attempt_deadline == dt.timedelta(seconds=600)
