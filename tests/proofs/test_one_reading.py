"""Issue 24 item 6: every number of config.yaml has one reading. The function reads the file with PyYAML (YAML 1.1),
Terraform with yamldecode (YAML 1.2): `attempt_deadline_seconds: 0600` was 384 s to the function and 600 s to
Scheduler, so the work was stopped long before Scheduler gave up. Terraform 1.15's yamldecode, asked on
2026-12-02, reads 0600 as 600, 1_000 / 5:00 / 0b101 / -0x1A as text, 1e3 and 0o17 as numbers, y and n as booleans
(keys too), a date as an RFC 3339 string; PyYAML reads 384, 1000, 300, 5, -26, text, text, text, a date.
And a number beyond what the handler computes with (`retention_seconds: 100000000000000` overflows datetime)
passed `python config.py`, then every delivery, the audit's too, got a bare 500 with no outcome line.
"""

import dataclasses
import datetime as dt
import re
import subprocess
import sys

import pytest
from conftest import configured, scheduler_headers

import config
import rules

BAKED = config.CONFIG_FILE.read_text(encoding="utf-8")


def written(tmp_path, text: str):
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return path


def config_with(tmp_path, key: str, value: str, text: str = BAKED):
    """The bake's config.yaml with the first `key:` line's value written as `value` (as a user types it)."""
    changed, count = re.subn(rf"(?m)^(\s*{key}:) .*$", lambda match: f"{match[1]} {value}", text, count=1)
    assert count == 1, key
    return written(tmp_path, changed)


def with_job_line(line: str, text: str = BAKED) -> str:
    """The bake's config.yaml with `line` added to its first job."""
    job_id = next(iter(config.load().jobs.values())).job_id
    return text.replace(f"\n  {job_id}:\n", f"\n  {job_id}:\n    {line}\n", 1)


def check(path, capsys) -> tuple[int, str]:
    """`python config.py FILE`, in process: its exit code and what it printed on stderr."""
    config._load.cache_clear()
    try:
        code = config.main([str(path)])
    finally:
        config._load.cache_clear()
    return code, capsys.readouterr().err


def test_python_config_py_refuses_a_leading_zero_that_terraform_reads_as_decimal(tmp_path):
    """The issue's case, as a user meets it: one line naming the key, the value and the rule; exit 1."""
    path = config_with(tmp_path, "attempt_deadline_seconds", "0600")
    result = subprocess.run(
        [sys.executable, "config.py", str(path)], cwd=config.CONFIG_FILE.parent, capture_output=True, text=True
    )
    assert result.returncode == 1, result.stdout
    (line,) = result.stderr.splitlines()
    assert "defaults.attempt_deadline_seconds='0600'" in line and "leading zero" in line, line


@pytest.mark.parametrize(
    ("value", "rule"),
    [
        ("0600", "leading zero"),
        ("-0600", "leading zero"),
        ("1_000", "'_'"),
        ("1_000.5", "'_'"),
        ("5:00", "sexagesimal"),
        ("1:20:30", "sexagesimal"),
        ("0b101", "0b"),
        ("-0x1A", "signed 0x"),
        ("1e3", "numbers to YAML 1.2"),
        ("0o17", "numbers to YAML 1.2"),
        ("yes", "true or false"),
        ("No", "true or false"),
        ("on", "true or false"),
        ("OFF", "true or false"),
        ("y", "true or false"),
        ("n", "true or false"),
        ("2026-01-01", "date"),
        (".inf", "not a number"),
        (".NaN", "not a number"),
    ],
)
def test_a_scalar_the_two_readers_read_differently_is_refused_naming_key_value_rule(tmp_path, capsys, value, rule):
    code, err = check(config_with(tmp_path, "attempt_deadline_seconds", value), capsys)
    assert code == 1
    (line,) = err.splitlines()
    assert f"defaults.attempt_deadline_seconds={value!r}: " in line and rule in line, line


@pytest.mark.parametrize("value", ["yes", "on", "y"])
def test_a_jobs_switch_and_a_job_id_are_read_once_too(tmp_path, capsys, value):
    """paused: yes is true to both readers, y only to Terraform's; a job id `n` is `false` to Terraform."""
    job_id = next(iter(config.load().jobs.values())).job_id
    code, err = check(written(tmp_path, with_job_line(f"paused: {value}")), capsys)
    assert code == 1 and f"jobs.{job_id}.paused={value!r}: " in err, err
    code, err = check(written(tmp_path, BAKED.replace(f"\n  {job_id}:\n", "\n  n:\n", 1)), capsys)
    assert code == 1 and "jobs='n': " in err, err


@pytest.mark.parametrize("value", ["600", "'0600'", '"600"', "0x258"])
def test_a_number_both_readers_read_alike_passes(tmp_path, capsys, value):
    """The other side: a plain decimal, a quoted text (Terraform converts "0600" to 600 as int() does), and an
    unsigned hex number (600 to both)."""
    path = config_with(tmp_path, "attempt_deadline_seconds", value)
    code, err = check(path, capsys)
    assert code == 0, err
    assert config.parse(path.read_text()).defaults["attempt_deadline_seconds"] == 600


@pytest.mark.parametrize("key", ["retention_seconds", "max_lateness_seconds"])
def test_a_number_beyond_what_the_handler_computes_with_is_refused(tmp_path, capsys, key):
    """MAX_SECONDS (1000 years) bounds every key without a bound of its own: at it passes, beyond it is refused."""
    text = with_job_line("max_lateness_seconds: 3600") if key == "max_lateness_seconds" else BAKED
    code, err = check(config_with(tmp_path, key, str(rules.MAX_SECONDS), text), capsys)
    assert code == 0, err
    code, err = check(config_with(tmp_path, key, str(rules.MAX_SECONDS + 1), text), capsys)
    (line,) = err.splitlines()
    assert code == 1 and f"{key}={rules.MAX_SECONDS + 1}: must be at most {rules.MAX_SECONDS}" in line, line


def test_the_issues_retention_is_refused_by_python_config_py(tmp_path, capsys):
    code, err = check(config_with(tmp_path, "retention_seconds", "100000000000000"), capsys)
    assert code == 1 and "retention_seconds=100000000000000: must be at most" in err, err


@pytest.fixture
def config_file(monkeypatch, tmp_path):
    """Serve a config.yaml written by the test (the function reads config.CONFIG_FILE once per process), on the
    test's project and collection; one the rules refuse, as deployed (the handler reads it and refuses it)."""

    def serve(path):
        monkeypatch.setattr(config, "CONFIG_FILE", path)
        own = config.current()
        try:
            written = dataclasses.replace(config.load(path), project=own.project, collection=own.collection)
        except config.ConfigError:
            written = None
        monkeypatch.setattr(config, "USED", written)

    return serve


def outcome_lines(log_lines):
    return [line for line in log_lines() if "outcome" in line]


def test_a_retention_at_the_bound_keys_and_records_a_run(http, work, now, log_lines, config_file, tmp_path):
    """The bound is computable: the handler keys, records and answers a run under a retention of MAX_SECONDS."""
    config_file(config_with(tmp_path, "retention_seconds", str(rules.MAX_SECONDS)))
    response = http.post("/", headers=scheduler_headers("nightly", now.isoformat()))
    assert response.status_code == 200 and response.text.startswith("processed"), response.text
    assert [line["outcome"] for line in outcome_lines(log_lines)] == ["processed"]


def test_the_issues_retention_answers_misconfigured_with_one_outcome_line(
    http, work, now, log_lines, config_file, tmp_path
):
    """Today: OverflowError out of the handler, a bare 500, no line. Now config.yaml is refused at load: every
    delivery is `misconfigured` naming the key, and the work never runs."""
    config_file(config_with(tmp_path, "retention_seconds", "100000000000000"))
    response = http.post("/", headers=scheduler_headers("nightly", now.isoformat()))
    assert response.status_code == 500 and response.text.startswith("misconfigured"), response.text
    assert "retention_seconds=100000000000000: must be at most" in response.text
    assert [line["outcome"] for line in outcome_lines(log_lines)] == ["misconfigured"]
    assert work.calls == []


def test_an_exception_no_rule_foresaw_answers_internal_error_with_one_outcome_line(
    http, work, now, log_lines, monkeypatch
):
    """The last resort: a retention that overflows datetime (a test's or a local run's typed override, not checked
    by rules.py) raised out of the handler as a bare 500. Now: 500 `internal_error`, one ERROR line with the
    traceback; the work never ran."""
    configured(monkeypatch, lambda loaded: dataclasses.replace(loaded, retention=dt.timedelta.max))
    response = http.post("/", headers=scheduler_headers("nightly", now.isoformat()))
    assert response.status_code == 500 and response.text.startswith("internal_error"), response.text
    (line,) = outcome_lines(log_lines)
    assert line["outcome"] == "internal_error" and line["http_status"] == 500 and line["severity"] == "ERROR"
    assert "OverflowError" in line["message"] and "Traceback" in line["message"]
    assert work.calls == []


def test_a_base_exception_is_not_the_last_resorts(http, work, now, monkeypatch, handler_module):
    """Only Exception: a KeyboardInterrupt or SystemExit of the server goes on (the process is ending)."""

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(handler_module, "read_run_key", interrupted)
    with pytest.raises(KeyboardInterrupt):
        handler_module.handle_delivery(scheduler_headers("nightly", now.isoformat()))
