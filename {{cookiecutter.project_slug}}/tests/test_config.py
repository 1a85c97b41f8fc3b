"""config.yaml passes the rules and holds each schedule alone; a bad edit is refused in one line naming the field."""

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import yaml
from scheduled_dedup_tools import schedule_rules

import config
import rules

ROOT = Path(__file__).resolve().parent.parent
TEXT = config.CONFIG_FILE.read_text(encoding="utf-8")
CONFIG = config.load(schedules=True)
JOB_NAME, JOB = sorted(CONFIG.jobs.items())[0]  # by its Scheduler job name
JOB_ID = JOB.job_id
# What one fault can keep a run of the first job busy: a schedule must fire further apart.
BUSY = max(busy.seconds for busy in schedule_rules.busy_after_one_fault(JOB.timing) if busy.seconds is not None)


def edited(**changes) -> str:
    """config.yaml with the first job's keys changed; a key set to None is removed from every job and the defaults."""
    raw = yaml.safe_load(TEXT)
    for key, value in changes.items():
        if value is None:
            for holder in (raw["defaults"], *raw["jobs"].values()):
                holder.pop(key, None)
        else:
            raw["jobs"][JOB_ID][key] = value
    return yaml.safe_dump(raw)


def test_the_check_command_passes_on_config_yaml():
    """What `make deploy` runs before Terraform: the capacity against the busiest minute, one line per job."""
    result = subprocess.run([sys.executable, "config.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    capacity, *jobs = result.stdout.splitlines()
    assert capacity.startswith("capacity: ") and f"has {CONFIG.herd.runs} in flight" in capacity
    assert len(jobs) == len(CONFIG.jobs)
    for warning in CONFIG.warnings:  # daylight saving dates: not refusals, shown in pytest's summary
        warnings.warn(warning, UserWarning, stacklevel=1)


def test_each_schedule_string_lives_in_config_yaml_alone():
    """No copy to drift: outside docs/ and tests/, no file spells a job's schedule (rules.py's messages quote one)."""
    schedules = {job.schedule for job in CONFIG.jobs.values()}
    skipped = {"docs", "tests", ".venv", ".git", ".terraform", "__pycache__", ".ruff_cache", ".pytest_cache",
               ".hypothesis"}  # fmt: skip
    holders = {}
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if not path.is_file() or skipped & set(relative.parts) or path.suffix in (".md", ".pyc"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for schedule in schedules:
            if str(relative) != "rules.py" and re.search(rf"(?<![\w*/,-]){re.escape(schedule)}(?![\w*/,-])", text):
                holders.setdefault(schedule, []).append(str(relative))
    assert holders == {schedule: ["config.yaml"] for schedule in schedules}


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("jobs: [", r"is not YAML"),
        ("- a list", r"config\.yaml=\['a list'\]: must be a mapping"),
        (TEXT.replace("jobs:", "jobz:"), r"config\.yaml=.*unknown key\(s\) \['jobz'\]"),
        # An hour of 24 has the shape Terraform's validation checks; the grammar here refuses it.
        (edited(schedule="0 24 * * *"), rf"jobs\.{JOB_ID}\.schedule='0 24 \* \* \*'.*hour"),
        # Terraform takes the Scheduler numbers as written: one left out is refused with one that passes.
        (edited(min_backoff_seconds=None), r"defaults\.min_backoff_seconds=None: .*e\.g\. \d+"),
        (
            edited(schedule="* * * * *"),
            rf"jobs\.{JOB_ID}\.schedule='\* \* \* \* \*': fires only 60 s apart.* at least {BUSY + 1} s apart",
        ),
    ],
    ids=["not-yaml", "a-list", "unknown-key", "hour-24", "scheduler-number-left-out", "busier-schedule"],
)
def test_a_bad_edit_is_refused_in_one_line_naming_the_field(text, error):
    with pytest.raises(config.ConfigError, match=rf"^config\.yaml: {error}") as refusal:
        config.parse(text, schedules=True)
    assert "\n" not in str(refusal.value)


def test_the_functions_own_load_does_not_expand_crons():
    """A busier schedule is refused by `python config.py` and the tests, never at the function's cold start."""
    assert config.parse(edited(schedule="* * * * *")).jobs[JOB_NAME].schedule == "* * * * *"


def test_a_job_with_its_own_deadline_gets_its_own_lease():
    parsed = config.parse(edited(attempt_deadline_seconds=120, lease_seconds=None))
    lease = 120 + rules.LEASE_AFTER_DEADLINE_SECONDS
    assert parsed.jobs[JOB_NAME].timing["lease_seconds"] == parsed.jobs[JOB_NAME].lease.total_seconds() == lease


def test_the_check_command_warns_of_each_daylight_saving_date_of_a_job(tmp_path, capsys):
    """A job at 02:30 in Europe/Berlin: one WARNING line names each daylight saving date and its rule; it passes."""
    path = tmp_path / "config.yaml"
    path.write_text(edited(schedule="30 2 * * *", time_zone="Europe/Berlin", dst_gap="skip"), encoding="utf-8")
    assert config.main([str(path)]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if f"jobs.{JOB_ID}.schedule=" in line]
    assert line.startswith(f"WARNING: jobs.{JOB_ID}.schedule='30 2 * * *' in Europe/Berlin: daylight saving")
    # One of each a year; the window ends on a month's first day, so a date in that month may fall outside it.
    assert min(line.count("(skipped 02:30)"), line.count("(repeated 02:30)")) >= schedule_rules.DST_WARNING_YEARS - 1
    assert "a skipped one not at all (dst_gap=skip)" in line


def test_a_capacity_below_the_busiest_minute_is_refused_in_one_line_naming_it():
    """A twin of the first job against one instance: refused, with a max_instance_count that passes."""
    raw = yaml.safe_load(TEXT)
    raw["jobs"]["twin"] = dict(raw["jobs"][JOB_ID])
    herd = config.parse(yaml.safe_dump({**raw, "function": {"max_instance_count": 100000}}), schedules=True).herd
    assert herd.runs >= 2
    refused = yaml.safe_dump({**raw, "function": {"max_instance_count": 1}})
    with pytest.raises(config.ConfigError) as refusal:
        config.parse(refused, schedules=True)
    message = str(refusal.value)
    assert "\n" not in message
    assert message.startswith(f"config.yaml: function.max_instance_count=1: the busiest minute, {herd.where()}, ")
    assert f"has {herd.runs} runs in flight at once" in message and "the function serves 1 (1 instances" in message
    (passing,) = re.findall(r"a value that passes: function\.max_instance_count (\d+)$", message)
    assert config.parse(yaml.safe_dump({**raw, "function": {"max_instance_count": int(passing)}}), schedules=True)
