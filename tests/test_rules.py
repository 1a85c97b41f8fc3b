"""Unit tests of hooks/rules.py: every rule accepts its edge values and refuses one step past them.

Each refusal must be a RuleError whose message is one line: `field=<value repr>: <rule>`.
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo

import cronsim
import pytest
import questions  # the hook's checks of the answers (hooks/questions.py)
import rules
import scheduler_sim  # the independent model of Scheduler and the handler (tests/scheduler_sim.py)
import schedules  # the bake's (plain Python in the template): the function's expansion
from conftest import TEMPLATE_PROJECT
from live_server import RetryPolicy  # the proofs' model of Scheduler's retries (tests/proofs/harness/)
from scheduled_dedup_tools import schedule_rules


def refusal(check, *args) -> rules.RuleError:
    with pytest.raises(rules.RuleError) as caught:
        check(*args)
    return caught.value


def assert_refused(check, args, field, value, rule):
    """`check(*args)` refuses with one line naming `field`, `value` and a fragment of the rule."""
    error = refusal(check, *args)
    message = str(error)
    assert "\n" not in message and "\r" not in message, message
    assert error.field == field
    assert message.startswith(f"{field}={value!r}: "), message
    assert rule in message, message
    return message


# ---------------------------------------------------------------- names and ids

SLUG_RULE = "3-20 chars of lowercase letters, digits and hyphens"


@pytest.mark.parametrize("slug", ["abc", "a" * 20, "nightly-report", "a1-b2", "r2d2"])
def test_slug_accepts(slug):
    assert rules.check_field("project_slug", slug) == slug


@pytest.mark.parametrize("slug", ["ab", "a" * 21, "1abc", "-abc", "abc-", "Abc", "ab_c", "ab c", "", "-", "üabc", None])
def test_slug_refuses(slug):
    assert_refused(rules.check_field, ["project_slug", slug], "project_slug", slug, SLUG_RULE)


PROJECT_RULE = (
    "6-30 chars of lowercase letters, digits and hyphens, starts with a letter and does not end with a hyphen"
)


@pytest.mark.parametrize("project_id", ["abcdef", "a" + "b" * 29, "my-gcp-project", "a-1-b2", "abc-d1"])
def test_project_id_accepts_6_to_30_chars(project_id):
    assert rules.check_field("gcp_project_id", project_id) == project_id


@pytest.mark.parametrize(
    "project_id",
    [
        "abcde",  # 5 chars
        "a" + "b" * 30,  # 31 chars
        "1abcdef",
        "-abcdef",
        "abcdef-",
        "abcde-",
        "Abcdef",
        "abc_def",
        "abc.def",
        "my project",
        "",
        "ábcdef",
        123456,
    ],
)
def test_project_id_refuses(project_id):
    assert_refused(rules.check_field, ["gcp_project_id", project_id], "gcp_project_id", project_id, PROJECT_RULE)


@pytest.mark.parametrize(
    "region", ["europe-west1", "us-central1", "northamerica-northeast2", "europe-west10", "me-central2"]
)
def test_region_accepts(region):
    assert rules.check_field("region", region) == region


@pytest.mark.parametrize(
    "region", ["europe", "EUROPE-WEST1", "europe-west", "europe-west100", "us central1", "europe-west1-b", ""]
)
def test_region_refuses(region):
    assert_refused(rules.check_field, ["region", region], "region", region, "must be a GCP region")


@pytest.mark.parametrize("target", questions.TARGETS)
def test_target_accepts_each_target(target):
    assert questions.check_answer("target", target) == target


@pytest.mark.parametrize("target", ["Function", "lambda", "", "function "])
def test_target_refuses(target):
    assert_refused(questions.check_answer, ["target", target], "target", target, "function, cloud_run_job, workflow")


@pytest.mark.parametrize("name", ["Nightly Report", 'Bob\'s "Quarterly" \\ Report', "Informe 🚀 日本語", "x"])
def test_project_name_accepts_any_one_line_text(name):
    assert questions.check_answer("project_name", name) == name


@pytest.mark.parametrize(
    "name", ["", "   ", "two\nlines", "tab\there", "bell\x07", "del\x7f", None, "line\u2028separator", "para\u2029sep"]
)
def test_project_name_refuses_blank_or_control_characters(name):
    assert_refused(questions.check_answer, ["project_name", name], "project_name", name, "one line of non-blank text")


@pytest.mark.parametrize("database", ["(default)", "dedup-runs", "abcd", "a" + "b" * 62, "db-x9"])
def test_database_accepts(database):
    assert rules.check_field("firestore_database", database) == database


# a1b2c3d4-...: UUID-like but of the id's own shape (a letter first), so only DATABASE_ID's lookahead refuses it.
@pytest.mark.parametrize(
    "database",
    [
        "abc",
        "a" + "b" * 63,
        "1abc",
        "abcd-",
        "Dedup",
        "dedup_runs",
        "(DEFAULT)",
        "",
        "a1b2c3d4-0000-4000-8000-0123456789ab",
    ],
)
def test_database_refuses(database):
    assert_refused(
        rules.check_field, ["firestore_database", database], "firestore_database", database, "(default) or 4-63 chars"
    )


@pytest.mark.parametrize("collection", ["scheduler_runs", "Runs-2", "a", "_x", "__x", "x__", "___", "a" * 100])
def test_collection_accepts(collection):
    assert rules.check_field("firestore_collection", collection) == collection


@pytest.mark.parametrize("collection", ["a" * 101, "", "a/b", "a.b", "..", "runs ü", "__x__", "____"])
def test_collection_refuses(collection):
    assert_refused(
        rules.check_field,
        ["firestore_collection", collection],
        "firestore_collection",
        collection,
        "1-100 chars of letters, digits",
    )


# ---------------------------------------------------------------- team delivery: state bucket, repository

STATE_BUCKET_RULE = "a Cloud Storage bucket name: 3-63 chars of lowercase letters, digits, '-' and '_'"


@pytest.mark.parametrize("bucket", ["", "abc", "acme-tf-state", "a_b", "0tfstate9", "a" * 63])
def test_state_bucket_accepts_empty_or_a_bucket_name(bucket):
    assert questions.check_answer("state_bucket", bucket) == bucket


@pytest.mark.parametrize(
    "bucket",
    [
        "ab",  # too short
        "a" * 64,  # too long (without dots)
        "Acme-state",  # upper case
        "-acme",
        "acme-",
        "acme_",
        "acme.example.com",  # dots: a domain-named bucket needs a verified domain
        "goog-state",  # Cloud Storage refuses the goog prefix
        "my-google-state",  # and google anywhere
        "acme state",
        " acme",
        None,
    ],
)
def test_state_bucket_refuses(bucket):
    assert_refused(questions.check_answer, ["state_bucket", bucket], "state_bucket", bucket, STATE_BUCKET_RULE)


REPOSITORY_RULE = "must be a GitHub repository as owner/name"


@pytest.mark.parametrize(
    "repository", ["a/b", "octo-org/nightly-report", "Octo/Repo.v2_x", "a" * 39 + "/x", "o/" + "r" * 97, "o/..."]
)
def test_repository_accepts_owner_slash_name(repository):
    assert questions.check_repository(repository, "acme-tf-state") == repository


def test_repository_may_be_empty_only_without_a_state_bucket():
    assert questions.check_repository("", "") == ""
    assert_refused(
        questions.check_repository, ["", "acme-tf-state"], "repository", "", "is required with a state_bucket"
    )


@pytest.mark.parametrize(
    "repository",
    [
        "nightly-report",  # no owner
        "a" * 40 + "/x",  # owner too long
        "-octo/x",
        "octo-/x",
        "oc--to/x",
        "o/" + "r" * 101,
        "a" * 39 + "/" + "r" * 100,  # GitHub allows it, but see the subject-length test below
        "o/.",
        "o/..",
        "o/r/extra",
        "o/r ",
        "o/r'",  # would end the CEL string literal in the Workload Identity condition
        "",
        None,
    ],
)
def test_repository_refuses(repository):
    assert_refused(questions.check_repository, [repository, "acme-tf-state"], "repository", repository, "")


def test_repository_refuses_names_whose_deploy_subject_exceeds_google_subjects_127_bytes():
    longest = "o/" + "r" * 97  # repo:o/rrr...:environment:production is 127 bytes
    assert len(f"repo:{longest}:environment:production") == 127
    assert questions.check_repository(longest, "acme-tf-state") == longest
    assert_refused(
        questions.check_repository,
        [longest + "r", "acme-tf-state"],
        "repository",
        longest + "r",
        "must be at most 99 chars",
    )


@pytest.mark.parametrize("repository", ["nightly-report", "-octo/x", "o/..", "o/r'"])
def test_repository_refuses_non_github_names_naming_the_rule(repository):
    assert_refused(questions.check_repository, [repository, ""], "repository", repository, REPOSITORY_RULE)


# ---------------------------------------------------------------- cron

GROC_REASON = "only guarantees the X-CloudScheduler-ScheduleTime header for unix-cron"


@pytest.mark.parametrize(
    "schedule",
    [
        "0 3 * * *",
        "*/5 * * * *",
        "30 8 * * MON-FRI",
        "0 0 1 JAN-DEC *",
        "0 0 * jan,Jul *",
        "59 23 31 12 6",
        "0 0 1 1 0",
        "0 0 * * 7",  # 7 is Sunday too
        "0-59/15 0-23 1-31 1-12 0-7",
        "5,10,15 1,2 * * mon,wed,fri",
        "0 9-17/2 * * 1-5",
        "0 0 * * SUN-SAT",
        "0  3  *  *  *",  # runs of spaces separate fields
    ],
)
def test_schedule_accepts_unix_cron(schedule):
    assert rules.check_schedule("nightly", schedule) == schedule


@pytest.mark.parametrize(
    ("schedule", "reason"),
    [
        ("60 * * * *", "minute value '60' is outside 0-59"),
        ("-1 * * * *", "minute item '-1' is not a number, range, list or step"),
        ("* 24 * * *", "hour value '24' is outside 0-23"),
        ("* * 0 * *", "day of month value '0' is outside 1-31"),
        ("* * 32 * *", "day of month value '32' is outside 1-31"),
        ("* * * 0 *", "month value '0' is outside 1-12"),
        ("* * * 13 *", "month value '13' is outside 1-12"),
        ("* * * * 8", "day of week value '8' is outside 0-7"),
        ("* * * * MON-FUN", "day of week value 'FUN' is outside 0-7"),
        ("* * * * JAN", "day of week value 'JAN' is outside 0-7"),
        ("* * * MON *", "month value 'MON' is outside 1-12"),
        ("MON * * * *", "minute value 'MON' is outside 0-59"),
        ("*/0 * * * *", "minute step in '*/0' is 0"),
        ("* 1-5/0 * * *", "hour step in '1-5/0' is 0"),
        ("30-10 * * * *", "minute range '30-10' runs backwards"),
        ("* * * * FRI-MON", "day of week range 'FRI-MON' runs backwards"),
        ("* * * DEC-JAN *", "month range 'DEC-JAN' runs backwards"),
        ("1,,2 * * * *", "minute item '' is not a number, range, list or step"),
        ("1.5 * * * *", "minute item '1.5' is not a number, range, list or step"),
        ("*/x * * * *", "minute item '*/x' is not a number, range, list or step"),
        ("٣ * * * *", "minute item '٣' is not a number, range, list or step"),  # Arabic-Indic 3: int() reads it
        ("*/٣ * * * *", "minute item '*/٣' is not a number, range, list or step"),
        ("_ * * * *", "minute item '_' is not a number, range, list or step"),
        ("1st monday of sep 17:00", "minute value '1st' is outside 0-59"),  # a five-word groc form
    ],
)
def test_schedule_refuses_out_of_range_or_malformed_fields(schedule, reason):
    assert_refused(rules.check_schedule, ["nightly", schedule], "jobs.nightly.schedule", schedule, reason)


@pytest.mark.parametrize(
    "schedule",
    ["every 5 minutes", "every monday 09:00", "every 2 hours from 08:00 to 16:00", "@daily", "0 3 * * * *", "", "   "],
)
def test_schedule_refuses_anything_but_five_fields_naming_the_schedule_time_header(schedule):
    message = assert_refused(rules.check_schedule, ["nightly", schedule], "jobs.nightly.schedule", schedule, "5-field")
    assert GROC_REASON in message


@pytest.mark.parametrize("schedule", ["0\u00a03 * * * *", "0 3 * *\u2003*", "0 3\v* * * *"])
def test_schedule_fields_split_on_ascii_spaces_only_as_terraform_does(schedule):
    assert_refused(rules.check_schedule, ["nightly", schedule], "jobs.nightly.schedule", schedule, "unix-cron")


def test_five_word_groc_form_is_refused_naming_the_schedule_time_header():
    schedule = "1st monday of sep 17:00"
    message = assert_refused(rules.check_schedule, ["nightly", schedule], "jobs.nightly.schedule", schedule, "1st")
    assert GROC_REASON in message


def test_schedule_refuses_non_text():
    assert_refused(rules.check_schedule, ["nightly", 5], "jobs.nightly.schedule", 5, "5-field unix-cron string")


# ---------------------------------------------------------------- time zones


@pytest.mark.parametrize(
    "zone", ["Etc/UTC", "UTC", "Europe/Madrid", "America/New_York", "Asia/Kolkata", "America/Argentina/Buenos_Aires"]
)
def test_time_zone_accepts_iana_zones(zone):
    assert rules.check_time_zone("nightly", zone) == zone


@pytest.mark.parametrize(
    "zone",
    [
        "Mars/Olympus_Mons",
        "europe/madrid",
        " Etc/UTC",
        "Etc/UTC ",
        "",
        "Europe",  # a directory of the zone database: ZoneInfo() raises IsADirectoryError
        "posix/Europe/Madrid",  # loads with ZoneInfo() but is no IANA name
        "right/UTC",
        "posixrules",
        "localtime",
        "../../etc/passwd",
        "+02:00",
        "GMT+2",
        None,
        ["Etc/UTC"],
    ],
)
def test_time_zone_refuses(zone):
    assert_refused(rules.check_time_zone, ["nightly", zone], "jobs.nightly.time_zone", zone, "IANA time zone")


# ---------------------------------------------------------------- jobs

JOB = {"schedule": "0 3 * * *", "time_zone": "Etc/UTC"}


def test_jobs_accepts_several_and_returns_them():
    jobs = {"nightly": dict(JOB), "0-every-5": {"schedule": "*/5 * * * *", "time_zone": "Europe/Madrid"}}
    assert rules.check_jobs(jobs) == jobs


@pytest.mark.parametrize("job_id", ["a", "0abc", "a" * 40, "every-5-min"])
def test_jobs_accepts_job_ids(job_id):
    assert list(rules.check_jobs({job_id: JOB})) == [job_id]


@pytest.mark.parametrize("jobs", [{}, [], [JOB], "nightly", '{"nightly": {}}', None])
def test_jobs_refuses_anything_but_a_non_empty_object(jobs):
    assert_refused(rules.check_jobs, [jobs], "jobs", jobs, "must be a non-empty mapping")


@pytest.mark.parametrize("job_id", ["Nightly", "night_ly", "-nightly", "a" * 41, "", "ni ght"])
def test_jobs_refuses_bad_job_ids(job_id):
    assert_refused(rules.check_jobs, [{job_id: JOB}], "jobs", job_id, "each job id must be 1-40 chars")


@pytest.mark.parametrize(
    "job",
    [
        {"time_zone": "Etc/UTC"},
        {**JOB, "retries": 1},
        {},
        "0 3 * * *",
        ["0 3 * * *", "Etc/UTC"],
    ],
)
def test_jobs_refuses_jobs_without_a_schedule_or_with_an_unknown_key(job):
    assert_refused(rules.check_jobs, [{"nightly": job}], "jobs.nightly", job, "must hold a schedule, and nothing else")


def test_a_job_without_a_time_zone_is_read_in_utc_and_may_carry_its_own_timing():
    checked = rules.check_jobs({"sync": {"schedule": "*/15 * * * *", "attempt_deadline_seconds": 120}})
    assert checked == {"sync": {"schedule": "*/15 * * * *", "time_zone": "Etc/UTC", "attempt_deadline_seconds": 120}}


def test_jobs_checks_each_schedule_and_time_zone():
    jobs = {"ok": JOB, "bad": {"schedule": "every 5 minutes", "time_zone": "Etc/UTC"}}
    assert_refused(rules.check_jobs, [jobs], "jobs.bad.schedule", "every 5 minutes", GROC_REASON)
    jobs = {"ok": JOB, "bad": {"schedule": "0 3 * * *", "time_zone": "Europe/Atlantis"}}
    assert_refused(rules.check_jobs, [jobs], "jobs.bad.time_zone", "Europe/Atlantis", "IANA time zone")


# ---------------------------------------------------------------- numbers and timing


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("42", 42), (300, 300), ("007", 7)])
def test_parse_seconds_reads_whole_numbers(text, number):
    assert rules.parse_seconds("lease_seconds", text) == number


# " 42 " too: the templates render numbers as given, and a padded one breaks config.yaml's readers and `terraform fmt`.
@pytest.mark.parametrize("value", ["abc", "3.5", "", "1e3", "-1", "+5", "٣", None, True, 2.5, "5 s", " 42 ", "42\n"])
def test_parse_seconds_refuses_non_numbers(value):
    assert_refused(rules.parse_seconds, ["lease_seconds", value], "lease_seconds", value, "must be a whole number")


def test_parse_seconds_enforces_bounds():
    assert rules.parse_seconds("retry_count", "5", 0, 5) == 5
    assert_refused(rules.parse_seconds, ["retry_count", "6", 0, 5], "retry_count", "6", "must be 0-5")
    assert_refused(rules.parse_seconds, ["lease_seconds", "0", 1], "lease_seconds", "0", "must be at least 1")


# A consistent set of timing answers (as text, as cookiecutter hands them over): the retries wait
# 30 + 60 + 120 + 240 + 300 = 750 s > the lease (360 s), and the window is (5 + 1) * 300 + 5 * 300 = 3300 s,
# so retention must be >= 360 + 3300 = 3660 s.
TIMING = {
    "attempt_deadline_seconds": "300",
    "function_timeout_seconds": "300",
    "lease_seconds": "360",
    "retry_count": "5",
    "min_backoff_seconds": "30",
    "max_backoff_seconds": "300",
    "max_doublings": "3",
    "max_retry_duration_seconds": "0",
    "retention_seconds": "3660",
}
# Waits long enough for leases of up to an hour (300 + 600 + 1200 + 2400 + 3600 = 8100 s).
LONG_WAITS = {"min_backoff_seconds": 300, "max_backoff_seconds": 3600}


def timing(**overrides):
    return {**TIMING, **{key: str(value) for key, value in overrides.items()}}


def test_timing_accepts_and_returns_numbers():
    assert rules.check_timing(TIMING) == {key: int(value) for key, value in TIMING.items()}


@pytest.mark.parametrize("deadline", [15, 1800])
def test_attempt_deadline_accepts_15_to_1800(deadline):
    values = timing(
        attempt_deadline_seconds=deadline,
        function_timeout_seconds=1800,
        lease_seconds=1830,
        retention_seconds=999999,
        **LONG_WAITS,
    )
    assert rules.check_timing(values)["attempt_deadline_seconds"] == deadline


@pytest.mark.parametrize("deadline", [14, 1801, 0])
def test_attempt_deadline_refuses_outside_15_to_1800(deadline):
    values = timing(attempt_deadline_seconds=deadline, function_timeout_seconds=3600, lease_seconds=3630)
    assert_refused(rules.check_timing, [values], "attempt_deadline_seconds", str(deadline), "must be 15-1800")


def test_function_timeout_must_cover_the_attempt_deadline():
    assert rules.check_timing(timing(attempt_deadline_seconds=300, function_timeout_seconds=300))
    assert_refused(
        rules.check_timing,
        [timing(attempt_deadline_seconds=300, function_timeout_seconds=299)],
        "function_timeout_seconds",
        "299",
        "must be at least attempt_deadline_seconds (300)",
    )


def test_function_timeout_is_at_most_3600():
    values = timing(function_timeout_seconds=3600, lease_seconds=3630, retention_seconds=999999, **LONG_WAITS)
    assert rules.check_timing(values)["function_timeout_seconds"] == 3600
    values = timing(function_timeout_seconds=3601, lease_seconds=3631, retention_seconds=999999)
    assert_refused(rules.check_timing, [values], "function_timeout_seconds", "3601", "must be 1-3600")


def test_lease_must_outlast_the_function_timeout_by_the_margin():
    assert rules.LEASE_MARGIN_SECONDS > 0
    shortest = 300 + rules.LEASE_MARGIN_SECONDS
    assert rules.check_timing(timing(lease_seconds=shortest, retention_seconds=shortest + 3300))
    assert_refused(
        rules.check_timing,
        [timing(lease_seconds=shortest - 1)],
        "lease_seconds",
        str(shortest - 1),
        f"must be at least attempt_deadline_seconds + {rules.LEASE_MARGIN_SECONDS} ({shortest})",
    )
    # A longer function timeout is the bound, and the refusal names it.
    assert_refused(
        rules.check_timing,
        [timing(function_timeout_seconds=600, lease_seconds=620, retention_seconds=999999)],
        "lease_seconds",
        "620",
        f"function_timeout_seconds + {rules.LEASE_MARGIN_SECONDS} ({600 + rules.LEASE_MARGIN_SECONDS})",
    )


@pytest.mark.parametrize("count", [0, 5])
def test_retry_count_accepts_0_to_5(count):
    assert rules.check_timing(timing(retry_count=count, retention_seconds=999999))["retry_count"] == count


@pytest.mark.parametrize("count", ["6", "-1"])
def test_retry_count_refuses_outside_0_to_5(count):
    assert_refused(rules.check_timing, [timing(retry_count=count)], "retry_count", count, "must be")


def test_backoff_min_must_not_exceed_max():
    assert rules.check_timing(timing(min_backoff_seconds=300, max_backoff_seconds=300))
    assert_refused(
        rules.check_timing,
        [timing(min_backoff_seconds=301, max_backoff_seconds=300)],
        "max_backoff_seconds",
        "300",
        "must be at least min_backoff_seconds (301)",
    )


@pytest.mark.parametrize(
    ("field", "value", "rule"),
    [
        ("min_backoff_seconds", "3601", "must be 0-3600"),
        ("max_backoff_seconds", "3601", "must be 0-3600"),
        ("max_doublings", "17", "must be 0-16"),
        ("max_retry_duration_seconds", "-5", "must be a whole number"),
        ("retention_seconds", "0", "must be at least 1"),
    ],
)
def test_retry_settings_are_bounded(field, value, rule):
    assert_refused(rules.check_timing, [timing(**{field: value})], field, value, rule)


@pytest.mark.parametrize("field", sorted(TIMING))
def test_every_timing_field_refuses_non_numbers(field):
    assert_refused(rules.check_timing, [timing(**{field: "soon"})], field, "soon", "must be a whole number")


def test_retry_window_by_count():
    # 4 attempts of 300 s and 3 waits of 300 s; no duration limit.
    assert rules.retry_window_seconds(300, 3, 300, 0) == 4 * 300 + 3 * 300 == 2100
    # No retries: the single attempt is the window.
    assert rules.retry_window_seconds(60, 0, 300, 0) == 60


def test_retry_window_by_duration_when_it_is_longer():
    # By count: 2 * 60 + 100 = 220 s; by duration: 3600 + one last wait 100 + one last attempt 60 = 3760 s.
    assert rules.retry_window_seconds(60, 1, 100, 3600) == 3760
    # A short duration limit does not shorten the count bound (Scheduler stops only when both are reached).
    assert rules.retry_window_seconds(300, 3, 300, 10) == 2100


def test_retention_must_cover_lease_plus_window_by_count():
    assert rules.check_timing(timing(retention_seconds=3660))["retention_seconds"] == 3660
    assert_refused(
        rules.check_timing,
        [timing(retention_seconds=3659)],
        "retention_seconds",
        "3659",
        "must be at least lease_seconds + the retry window (360 + 3300 = 3660)",
    )


def test_retention_must_cover_lease_plus_window_by_duration():
    values = timing(
        attempt_deadline_seconds=60,
        function_timeout_seconds=60,
        lease_seconds=90,
        retry_count=1,
        min_backoff_seconds=100,  # the one retry waits 100 s, past the 90 s lease
        max_backoff_seconds=100,
        max_retry_duration_seconds=3600,
    )
    assert rules.check_timing({**values, "retention_seconds": "3850"})["retention_seconds"] == 3850
    assert_refused(
        rules.check_timing,
        [{**values, "retention_seconds": "3849"}],
        "retention_seconds",
        "3849",
        "(90 + 3760 = 3850)",
    )


# ---------------------------------------------------------------- retries reach past the lease


def test_retry_intervals_are_googles_documented_example():
    # RetryConfig.max_doublings: "10s, 20s, 40s, 80s, 160s, 240s, 300s, 300s, ..." for 10 s / 300 s / 3.
    assert rules.retry_intervals_seconds(8, 10, 300, 3) == [10, 20, 40, 80, 160, 240, 300, 300]


@pytest.mark.parametrize(
    ("args", "waits"),
    [
        ((5, 30, 300, 3), [30, 60, 120, 240, 300]),  # the template's defaults: 750 s
        ((3, 10, 300, 3), [10, 20, 40]),  # the old defaults: 70 s
        ((5, 100, 1000, 0), [100, 200, 300, 400, 500]),  # no doubling: linear by min_backoff from the start
        ((5, 10, 1000, 1), [10, 20, 40, 60, 80]),  # one doubling, then linear by 20
        ((5, 10, 25, 16), [10, 20, 25, 25, 25]),  # capped at max_backoff while still doubling
        ((3, 0, 0, 3), [0, 0, 0]),
        ((0, 30, 300, 3), []),
    ],
)
def test_retry_intervals_double_then_grow_linearly_up_to_max_backoff(args, waits):
    assert rules.retry_intervals_seconds(*args) == waits


@pytest.mark.parametrize("args", [(8, 10, 300, 3), (5, 30, 300, 3), (5, 100, 1000, 0), (5, 10, 25, 16), (5, 7, 90, 2)])
def test_retry_intervals_agree_with_the_baked_fault_tests_model(args):
    retry_count, min_backoff, max_backoff, max_doublings = args
    policy = RetryPolicy(retry_count, min_backoff, max_backoff, max_doublings)
    assert rules.retry_intervals_seconds(*args) == policy.delays()


RETRY_RULE = "end before the lease ({lease} s) expires, so a run whose instance crashed is never retried"


def test_the_old_defaults_are_refused_naming_the_waits():
    """retry_count 3 with 10 s doubling: retries at +10, +30, +70 s all meet the live 360 s lease."""
    message = assert_refused(
        rules.check_timing,
        [timing(retry_count=3, min_backoff_seconds=10)],
        "retry_count",
        "3",
        "the retries (10+20+40 = 70 s) " + RETRY_RULE.format(lease=360),
    )
    assert message.endswith("values that pass: min_backoff_seconds 52, max_backoff_seconds 520"), message


def test_retries_must_add_up_to_more_than_the_lease():
    # The defaults' waits add up to 750 s; the lease may be at most 749 s (timeout 700 + 30 <= 749).
    longest = timing(function_timeout_seconds=700, lease_seconds=749, retention_seconds=999999)
    assert rules.check_timing(longest)["lease_seconds"] == 749
    equal = timing(function_timeout_seconds=700, lease_seconds=750, retention_seconds=999999)
    assert_refused(
        rules.check_timing,
        [equal],
        "retry_count",
        "5",
        "the retries (30+60+120+240+300 = 750 s) " + RETRY_RULE.format(lease=750),
    )


def test_retries_sum_one_past_the_lease_is_enough():
    # One retry after 360 s meets the 360 s lease still live (a claim at t, a retry at t + 360): refused.
    at_lease = timing(retry_count=1, min_backoff_seconds=360, max_backoff_seconds=360)
    assert_refused(rules.check_timing, [at_lease], "retry_count", "1", "(360 = 360 s) " + RETRY_RULE.format(lease=360))
    past_lease = timing(retry_count=1, min_backoff_seconds=361, max_backoff_seconds=361)
    assert rules.check_timing(past_lease)["min_backoff_seconds"] == 361


def test_no_retries_are_exempt_from_reaching_past_the_lease():
    # Nothing retries a crashed run then, however long the lease: an operator re-runs it (a bake's docs/operations.md).
    values = timing(retry_count=0, min_backoff_seconds=0, max_backoff_seconds=0, lease_seconds=3630)
    values = {**values, "function_timeout_seconds": "3600", "retention_seconds": "999999"}
    assert rules.check_timing(values)["retry_count"] == 0
    assert_refused(
        rules.check_timing,
        [{**values, "retry_count": "1"}],
        "retry_count",
        "1",
        "(0 = 0 s) " + RETRY_RULE.format(lease=3630),
    )


# ---------------------------------------------------------------- validate


def answers(**overrides):
    return {
        "project_name": "Nightly Report",
        "project_slug": "nightly-report",
        "gcp_project_id": "my-gcp-project",
        "region": "europe-west1",
        "target": "function",
        "jobs": {"nightly": dict(JOB)},
        **TIMING,
        # The audit needs interval + settle (3660 s here) within min(1 day, retention): TIMING's minimal
        # retention leaves it no room, so a bake keeps its records a day.
        "retention_seconds": "86400",
        "audit_interval_minutes": "60",
        "firestore_database": "(default)",
        "create_firestore_database": True,
        "firestore_collection": "scheduler_runs",
        "alert_email": "",
        "state_bucket": "",
        "repository": "octo-org/nightly-report",
        **overrides,
    }


def test_validate_returns_normalised_answers():
    checked = questions.validate(answers(retry_count="5"))  # cookiecutter hands numbers over as text
    assert checked["retry_count"] == 5
    assert checked["jobs"] == {"nightly": JOB}
    assert checked["firestore_collection"] == "scheduler_runs"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("project_name", "  "),
        ("project_slug", "x"),
        ("gcp_project_id", "Bad"),
        ("region", "mars"),
        ("target", "lambda"),
        ("jobs", {}),
        ("attempt_deadline_seconds", "1"),
        ("retention_seconds", "10"),
        ("firestore_database", "X"),
        ("create_firestore_database", "maybe"),
        ("firestore_collection", "a/b"),
        ("alert_email", "nobody"),
        ("state_bucket", "Acme"),
        ("repository", "octo-org"),
    ],
)
def test_validate_refuses_each_field(field, value):
    assert_refused(questions.validate, [answers(**{field: value})], field, value, "")


def test_validate_requires_a_repository_with_a_state_bucket():
    assert questions.validate(answers(repository=""))["repository"] == ""
    assert_refused(
        questions.validate, [answers(state_bucket="acme-tf-state", repository="")], "repository", "", "required"
    )


def test_validate_reports_the_first_broken_rule_in_prompt_order():
    error = refusal(questions.validate, answers(gcp_project_id="Bad", region="mars", firestore_collection="a/b"))
    assert error.field == "gcp_project_id"


# ---------------------------------------------------------------- the schedule's smallest gap

START = dt.date(2026, 1, 1)


@pytest.mark.parametrize(
    ("schedule", "field", "values"),
    [
        ("5/15 * * * *", "minutes", {5, 20, 35, 50}),  # n/step runs to the field's end
        ("0-10/5,30 * * * *", "minutes", {0, 5, 10, 30}),
        ("0 */6 * * *", "hours", {0, 6, 12, 18}),
        ("0 0 * JAN,jul-AUG *", "months", {1, 7, 8}),
        ("0 0 * * MON-FRI", "weekdays", {1, 2, 3, 4, 5}),
        ("0 0 * * 5-7", "weekdays", {5, 6, 0}),  # 7 is Sunday
        ("0 0 28-31 * *", "days", {28, 29, 30, 31}),
    ],
)
def test_cron_parse_expands_each_field(schedule, field, values):
    assert getattr(rules.Cron.parse(schedule), field) == values


@pytest.mark.parametrize(
    ("schedule", "either"),
    [
        ("0 0 13 * 5", True),
        ("0 0 1,15 * mon", True),
        ("0 0 13 * *", False),
        ("0 0 * * 5", False),
        ("0 0 */2 * 5", False),
    ],
)
def test_day_of_month_and_week_match_either_unless_one_starts_with_a_star(schedule, either):
    assert rules.Cron.parse(schedule).days_and_weekdays is not either


def test_either_fires_on_every_13th_and_every_friday():
    cron = rules.Cron.parse("0 0 13 * 5")
    friday_12th, thursday_13th, thursday_11th = dt.date(2026, 6, 12), dt.date(2026, 8, 13), dt.date(2026, 6, 11)
    assert cron.fires_on(friday_12th) and cron.fires_on(thursday_13th) and not cron.fires_on(thursday_11th)
    both = rules.Cron.parse("0 0 */2 * 5")  # odd days that are Fridays
    assert (
        both.fires_on(dt.date(2026, 6, 19))
        and not both.fires_on(friday_12th)
        and not both.fires_on(dt.date(2026, 6, 13))
    )


@pytest.mark.parametrize(
    ("schedule", "zone", "seconds", "first"),
    [
        ("*/5 * * * *", "Etc/UTC", 300, "2026-01-01T00:00:00+00:00"),
        ("0 3 * * *", "Etc/UTC", 86400, "2026-01-01T03:00:00+00:00"),
        ("0 3 * * *", "Europe/Madrid", 82800, "2026-03-28T03:00:00+01:00"),  # the 23-hour day
        ("0 1 * * SUN", "Europe/Madrid", 7 * 86400 - 3600, "2026-03-29T01:00:00+01:00"),  # the week with the short day
        # 02:30 does not exist on 2026-03-08 in New York: it fires at the transition (03:00 EDT).
        ("30 2 * * *", "America/New_York", 84600, "2026-03-07T02:30:00-05:00"),
        # 01:30 occurs twice on 2026-11-01 in New York: both count, an hour apart.
        ("30 1 * * *", "America/New_York", 3600, "2026-11-01T01:30:00-04:00"),
        # Every hour at :30 in Madrid: 01:30 CET, then 02:30 (skipped: the transition at 03:00 CEST), 03:30 CEST.
        ("30 * * * *", "Europe/Madrid", 1800, "2026-03-29T01:30:00+01:00"),
        ("0 */2 * * *", "Europe/Madrid", 3600, "2026-03-29T03:00:00+02:00"),
        ("0 */3 * * *", "Europe/Madrid", 7200, "2026-03-29T00:00:00+01:00"),
        ("0 0 29 2 *", "Etc/UTC", 4 * 365 * 86400 + 86400, "2028-02-29T00:00:00+00:00"),
        ("30 23 28-31 * mon-fri", "Etc/UTC", 86400, "2026-01-01T23:30:00+00:00"),  # either: every weekday
    ],
)
def test_smallest_gap_counts_dst_transitions(schedule, zone, seconds, first):
    gap = schedule_rules.smallest_gap(schedule, zone, START)
    assert gap.seconds == seconds
    assert gap.first.astimezone(zoneinfo.ZoneInfo(zone)).isoformat() == first
    assert gap.second - gap.first == dt.timedelta(seconds=seconds)


def test_a_schedule_that_never_fires_twice_has_no_gap():
    assert schedule_rules.smallest_gap("0 0 31 2 *", "Etc/UTC", START) is None
    assert schedule_rules.smallest_gap("0 0 29 2 *", "Etc/UTC", START, years=2) is None  # only 2028-02-29 in 2026-2027


def fire_times(schedule: str, time_zone: str, first: dt.date, last: dt.date) -> list[dt.datetime]:
    """Every instant (UTC) at which rules.py's expansion (smallest_gap's) may fire on the local days `first` to
    `last`: every fire time, not smallest_gap's sample of a day of one offset."""
    days = schedule_rules._fire_instants(
        rules.Cron.parse(rules.check_schedule("job", schedule)), time_zone, first, last
    )
    return [dt.datetime.fromtimestamp(instant, dt.UTC) for instants in days for instant in instants]


@pytest.mark.parametrize(
    ("schedule", "zone"),
    [("*/7 * * * *", "America/New_York"), ("15 1,2 * * *", "Europe/Madrid"), ("0 */5 * * 1-5", "Australia/Lord_Howe")],
)
def test_smallest_gap_is_the_smallest_step_between_all_fire_times(schedule, zone):
    """The fast path (one offset a day) agrees with the exact expansion, over a year of both transitions."""
    times = fire_times(schedule, zone, START, dt.date(2026, 12, 31))
    steps = [int((later - earlier).total_seconds()) for earlier, later in zip(times, times[1:], strict=False)]
    assert schedule_rules.smallest_gap(schedule, zone, START, years=1).seconds == min(steps)


# Days around the 2026 transitions of New York (Mar 8, Nov 1) and Madrid (Mar 29, Oct 25), and ordinary ones.
CROSS_CHECK_DAYS = {
    "America/New_York": [(dt.date(2026, 3, 7), dt.date(2026, 3, 9)), (dt.date(2026, 10, 31), dt.date(2026, 11, 2))],
    "Europe/Madrid": [(dt.date(2026, 3, 28), dt.date(2026, 3, 30)), (dt.date(2026, 10, 24), dt.date(2026, 10, 26))],
    "Etc/UTC": [(dt.date(2026, 2, 27), dt.date(2026, 3, 2))],
}
CROSS_CHECK_SCHEDULES = [
    "*/5 * * * *",
    "30 * * * *",
    "0 */2 * * *",
    "30 1 * * *",
    "30 2 * * *",
    "15 1-3 * * *",
    "0 0 13 * 5",  # day of month OR day of week
    "0 0 */2 * sat",  # AND: the field starts with '*'
    "45 23 28-31 * mon-fri",
]


def cronsim_fire_times(schedule, zone, first, last):
    tz = zoneinfo.ZoneInfo(zone)
    start = dt.datetime.combine(first, dt.time(), tzinfo=tz) - dt.timedelta(seconds=1)
    end = dt.datetime.combine(last + dt.timedelta(days=1), dt.time(), tzinfo=tz)
    times = []
    for moment in cronsim.CronSim(schedule, start):
        if moment >= end:
            return times
        times.append(moment.astimezone(dt.UTC))
    return times


@pytest.mark.parametrize("zone", list(CROSS_CHECK_DAYS))
@pytest.mark.parametrize("schedule", CROSS_CHECK_SCHEDULES)
def test_fire_times_are_cronsims_plus_the_documented_dst_extras(schedule, zone):
    """cronsim (Debian cron's DST handling) fires a skipped time at the transition only when neither minute nor
    hour starts with '*', and a repeated time once then; the hook counts both cases always (the worst gap)."""
    tz = zoneinfo.ZoneInfo(zone)
    for first, last in CROSS_CHECK_DAYS[zone]:
        ours = fire_times(schedule, zone, first, last)
        theirs = cronsim_fire_times(schedule, zone, first, last)
        assert ours == sorted(set(ours))
        assert set(theirs) <= set(ours), (first, sorted(set(theirs) - set(ours)))
        for extra in sorted(set(ours) - set(theirs)):
            local = extra.astimezone(tz)
            repeated = local.replace(tzinfo=None) == (extra - dt.timedelta(hours=1)).astimezone(tz).replace(tzinfo=None)
            at_transition = (extra - dt.timedelta(seconds=1)).astimezone(tz).utcoffset() != local.utcoffset()
            assert repeated or at_transition, (schedule, local.isoformat())
        if zone == "Etc/UTC":
            assert ours == theirs


def test_the_dst_extras_are_a_repeated_times_second_instant_and_a_skipped_times_transition():
    repeated = fire_times("30 1 * * *", "America/New_York", dt.date(2026, 11, 1), dt.date(2026, 11, 1))
    assert [moment.isoformat() for moment in repeated] == ["2026-11-01T05:30:00+00:00", "2026-11-01T06:30:00+00:00"]
    assert len(cronsim_fire_times("30 1 * * *", "America/New_York", dt.date(2026, 11, 1), dt.date(2026, 11, 1))) == 1
    skipped = fire_times("30 * * * *", "Europe/Madrid", dt.date(2026, 3, 29), dt.date(2026, 3, 29))[:3]
    assert [moment.isoformat() for moment in skipped] == [
        "2026-03-28T23:30:00+00:00",
        "2026-03-29T00:30:00+00:00",
        "2026-03-29T01:00:00+00:00",  # 02:30 does not exist: the transition, 03:00 CEST
    ]
    assert dt.datetime(2026, 3, 29, 1, tzinfo=dt.UTC) not in cronsim_fire_times(
        "30 * * * *", "Europe/Madrid", dt.date(2026, 3, 29), dt.date(2026, 3, 29)
    )


# ---------------------------------------------------------------- one fault against the schedule

DEFAULT_TIMING = rules.check_timing({**TIMING, "retention_seconds": "604800"})
NIGHTLY = {"nightly": dict(JOB)}


def test_retry_wait_is_the_interval_before_each_retry():
    assert [rules.retry_wait_seconds(i, 10, 300, 3) for i in range(8)] == rules.retry_intervals_seconds(8, 10, 300, 3)


@pytest.mark.parametrize(
    ("retry_count", "duration", "retry", "at", "allowed"),
    [
        (0, 0, 1, 1, False),  # "If retryCount is 0 (and if maxRetryDuration is also 0)": no retry
        (0, 100, 1, 99, True),  # retry_count 0, a duration: retried while inside it
        (0, 100, 9, 99, True),
        (0, 100, 1, 100, False),
        (2, 0, 2, 10**6, True),  # duration 0 is no time limit
        (2, 0, 3, 1, False),
        (2, 10, 2, 1000, True),  # both limits must be reached to stop
        (2, 10, 3, 9, True),
        (2, 10, 3, 10, False),
    ],
)
def test_retries_stop_when_both_count_and_duration_are_reached(retry_count, duration, retry, at, allowed):
    retries = schedule_rules.SchedulerRetries(retry_count, 10, 300, 3, duration)
    assert retries.allowed(retry, at) is allowed


def test_first_retry_from_walks_the_backoff_until_the_run_is_ready():
    retries = schedule_rules.SchedulerRetries(5, 30, 300, 3, 0)
    assert retries.first_retry_from(0, 360) == (4, 450)  # 30, 90, 210 get 409; 450 takes over
    assert retries.first_retry_from(0, 450) == (4, 450)  # at the very second the lease ends (dedup.decide)
    assert retries.first_retry_from(0, 751) is None  # past the fifth and last retry (750 s)
    assert retries.first_retry_from(300, 300) == (1, 330)
    assert schedule_rules.SchedulerRetries(0, 0, 0, 3, 100).first_retry_from(0, 1) is None  # zero waits never get there


def test_the_defaults_worst_fault_is_a_crash_just_before_a_retry_meets_the_lease_end():
    """Killed 149 s after the claim: retries at 179, 239, 359 s meet the lease (until 360 s); retry 4 at
    599 s takes over and may work the whole 300 s timeout: 899 s. (Killed at 150 s, retry 3 at 360 s takes over.)"""
    busy = {outcome.fault: outcome for outcome in schedule_rules.busy_after_one_fault(DEFAULT_TIMING)}
    assert list(busy) == list(scheduler_sim.FAULTS)
    assert {fault: outcome.seconds for fault, outcome in busy.items()} == {
        "none": 300,
        "sigkill before the claim": 330,
        "sigkill after the claim": 899,
        "retryable error": 630,
        "hang": 630,
        "lost 2xx": 330,
    }
    assert busy["sigkill after the claim"].story == (
        "killed 149 s after the claim, retry 4 claims the run at 599 s and may work the whole timeout"
    )


def test_the_issues_counterexample_is_refused_naming_job_schedule_gap_and_bound():
    jobs = {"nightly": dict(JOB), "every-5": {"schedule": "*/5 * * * *", "time_zone": "Europe/Madrid"}}
    message = assert_refused(
        schedule_rules.check_schedule_timing, [jobs, DEFAULT_TIMING, START], "jobs.every-5.schedule", "*/5 * * * *", ""
    )
    assert "fires only 300 s apart in Europe/Madrid (2026-01-01T00:00:00+01:00 to 2026-01-01T00:05:00+01:00)" in message
    assert "one fault can keep a run busy for 899 s (sigkill after the claim:" in message
    assert "retry 4 claims the run at 599 s and may work the whole timeout), so a run would be lost" in message


@pytest.mark.parametrize(
    ("schedule", "accepted"), [("*/15 * * * *", True), ("*/10 * * * *", False), ("0 * * * *", True)]
)
def test_the_gap_must_exceed_the_longest_busy_time(schedule, accepted):
    jobs = {"job": {"schedule": schedule, "time_zone": "Etc/UTC"}}
    if accepted:  # 900 s > 899 s
        assert schedule_rules.check_schedule_timing(jobs, DEFAULT_TIMING, START) == []
    else:
        assert_refused(
            schedule_rules.check_schedule_timing, [jobs, DEFAULT_TIMING, START], "jobs.job.schedule", schedule, ""
        )


NO_RETRIES = {**DEFAULT_TIMING, "retry_count": 0, "attempt_deadline_seconds": 1800, "function_timeout_seconds": 3600}


def test_without_retries_the_gap_must_exceed_the_timeout_and_one_failure_is_warned():
    warnings = schedule_rules.check_schedule_timing(
        {"job": {"schedule": "0 */2 * * *", "time_zone": "Etc/UTC"}}, NO_RETRIES, START
    )
    assert len(warnings) == 1 and "\n" not in warnings[0]
    assert warnings[0].startswith("retry_count=0 with max_retry_duration_seconds=0: Cloud Scheduler never retries")
    assert_refused(
        schedule_rules.check_schedule_timing,
        [{"job": {"schedule": "0 * * * *", "time_zone": "Etc/UTC"}}, NO_RETRIES, START],
        "jobs.job.schedule",
        "0 * * * *",
        "fires only 3600 s apart in Etc/UTC",
    )


def test_retry_count_0_with_a_duration_retries_and_the_duration_must_reach_past_the_lease():
    # Waits 30, 60, 120, 240, 300, 300 ...: a crash at 300 s (deadline) is retried at 330, 390 s: past the lease.
    duration_only = {**DEFAULT_TIMING, "retry_count": 0, "max_retry_duration_seconds": 1000}
    assert schedule_rules.check_schedule_timing(NIGHTLY, duration_only, START) == []
    message = assert_refused(
        schedule_rules.check_schedule_timing,
        [NIGHTLY, {**duration_only, "max_retry_duration_seconds": 400}, START],
        "max_retry_duration_seconds",
        "400",
        "with retry_count 0 it alone bounds the retries",
    )
    needed = int(message.rsplit("more than ", 1)[1])
    assert (
        schedule_rules.check_schedule_timing(
            NIGHTLY, {**duration_only, "max_retry_duration_seconds": needed + 1}, START
        )
        == []
    )
    assert_refused(
        schedule_rules.check_schedule_timing,
        [NIGHTLY, {**duration_only, "max_retry_duration_seconds": needed}, START],
        "max_retry_duration_seconds",
        str(needed),
        f"more than {needed}",
    )


def test_validate_checks_the_schedule_against_the_timing_and_returns_warnings():
    assert questions.validate(answers())["warnings"] == []
    assert questions.validate(answers(retry_count="0"))["warnings"][0].startswith("retry_count=0")
    every_5 = {"nightly": {"schedule": "*/5 * * * *", "time_zone": "Etc/UTC"}}
    assert_refused(questions.validate, [answers(jobs=every_5)], "jobs.nightly.schedule", "*/5 * * * *", "300 s apart")
    # Only the job's own numbers count: a tighter job beside a slow one passes (issue 17).
    export = {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin", "attempt_deadline_seconds": "600"}
    sync = {"schedule": "*/15 * * * *"}
    (warning,) = questions.validate(answers(jobs={"export": export, "sync": sync}))["warnings"]
    assert warning.startswith("jobs.export.schedule='0 2 * * *' in Europe/Berlin: daylight saving")  # not timing
    assert_refused(
        questions.validate,
        [answers(attempt_deadline_seconds="600", lease_seconds="", jobs={"export": export, "sync": sync})],
        "jobs.sync.schedule",
        "*/15 * * * *",
        "fires only 900 s apart",
    )


# ---------------------------------------------------------------- max_lateness_seconds and the audit (issue 12)


@pytest.mark.parametrize("value", ["60", 60, "3600", 86400 * 30])
def test_max_lateness_accepts_whole_seconds_from_a_minute(value):
    checked = rules.check_jobs({"nightly": {**JOB, "max_lateness_seconds": value}})
    assert checked == {"nightly": {**JOB, "max_lateness_seconds": int(value)}}


def test_max_lateness_is_optional():
    assert "max_lateness_seconds" not in rules.check_jobs({"nightly": dict(JOB)})["nightly"]


@pytest.mark.parametrize("value", ["59", "0", "1h", "-60", None, "60.5"])
def test_max_lateness_refuses(value):
    job = {"nightly": {**JOB, "max_lateness_seconds": value}}
    rule = "must be a whole number of seconds, at least 60 (omit it for no limit)"
    assert_refused(rules.check_jobs, [job], "jobs.nightly.max_lateness_seconds", value, rule)


def test_jobs_refuse_any_other_key_naming_the_optional_one():
    job = {**JOB, "max_lateness": 60}
    assert_refused(
        rules.check_jobs, [{"nightly": job}], "jobs.nightly", job, "nothing else but attempt_deadline_seconds, catch_up"
    )


# ---------------------------------------------------------------- overlap (proxy targets, issue 18)


@pytest.mark.parametrize("value", ["skip", "start"])
def test_overlap_accepts_skip_and_start(value):
    assert rules.check_jobs({"nightly": {**JOB, "overlap": value}}) == {"nightly": {**JOB, "overlap": value}}


@pytest.mark.parametrize("value", ["queue", "", "Skip", None, ["skip"], True])
def test_overlap_refuses_anything_else(value):
    job = {"nightly": {**JOB, "overlap": value}}
    assert_refused(rules.check_jobs, [job], "jobs.nightly.overlap", value, "must be one of skip, start")


def test_overlap_rules_are_the_handlers():
    """The bake hook and the baked config.py accept the same job choices (overlap among them): one definition
    and one check, in rules.py (config.py takes them as rules.check_config checked them)."""
    config_text = (TEMPLATE_PROJECT / "config.py").read_text()
    assert "rules.check_config(raw, schedules=schedules)" in config_text
    assert "**{key: job[key] for key in rules.JOB_CHOICES if key in job}" in config_text
    assert "check_choice" not in config_text


@pytest.mark.parametrize("minutes", rules.AUDIT_INTERVALS_MINUTES)
def test_audit_interval_accepts_each_interval_that_divides_an_hour_or_a_day(minutes):
    assert questions.validate(answers(audit_interval_minutes=str(minutes)))["audit_interval_minutes"] == minutes


@pytest.mark.parametrize("minutes", ["7", "0", "90", "1440", "x", "-5"])
def test_audit_interval_refuses_others(minutes):
    assert_refused(questions.validate, [answers(audit_interval_minutes=minutes)], "audit_interval_minutes", minutes, "")


def test_audit_interval_plus_settle_must_fit_in_the_lookback():
    # Defaults: settle = lease 360 + retry window 3300 = 3660 s; the lookback is min(1 day, retention).
    fits = answers(audit_interval_minutes="5", retention_seconds=str(3660 + 300))  # 5 min + 3660 s fit exactly
    assert questions.validate(fits)["audit_interval_minutes"] == 5
    message = assert_refused(
        questions.validate,
        [answers(audit_interval_minutes="5", retention_seconds=str(3660 + 299))],
        "audit_interval_minutes",
        "5",
        "the interval (300 s) + lease + retry window (3660 s) must fit in the audit's lookback",
    )
    assert "(min(1 day, retention_seconds) = 3959 s)" in message
    # A day is the most the audit looks back, however long the retention.
    # settle = lease 17000 + retry window (6 * 1800 + 5 * 3600 = 28800) = 45800 s; + 12 h > 1 day.
    slow = answers(audit_interval_minutes="720", lease_seconds="17000", function_timeout_seconds="1800",
                   attempt_deadline_seconds="1800", min_backoff_seconds="3600", max_backoff_seconds="3600",
                   retention_seconds="604800")  # fmt: skip
    assert_refused(questions.validate, [slow], "audit_interval_minutes", "720", "= 86400 s)")


# ---------------------------------------------------------------- paused and catch_up (issue 18)

JOB_FLAGS = [key for key, allowed in rules.JOB_CHOICES.items() if allowed == (False, True)]


@pytest.mark.parametrize(("value", "expected"), [(True, True), (False, False), ("true", True), ("False", False)])
@pytest.mark.parametrize("flag", JOB_FLAGS)
def test_a_job_flag_is_true_or_false(flag, value, expected):
    assert rules.check_jobs({"nightly": {**JOB, flag: value}}) == {"nightly": {**JOB, flag: expected}}


@pytest.mark.parametrize("value", ["yes", 1, "", None])
@pytest.mark.parametrize("flag", JOB_FLAGS)
def test_a_job_flag_refuses_anything_else(flag, value):
    job = {"nightly": {**JOB, flag: value}}
    assert_refused(rules.check_jobs, [job], f"jobs.nightly.{flag}", value, "true or false")


# ---------------------------------------------------------------- config.yaml: per-job timing (issue 17)

CONFIG = {
    "slug": "nightly-report",
    "project": "my-gcp-project",
    "region": "europe-west1",
    "target": "function",
    "database": "nightly-report-db",
    "collection": "nightly-report-runs",
    "defaults": {
        "attempt_deadline_seconds": 300,
        "retry_count": 5,
        "min_backoff_seconds": 30,
        "max_backoff_seconds": 300,
        "max_doublings": 3,
        "max_retry_duration_seconds": 0,
    },
    "jobs": {"export": {"schedule": "0 2 * * *", "time_zone": "Europe/Berlin", "attempt_deadline_seconds": 600},
             "sync": {"schedule": "*/15 * * * *"}},
}  # fmt: skip


def test_derive_timing_gives_the_defaults_the_answers_had():
    """The formulas that were Jinja in cookiecutter.json, now once in Python: 300 s -> 360 / 30 / 300."""
    assert rules.derive_timing(300) == {"lease_seconds": 360, "min_backoff_seconds": 30, "max_backoff_seconds": 300}
    assert rules.derive_timing(1800, 0) == {
        "lease_seconds": 1860,
        "min_backoff_seconds": 30,
        "max_backoff_seconds": 300,
    }
    # With 5 retries the waits outlast the lease for every deadline Scheduler takes.
    for deadline in range(*rules.ATTEMPT_DEADLINE_RANGE, 15):
        derived = rules.derive_timing(deadline)
        values = {**TIMING, **derived, "attempt_deadline_seconds": deadline, "retention_seconds": 10**6}
        values.pop("function_timeout_seconds", None)
        rules.check_timing(values)


def test_each_job_is_checked_with_its_own_deadline_and_lease():
    checked = rules.check_config(CONFIG, dt.date(2026, 1, 1))
    export, sync = checked["jobs"]["export"]["timing"], checked["jobs"]["sync"]["timing"]
    assert (export["attempt_deadline_seconds"], export["lease_seconds"]) == (600, 660)
    assert (sync["attempt_deadline_seconds"], sync["lease_seconds"]) == (300, 360)
    (warning,) = checked["warnings"]  # no timing warning: the one is export's daylight saving dates (Berlin, 02:00)
    assert warning.startswith("jobs.export.schedule='0 2 * * *' in Europe/Berlin: daylight saving")


def test_one_deadline_for_every_job_refuses_the_sync_naming_a_deadline_that_passes():
    """Today's trap: with attempt_deadline_seconds 600 for all, */15 is refused; the refusal names the job, its
    numbers and the largest deadline that passes, which passes (and one more second does not)."""
    config = {**CONFIG, "defaults": {**CONFIG["defaults"], "attempt_deadline_seconds": 600}}
    error = refusal(rules.check_config, config, dt.date(2026, 1, 1))
    message = str(error)
    assert message.startswith("jobs.sync.schedule='*/15 * * * *': fires only 900 s apart"), message
    assert "with attempt_deadline_seconds 600, lease_seconds 660 and retry_count 5" in message
    largest = int(re.search(r"an attempt_deadline_seconds of at most (\d+)", message)[1])
    needed = int(re.search(r"at least (\d+) s apart", message)[1])
    assert needed > 900
    sync = {"schedule": "*/15 * * * *", "attempt_deadline_seconds": largest}
    rules.check_config({**config, "jobs": {"sync": sync}}, dt.date(2026, 1, 1))
    too_long = {**sync, "attempt_deadline_seconds": largest + 1}
    refusal(rules.check_config, {**config, "jobs": {"sync": too_long}}, dt.date(2026, 1, 1))


def test_a_scheduler_number_in_neither_the_job_nor_defaults_is_refused_with_a_value():
    """Terraform takes the Scheduler numbers as written: none is derived where Terraform cannot see it."""
    defaults = {key: value for key, value in CONFIG["defaults"].items() if key != "min_backoff_seconds"}
    error = refusal(rules.check_config, {**CONFIG, "defaults": defaults})
    assert error.field == "defaults.min_backoff_seconds"  # the audit job takes the defaults too
    assert "e.g. 30" in str(error)


def test_a_jobs_lease_follows_its_own_deadline_unless_it_or_defaults_say():
    assert rules.resolve_job_timing("j", {"attempt_deadline_seconds": 900}, CONFIG["defaults"])["lease_seconds"] == 960
    own = rules.resolve_job_timing("j", {"lease_seconds": 1000}, CONFIG["defaults"])
    assert own["lease_seconds"] == 1000
    assert rules.resolve_job_timing("j", {}, {**CONFIG["defaults"], "lease_seconds": 500})["lease_seconds"] == 500
    mine = rules.resolve_job_timing(
        "j", {"attempt_deadline_seconds": 600}, {**CONFIG["defaults"], "lease_seconds": 500}
    )
    assert mine["lease_seconds"] == 660


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"jobs": {"j": {"schedule": "0 3 * * *", "attempt_deadline_seconds": 10}}}, "jobs.j.attempt_deadline_seconds"),
        ({"jobs": {"j": {"schedule": "0 3 * * *", "lease_seconds": 320}}}, "jobs.j.lease_seconds"),
        ({"jobs": {"j": {"schedule": "0 3 * * *", "paused": "yes"}}}, "jobs.j.paused"),
        ({"defaults": {"retries": 3}}, "defaults"),
        ({"serve": [{"project": "x"}]}, "serve"),
        ({"retention_seconds": 60}, "retention_seconds"),
        ({"target": "lambda"}, "target"),  # the handler would not know whether to follow an execution
    ],
)
def test_config_refuses_bad_values_naming_the_key(change, field):
    assert refusal(rules.check_config, {**CONFIG, **change}).field == field


def test_config_from_answers_writes_the_derived_numbers_as_defaults():
    config = questions.config_from_answers(answers(lease_seconds="", min_backoff_seconds="", max_backoff_seconds=""))
    assert config["defaults"] == {
        "attempt_deadline_seconds": "300",
        "retry_count": "5",
        "min_backoff_seconds": 30,
        "max_backoff_seconds": 300,
        "max_doublings": "3",
        "max_retry_duration_seconds": "0",
    }
    assert questions.config_from_answers(answers(lease_seconds="1000"))["defaults"]["lease_seconds"] == "1000"


# ---------------------------------------------------------------- a cron that never fires, daylight saving (i16accept)


@pytest.mark.parametrize("schedule", ["0 0 30 2 *", "0 0 31 4,6,9,11 *", "0 0 31 2 */2", "0 0 30,31 feb *"])
def test_a_schedule_that_never_fires_is_refused(schedule):
    assert_refused(rules.check_schedule, ["nightly", schedule], "jobs.nightly.schedule", schedule, "never fires")
    # The function's cronsim refuses it too: every delivery would answer misconfigured.
    with pytest.raises(cronsim.CronSimError):
        cronsim.CronSim(schedule, dt.datetime(2026, 1, 1))


@pytest.mark.parametrize("schedule", ["0 0 29 2 *", "0 0 30 2 1", "0 0 31 * *", "0 0 31 1-2 *", "0 0 * 2 1"])
def test_a_schedule_that_fires_rarely_is_accepted(schedule):
    assert rules.check_schedule("nightly", schedule) == schedule
    assert next(cronsim.CronSim(schedule, dt.datetime(2026, 1, 1))) < dt.datetime(2029, 1, 1)


def test_dst_gap_accepts_each_rule_and_refuses_others():
    job = {"schedule": "30 2 * * *", "time_zone": "Europe/Berlin"}
    for rule in ("end_of_gap", "skip"):
        assert rules.check_jobs({"j": {**job, "dst_gap": rule}})["j"]["dst_gap"] == rule
    bad = [{"j": {**job, "dst_gap": "later"}}]
    assert_refused(rules.check_jobs, bad, "jobs.j.dst_gap", "later", "must be one of end_of_gap, skip")


def test_dst_hits_name_each_date_a_zone_repeats_or_skips_a_fire_time():
    hits = schedule_rules.dst_hits("30 2 * * *", "Europe/Berlin", START, years=2)
    assert [(str(hit.day), hit.kind, [f"{wall:%H:%M}" for wall in hit.walls]) for hit in hits] == [
        ("2026-03-29", "skipped", ["02:30"]),
        ("2026-10-25", "repeated", ["02:30"]),
        ("2027-03-28", "skipped", ["02:30"]),
        ("2027-10-31", "repeated", ["02:30"]),
    ]
    assert schedule_rules.dst_hits("30 3 * * *", "Europe/Berlin", START) == []  # 03:30 happens once every day
    assert schedule_rules.dst_hits("30 2 * * *", "Etc/UTC", START) == []


@pytest.mark.parametrize(
    ("schedule", "zone"),
    [
        ("30 2 * * *", "Europe/Berlin"),
        ("0 * * * *", "America/New_York"),
        ("15 1,2 * * 0", "Australia/Lord_Howe"),
        ("*/20 0-3 * * *", "America/Santiago"),
        ("30 1 * 11 0", "America/New_York"),
    ],
)
def test_dst_hits_agree_with_the_bakes_schedules_module(schedule, zone):
    """Two expansions, one rule: the hook's (stdlib, it runs before any dependency exists) and the function's."""
    hits = {(hit.day, hit.kind) for hit in schedule_rules.dst_hits(schedule, zone, START, years=3)}
    since, until = (dt.datetime.combine(day, dt.time(), dt.UTC) for day in (START, dt.date(2029, 1, 1)))
    fires = schedules.fire_times(schedules.Schedule(schedule, zone), since, until)
    kinds = {schedules.Dst.AMBIGUOUS: "repeated", schedules.Dst.NONEXISTENT: "skipped"}
    assert hits and hits == {(fire.wall.date(), kinds[fire.dst]) for fire in fires if fire.dst is not None}


def test_validate_warns_of_every_daylight_saving_date_of_a_job():
    ny = {"nightly": {"schedule": "30 1 * * *", "time_zone": "America/New_York"}}
    (warning,) = questions.validate(answers(jobs=ny))["warnings"]
    assert warning.startswith("jobs.nightly.schedule='30 1 * * *' in America/New_York: daylight saving")
    assert warning.count("(repeated 01:30)") == schedule_rules.DST_WARNING_YEARS and "\n" not in warning
    skip = {"nightly": {"schedule": "30 2 * * *", "time_zone": "Europe/Berlin", "dst_gap": "skip"}}
    (warning,) = questions.validate(answers(jobs=skip))["warnings"]
    assert "(skipped 02:30)" in warning and "a skipped one not at all (dst_gap=skip)" in warning


# ---------------------------------------------------------------- max_execution_seconds (issue 25, proxy targets)


def test_max_execution_defaults_to_a_day_within_the_retention_less_two_audit_intervals():
    """Every job gets one (the function reads it as config.Job.max_execution): a day, unless the retention is too
    short for two audits to report an overdue execution before its record could expire."""
    checked = rules.check_config(CONFIG, dt.date(2026, 1, 1))
    assert {job["max_execution_seconds"] for job in checked["jobs"].values()} == {86400}
    short = rules.check_config({**CONFIG, "retention_seconds": 86400}, dt.date(2026, 1, 1))
    assert {job["max_execution_seconds"] for job in short["jobs"].values()} == {86400 - 2 * 3600}
    assert rules.max_execution_seconds("nightly", None, 129600, 720) == 129600 - 2 * 720 * 60


@pytest.mark.parametrize("value", [60, "3600", 604800 - 2 * 3600])
def test_max_execution_accepts_a_minute_to_the_retention_less_two_audit_intervals(value):
    sync = {**CONFIG["jobs"]["sync"], "max_execution_seconds": value}
    checked = rules.check_config({**CONFIG, "jobs": {**CONFIG["jobs"], "sync": sync}}, dt.date(2026, 1, 1))
    assert checked["jobs"]["sync"]["max_execution_seconds"] == int(value)


@pytest.mark.parametrize("value", [59, 604800 - 2 * 3600 + 1, "a day", -1, 1.5])
def test_max_execution_refuses_naming_the_retention(value):
    sync = {**CONFIG["jobs"]["sync"], "max_execution_seconds": value}
    config = {**CONFIG, "jobs": {**CONFIG["jobs"], "sync": sync}}
    rule = "must be a whole number of seconds from 60 to 597600 (retention_seconds 604800 less two audit intervals"
    assert_refused(rules.check_config, [config, dt.date(2026, 1, 1)], "jobs.sync.max_execution_seconds", value, rule)
