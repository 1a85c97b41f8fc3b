"""Bad input never causes a 5xx: any headers give a 400 with a one-line reason, or a correct run.

Most examples call read_run_key directly (no I/O, so many examples are cheap); fewer go through
HTTP (the Flask test client, against the emulator). Header values reach Cloud Scheduler's 80 KB limit
in read_run_key and through the test client; a real server caps them lower: gunicorn, which
functions-framework runs, refuses a header line over 8190 bytes with its own 400 before the function
runs, and Cloud Run's front end has its own cap. HTTP carries header values as latin-1 without CR/LF,
so the HTTP-level examples stay within that; read_run_key gets any unicode, control characters included.
"""

import dataclasses
import datetime as dt
import re

import pytest
from conftest import PROJECT, scheduler_headers
from google.cloud import firestore
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

import config
from keys import JOB_NAME, JOB_NAME_HEADER, LOCATION_HEADER, PROJECT_HEADER, SCHEDULE_TIME_HEADER, read_run_key
from outcomes import InvalidDelivery

CONFIG = dataclasses.replace(config.load(), project=PROJECT)
NOW = dt.datetime(2026, 6, 15, 12, 0, tzinfo=dt.UTC)
SCHEDULER_HEADER_LIMIT = 80 * 1024
HEADER_NAMES = (JOB_NAME_HEADER, SCHEDULE_TIME_HEADER, PROJECT_HEADER, LOCATION_HEADER)
HEX64 = re.compile(r"[0-9a-f]{64}")

# No example database: each run explores afresh, and a failure prints its falsifying example.
fast = settings(max_examples=100, deadline=None, database=None)
over_http = settings(
    max_examples=15, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)

any_text = st.text(st.characters(codec="utf-8"), max_size=120)
# Up to Scheduler's 80 KB: a short random piece repeated, so that generating one stays cheap.
huge_text = st.builds(lambda piece, times: (piece * times)[:SCHEDULER_HEADER_LIMIT], any_text, st.integers(1, 3000))
header_name = st.one_of(
    st.sampled_from(HEADER_NAMES).flatmap(lambda name: st.sampled_from([name, name.lower(), name.upper()])),
    any_text,
)
header_value = st.one_of(any_text, huge_text)


@st.composite
def rfc3339_times(draw, around=NOW, spread=dt.timedelta(days=400)):
    """(text, the instant it must key, or None for a leap second): well-formed RFC 3339 times with odd
    offsets, fraction lengths (past microseconds too) and letter cases, and now and then a leap second."""
    instant = around + draw(st.timedeltas(-spread, spread))
    offset = dt.timedelta(minutes=draw(st.integers(-23 * 60 - 59, 23 * 60 + 59)))
    local = instant.astimezone(dt.timezone(offset))
    second = 60 if draw(st.integers(0, 9)) == 0 else local.second
    digits = draw(st.integers(0, 12))
    fraction = "." + f"{local.microsecond:06d}{draw(st.integers(0, 999999)):06d}"[:digits] if digits else ""
    sign = "+" if offset >= dt.timedelta(0) else "-"
    minutes = abs(int(offset.total_seconds())) // 60
    utc_spellings = st.sampled_from(["Z", "z", "+00:00", "-00:00"])
    zone = draw(utc_spellings) if not minutes else f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    separator = draw(st.sampled_from("Tt"))
    text = f"{local:%Y-%m-%d}{separator}{local:%H:%M}:{second:02d}{fraction}{zone}"
    if second == 60:
        return text, None
    return text, instant.replace(microsecond=int((fraction[1:] + "000000")[:6]))


def reason_of(headers):
    """read_run_key's answer: the run key, or the refusal's message. Any other exception fails the test."""
    try:
        return read_run_key(headers, CONFIG, NOW)
    except InvalidDelivery as refusal:
        return str(refusal)


def assert_one_line_reason(reason):
    assert reason and len(reason.splitlines()) == 1 and "\n" not in reason and "\r" not in reason
    assert len(reason) < 1000  # 80 KB values are cut short in the reason


def assert_well_formed_key(key):
    assert JOB_NAME.fullmatch(key.job_name) and HEX64.fullmatch(key.run_id)
    assert NOW - CONFIG.retention <= key.schedule_time <= NOW + CONFIG.max_future


@fast
@given(st.dictionaries(header_name, header_value, max_size=6))
@example({JOB_NAME_HEADER: "nightly", SCHEDULE_TIME_HEADER: "0001-01-01T00:00:00+01:00"})
@example({JOB_NAME_HEADER: "nightly", SCHEDULE_TIME_HEADER: "9999-12-31T23:59:59-01:00"})
def test_any_headers_give_a_key_or_a_one_line_refusal(headers):
    answer = reason_of(headers)
    if isinstance(answer, str):
        assert_one_line_reason(answer)
    else:
        assert_well_formed_key(answer)


@fast
@given(
    job=st.one_of(any_text, huge_text), time=st.one_of(rfc3339_times().map(lambda pair: pair[0]), any_text, huge_text)
)
def test_any_job_name_and_time_value_give_a_key_or_a_refusal_naming_the_header(job, time):
    answer = reason_of(scheduler_headers(job, time))
    if isinstance(answer, str):
        assert_one_line_reason(answer)
        assert answer.startswith(f"{JOB_NAME_HEADER}=") or answer.startswith(f"{SCHEDULE_TIME_HEADER}=")
    else:
        assert_well_formed_key(answer)
        assert answer.job_name == job


@fast
@given(rfc3339_times())
def test_rfc3339_offsets_and_fractions_key_the_instant_and_leap_seconds_are_refused(time):
    text, instant = time
    answer = reason_of(scheduler_headers("nightly", text))
    if instant is None:
        assert "leap second" in answer
    elif not CONFIG.retention > NOW - instant >= -CONFIG.max_future:  # the window of test_window.py
        assert "older than the retention window" in answer or "in the future" in answer
    else:
        assert answer.schedule_time == instant  # in UTC; fraction digits past microseconds are cut
        # Every spelling of one instant is one run.
        assert reason_of(scheduler_headers("nightly", instant.isoformat())).run_id == answer.run_id


@fast
@given(
    st.lists(
        st.sampled_from(["/", "..", "%2F", "%2f", "%2e%2e", "\\", "a", "runs", "_", "-", "\x00", "?", "#"]),
        min_size=1,
        max_size=8,
    )
)
def test_job_names_cannot_name_a_path(parts):
    job = "".join(parts)
    answer = reason_of(scheduler_headers(job, "2026-06-15T12:00:00Z"))
    if isinstance(answer, str):
        assert answer.startswith(f"{JOB_NAME_HEADER}=") and "Cloud Scheduler job id" in answer
    else:  # accepted only without any path-like character; its document id is a digest either way
        assert not set(job) & set("/.%\\\x00?#") and HEX64.fullmatch(answer.run_id)


latin1_value = st.text(st.characters(codec="latin-1", exclude_characters="\r\n"), max_size=60)
http_job = st.one_of(latin1_value, st.sampled_from(["nightly", "../runs", "a/b", "a%2Fb", "..", "x" * 600]))
recent = rfc3339_times(around=dt.datetime.now(dt.UTC), spread=dt.timedelta(days=10)).map(lambda pair: pair[0])
http_time = st.one_of(recent, latin1_value)


@pytest.fixture
def collections_before(collection):
    client = firestore.Client(project=PROJECT, database=CONFIG.database)
    return client, {c.id for c in client.collections()}


@over_http
@given(job=http_job, time=http_time, filler=st.integers(0, SCHEDULER_HEADER_LIMIT - 200))
@example(job="nightly", time=dt.datetime.now(dt.UTC).isoformat(), filler=SCHEDULER_HEADER_LIMIT - 200)
def test_over_http_bad_input_is_a_400_with_one_line_and_records_stay_in_the_collection(
    http, collection, collections_before, work, job, time, filler
):
    client, before = collections_before
    headers = scheduler_headers(job, time, **{"X-Padding": "p" * filler})  # the request nears Scheduler's limit

    response = http.post("/", headers=headers)

    assert response.status_code in (200, 400), response.text
    assert response.text.count("\n") == 1
    if response.status_code == 400:
        assert response.text.startswith("invalid_delivery: X-CloudScheduler-")
    else:
        assert response.text.startswith(("processed", "duplicate"))
    # Records land in the test collection only, under digest ids, with nothing nested below them.
    stored = list(collection.list_documents())
    assert all(HEX64.fullmatch(doc.id) and not list(doc.collections()) for doc in stored)
    assert {c.id for c in client.collections()} - before <= {collection.id}
