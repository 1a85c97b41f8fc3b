"""Unit tests of hooks/rules.py: every rule accepts its edge values and refuses one step past them.

Each refusal must be a RuleError whose message is one line: `field=<value repr>: <rule>`.
"""

from __future__ import annotations

import pytest
import rules
from live_server import RetryPolicy  # the baked fault tests' model of Scheduler's retries (tools/live_server.py)


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
    assert rules.check_slug(slug) == slug


@pytest.mark.parametrize("slug", ["ab", "a" * 21, "1abc", "-abc", "abc-", "Abc", "ab_c", "ab c", "", "-", "üabc", None])
def test_slug_refuses(slug):
    assert_refused(rules.check_slug, [slug], "project_slug", slug, SLUG_RULE)


PROJECT_RULE = (
    "6-30 chars of lowercase letters, digits and hyphens, starts with a letter and does not end with a hyphen"
)


@pytest.mark.parametrize("project_id", ["abcdef", "a" + "b" * 29, "my-gcp-project", "a-1-b2", "abc-d1"])
def test_project_id_accepts_6_to_30_chars(project_id):
    assert rules.check_project_id(project_id) == project_id


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
    assert_refused(rules.check_project_id, [project_id], "gcp_project_id", project_id, PROJECT_RULE)


@pytest.mark.parametrize(
    "region", ["europe-west1", "us-central1", "northamerica-northeast2", "europe-west10", "me-central2"]
)
def test_region_accepts(region):
    assert rules.check_region(region) == region


@pytest.mark.parametrize(
    "region", ["europe", "EUROPE-WEST1", "europe-west", "europe-west100", "us central1", "europe-west1-b", ""]
)
def test_region_refuses(region):
    assert_refused(rules.check_region, [region], "region", region, "must be a GCP region")


@pytest.mark.parametrize("target", rules.TARGETS)
def test_target_accepts_each_target(target):
    assert rules.check_target(target) == target


@pytest.mark.parametrize("target", ["Function", "lambda", "", "function "])
def test_target_refuses(target):
    assert_refused(rules.check_target, [target], "target", target, "function, cloud_run_job, workflow")


@pytest.mark.parametrize("name", ["Nightly Report", 'Bob\'s "Quarterly" \\ Report', "Informe 🚀 日本語", "x"])
def test_project_name_accepts_any_one_line_text(name):
    assert rules.check_project_name(name) == name


@pytest.mark.parametrize(
    "name", ["", "   ", "two\nlines", "tab\there", "bell\x07", "del\x7f", None, "line\u2028separator", "para\u2029sep"]
)
def test_project_name_refuses_blank_or_control_characters(name):
    assert_refused(rules.check_project_name, [name], "project_name", name, "one line of non-blank text")


@pytest.mark.parametrize("database", ["(default)", "dedup-runs", "abcd", "a" + "b" * 62, "db-x9"])
def test_database_accepts(database):
    assert rules.check_database(database) == database


@pytest.mark.parametrize("database", ["abc", "a" + "b" * 63, "1abc", "abcd-", "Dedup", "dedup_runs", "(DEFAULT)", ""])
def test_database_refuses(database):
    assert_refused(rules.check_database, [database], "firestore_database", database, "(default) or 4-63 chars")


@pytest.mark.parametrize("collection", ["scheduler_runs", "Runs-2", "a", "_x", "__x", "x__", "___", "a" * 100])
def test_collection_accepts(collection):
    assert rules.check_collection(collection) == collection


@pytest.mark.parametrize("collection", ["a" * 101, "", "a/b", "a.b", "..", "runs ü", "__x__", "____"])
def test_collection_refuses(collection):
    assert_refused(
        rules.check_collection, [collection], "firestore_collection", collection, "1-100 chars of letters, digits"
    )


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
    assert_refused(rules.check_jobs, [jobs], "jobs", jobs, "must be a non-empty JSON object")


@pytest.mark.parametrize("job_id", ["Nightly", "night_ly", "-nightly", "a" * 41, "", "ni ght"])
def test_jobs_refuses_bad_job_ids(job_id):
    assert_refused(rules.check_jobs, [{job_id: JOB}], "jobs", job_id, "each job id must be 1-40 chars")


@pytest.mark.parametrize(
    "job",
    [
        {"schedule": "0 3 * * *"},
        {"time_zone": "Etc/UTC"},
        {**JOB, "retry_count": 1},
        {},
        "0 3 * * *",
        ["0 3 * * *", "Etc/UTC"],
    ],
)
def test_jobs_refuses_jobs_without_exactly_schedule_and_time_zone(job):
    assert_refused(rules.check_jobs, [{"nightly": job}], "jobs.nightly", job, '{"schedule": ..., "time_zone": ...}')


def test_jobs_checks_each_schedule_and_time_zone():
    jobs = {"ok": JOB, "bad": {"schedule": "every 5 minutes", "time_zone": "Etc/UTC"}}
    assert_refused(rules.check_jobs, [jobs], "jobs.bad.schedule", "every 5 minutes", GROC_REASON)
    jobs = {"ok": JOB, "bad": {"schedule": "0 3 * * *", "time_zone": "Europe/Atlantis"}}
    assert_refused(rules.check_jobs, [jobs], "jobs.bad.time_zone", "Europe/Atlantis", "IANA time zone")


# ---------------------------------------------------------------- numbers and timing


@pytest.mark.parametrize(("text", "number"), [("0", 0), ("42", 42), (300, 300), ("007", 7)])
def test_parse_seconds_reads_whole_numbers(text, number):
    assert rules.parse_seconds("lease_seconds", text) == number


# " 42 " too: the templates render numbers as given, and a padded one breaks dedup.py and `terraform fmt`.
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
        f"must be at least function_timeout_seconds + {rules.LEASE_MARGIN_SECONDS} ({shortest})",
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
    assert message.endswith("raise retry_count or min_backoff_seconds, or shorten lease_seconds"), message


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
    # Nothing retries a crashed run then, however long the lease: an operator re-runs it (docs/operations.md).
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
        "firestore_collection": "scheduler_runs",
        **overrides,
    }


def test_validate_returns_normalised_answers():
    checked = rules.validate(answers(retry_count="5"))  # cookiecutter hands numbers over as text
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
        ("firestore_collection", "a/b"),
    ],
)
def test_validate_refuses_each_field(field, value):
    assert_refused(rules.validate, [answers(**{field: value})], field, value, "")


def test_validate_reports_the_first_broken_rule_in_prompt_order():
    error = refusal(rules.validate, answers(gcp_project_id="Bad", region="mars", firestore_collection="a/b"))
    assert error.field == "gcp_project_id"


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
        rules.check_jobs, [{"nightly": job}], "jobs.nightly", job, 'nothing else but an optional "max_lateness_seconds"'
    )


@pytest.mark.parametrize("minutes", rules.AUDIT_INTERVALS_MINUTES)
def test_audit_interval_accepts_each_interval_that_divides_an_hour_or_a_day(minutes):
    assert rules.validate(answers(audit_interval_minutes=str(minutes)))["audit_interval_minutes"] == minutes


@pytest.mark.parametrize("minutes", ["7", "0", "90", "1440", "x", "-5"])
def test_audit_interval_refuses_others(minutes):
    assert_refused(rules.validate, [answers(audit_interval_minutes=minutes)], "audit_interval_minutes", minutes, "")


def test_audit_interval_plus_settle_must_fit_in_the_lookback():
    # Defaults: settle = lease 360 + retry window 3300 = 3660 s; the lookback is min(1 day, retention).
    fits = answers(audit_interval_minutes="5", retention_seconds=str(3660 + 300))  # 5 min + 3660 s fit exactly
    assert rules.validate(fits)["audit_interval_minutes"] == 5
    message = assert_refused(
        rules.validate,
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
    assert_refused(rules.validate, [slow], "audit_interval_minutes", "720", "= 86400 s)")
