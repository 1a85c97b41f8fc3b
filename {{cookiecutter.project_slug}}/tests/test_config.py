"""config.yaml, the one file of the jobs and their timing: it passes rules.py (the rules Terraform cannot check:
a cron's smallest gap against what one fault keeps a run busy, per job), its jobs are job.py's, and each schedule
lives in it alone. cronsim expands each job's cron independently of rules.py; the daylight saving dates rules.py
warns of are the ones schedules.py (the function's expansion) finds."""

import datetime as dt
import re
import subprocess
import sys
import warnings
import zoneinfo
from pathlib import Path

import cronsim
import pytest
import yaml

import config
import rules
import schedules

ROOT = Path(__file__).resolve().parent.parent
TEXT = config.CONFIG_FILE.read_text(encoding="utf-8")
CONFIG = config.load(schedules=True)


def busy_bound(timing) -> int:
    return max(outcome.seconds for outcome in rules.busy_after_one_fault(timing) if outcome.seconds is not None)


def cronsim_gap(schedule: str, time_zone: str, start: dt.datetime) -> int | None:
    """The smallest gap between consecutive fire times over a year (nine for a job that fires rarer)."""
    zone = zoneinfo.ZoneInfo(time_zone)
    a_year, nine_years = start + dt.timedelta(days=366), start + dt.timedelta(days=9 * 366)
    previous, smallest = None, None
    for moment in cronsim.CronSim(schedule, start.astimezone(zone)):
        if moment >= nine_years or (moment >= a_year and smallest is not None):
            break
        if previous is not None:
            # In UTC: aware datetimes of one tzinfo subtract as wall times, so the two 01:00s of a
            # fall-back night would be 0 s apart (Python datetime docs, "aware subtraction").
            step = int((moment.astimezone(dt.UTC) - previous.astimezone(dt.UTC)).total_seconds())
            smallest = step if smallest is None else min(smallest, step)
        previous = moment
    return smallest


def edited(old: str, new: str) -> str:
    assert old in TEXT, f"config.yaml has no {old!r}: was its layout changed?"
    return TEXT.replace(old, new, 1)


def test_the_check_command_passes_on_config_yaml():
    """What `make deploy` runs before Terraform."""
    result = subprocess.run([sys.executable, "config.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.splitlines()) == len(CONFIG.jobs)


@pytest.mark.parametrize("job_id", sorted(CONFIG.jobs))
def test_each_jobs_cronsim_gap_exceeds_what_one_fault_keeps_a_run_busy(job_id):
    job = CONFIG.jobs[job_id]
    start = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    gap = cronsim_gap(job.schedule, job.time_zone, start)
    if gap is None:  # fires at most once in nine years: no next run to lose or overlap
        return
    # The job's own numbers: its work is stopped at its own deadline.
    assert gap > busy_bound(job.timing) >= job.timing["attempt_deadline_seconds"], (job.schedule, job.time_zone, gap)
    # The rules count DST's repeated and skipped times at their worst, so never see a larger gap than cronsim.
    assert rules.smallest_gap(job.schedule, job.time_zone, start.date()).seconds <= gap


{%- if cookiecutter.target == "function" %}


def test_the_jobs_of_config_yaml_are_the_jobs_of_job_work():
    """Adding or removing a job is config.yaml and job.py's WORK: a job without work would answer
    `misconfigured` on every delivery once deployed, a work without a job never runs."""
    import job

    assert set(CONFIG.jobs) == set(job.WORK), "config.yaml's jobs and job.py's WORK must name the same job ids"
{%- endif %}


def test_each_schedule_string_lives_in_config_yaml_alone():
    """No copy to drift: outside docs/ and tests/, no file of the project spells a job's schedule. (rules.py and
    the modules hold no job: their messages quote an example schedule, which a job may share.)"""
    schedules = {job.schedule for job in CONFIG.jobs.values()}
    skipped = {"docs", "tests", ".venv", ".git", ".terraform", "__pycache__", ".ruff_cache", ".pytest_cache",
               ".hypothesis"}  # fmt: skip
    holders = {}
    for path in ROOT.rglob("*"):
        relative = path.relative_to(ROOT)
        if not path.is_file() or skipped & set(relative.parts) or path.suffix in (".md", ".pyc"):
            continue
        if str(relative) == "rules.py":
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        for schedule in schedules:
            if re.search(rf"(?<![\w*/,-]){re.escape(schedule)}(?![\w*/,-])", text):
                holders.setdefault(schedule, []).append(str(path.relative_to(ROOT)))
    assert holders == {schedule: ["config.yaml"] for schedule in schedules}


def test_an_edit_to_a_schedule_of_the_right_shape_but_out_of_range_is_refused():
    """An hour of 24 has the shape Terraform's validation checks; the grammar here refuses it."""
    job_id, job = sorted(CONFIG.jobs.items())[0]
    text = edited(f"schedule: {job.schedule!r}".replace("'", '"'), 'schedule: "0 24 * * *"')
    with pytest.raises(config.ConfigError, match=rf"^config\.yaml: jobs\.{job_id}\.schedule='0 24 \* \* \*'.*hour"):
        config.parse(text)


def test_an_edit_to_a_busier_schedule_is_refused_naming_the_job_and_a_value_that_passes():
    job_id, job = sorted(CONFIG.jobs.items())[0]
    text = edited(f"schedule: {job.schedule!r}".replace("'", '"'), 'schedule: "* * * * *"')
    config.parse(text)  # shape and timing pass: the function's own load does not expand crons
    with pytest.raises(config.ConfigError) as refusal:
        config.parse(text, schedules=True)
    message = str(refusal.value)
    assert re.match(rf"^config\.yaml: jobs\.{job_id}\.schedule='\* \* \* \* \*': fires only 60 s apart", message)
    needed = int(re.search(r"at least (\d+) s apart", message)[1])
    assert needed == busy_bound(job.timing) + 1
    assert cronsim_gap("* * * * *", "Etc/UTC", dt.datetime(2026, 1, 1, tzinfo=dt.UTC)) == 60 < needed


def test_a_job_left_without_a_scheduler_number_is_refused_with_one_that_passes():
    """Terraform takes the Scheduler numbers as written (no formula in HCL): one in neither the job nor defaults
    is refused, with the value rules.derive_timing gives."""
    raw = yaml.safe_load(TEXT)
    del raw["defaults"]["min_backoff_seconds"]
    for job in raw["jobs"].values():
        job.pop("min_backoff_seconds", None)
    with pytest.raises(config.ConfigError, match=r"^config\.yaml: defaults\.min_backoff_seconds=None: .*e\.g\. \d+"):
        config.parse(yaml.safe_dump(raw))


def test_a_job_with_its_own_deadline_gets_its_own_lease():
    raw = yaml.safe_load(TEXT)
    job_id = sorted(raw["jobs"])[0]
    raw["jobs"][job_id]["attempt_deadline_seconds"] = 120
    raw["jobs"][job_id].pop("lease_seconds", None)
    raw["defaults"].pop("lease_seconds", None)
    parsed = config.parse(yaml.safe_dump(raw))
    assert parsed.jobs[job_id].timing["lease_seconds"] == 120 + rules.LEASE_AFTER_DEADLINE_SECONDS


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("jobs: [", r"^config\.yaml: is not YAML"),
        ("- a list", r"^config\.yaml: config\.yaml=\['a list'\]: must be a mapping"),
        (TEXT.replace("jobs:", "jobz:"), r"^config\.yaml: config\.yaml=.*unknown key\(s\) \['jobz'\]"),
    ],
)
def test_a_broken_file_is_one_line_naming_what(text, error):
    with pytest.raises(config.ConfigError, match=error) as refusal:
        config.parse(text)
    assert "\n" not in str(refusal.value)


@pytest.mark.parametrize("job_id", sorted(CONFIG.jobs))
def test_each_jobs_daylight_saving_dates_are_the_ones_the_function_keys(job_id):
    """Not a refusal: the dates the job's zone repeats or skips one of its fire times in the coming years, as
    `python config.py` prints them; rules.py's stdlib expansion (the bake hook runs it before any dependency
    exists) must agree with schedules.py, which the function runs by."""
    job = CONFIG.jobs[job_id]
    start = dt.date.today()
    hits = {(hit.day, hit.kind) for hit in rules.dst_hits(job.schedule, job.time_zone, start)}
    since = dt.datetime.combine(start, dt.time(), dt.UTC)
    until = dt.datetime.combine(dt.date(start.year + rules.DST_WARNING_YEARS, start.month, 1), dt.time(), dt.UTC)
    rule = schedules.Schedule(job.schedule, job.time_zone, job.options.get("dst_gap", schedules.END_OF_GAP))
    kinds = {schedules.Dst.AMBIGUOUS: "repeated", schedules.Dst.NONEXISTENT: "skipped"}
    fires = {(fire.wall.date(), kinds[fire.dst]) for fire in schedules.dst_fire_times(rule, since, until)}
    # The windows' ends differ by a zone's offset: compare away from them.
    inner = {hit for hit in hits | fires if start + dt.timedelta(days=1) < hit[0] < until.date() - dt.timedelta(days=1)}
    assert {hit for hit in hits if hit in inner} == {fire for fire in fires if fire in inner}
    for warning in CONFIG.warnings:
        if warning.startswith(f"jobs.{job_id}.schedule="):
            warnings.warn(warning, UserWarning, stacklevel=1)


def test_the_check_command_warns_of_each_daylight_saving_date_of_a_job(tmp_path, capsys):
    """A job moved to 02:30 in Europe/Berlin: `python config.py` names every spring-forward and fall-back date of the
    coming years on one WARNING line, with the job's dst_gap rule, and still passes (a warning, not a refusal)."""
    raw = yaml.safe_load(TEXT)
    job_id = sorted(raw["jobs"])[0]
    raw["jobs"][job_id].update(schedule="30 2 * * *", time_zone="Europe/Berlin", dst_gap="skip")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert config.main([str(path)]) == 0
    (line,) = [line for line in capsys.readouterr().err.splitlines() if f"jobs.{job_id}.schedule=" in line]
    assert line.startswith(f"WARNING: jobs.{job_id}.schedule='30 2 * * *' in Europe/Berlin: daylight saving")
    # One of each a year; the window ends on a month's first day, so a date in that month may fall outside it.
    assert min(line.count("(skipped 02:30)"), line.count("(repeated 02:30)")) >= rules.DST_WARNING_YEARS - 1
    assert "a skipped one not at all (dst_gap=skip)" in line
