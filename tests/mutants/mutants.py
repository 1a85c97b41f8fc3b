"""The mutants: one small change each to the code whose rules the suites must hold; `run.py` applies them.

A mutant is (id, file, the exact original snippet, its replacement, the rule it breaks, the narrowest
tests that must fail). `file` is "baked/<path>" for a file of a default bake (the rendered dedup.py,
main.py), else a path in the template. An original that is missing, or not unique, is reported as an
error by run.py, never skipped: fix the snippet when the code moves.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Mutant:
    id: str
    file: str
    original: str
    replacement: str
    rule: str
    tests: tuple[str, ...]


HANDLER = "tests/test_handler.py"
PROTOCOL = "tests/test_protocol.py"
RULES_TESTS = ("tests/test_rules.py", "tests/test_hooks.py")
VALIDATIONS = "tests/test_terraform_validations.py"


def handler(*names: str) -> tuple[str, ...]:
    return tuple(f"{HANDLER}::{name}" for name in names)


def validations(*cases: str) -> tuple[str, ...]:
    """The validations test, planning only these cases (plus the block enumeration: a deleted block)."""
    return (VALIDATIONS, "-k", " or ".join(("every_validation_block", *cases)))


DEDUP = "baked/dedup.py"
MAIN = "baked/main.py"
RULES = "hooks/rules.py"
VARIABLES = "terraform/modules/scheduled-dedup/variables.tf"
CORE_MAIN = "terraform/modules/scheduled-dedup/main.tf"
JOB_VARIABLES = "terraform/modules/scheduled-dedup-cloud-run-job/variables.tf"
WORKFLOW_VARIABLES = "terraform/modules/scheduled-dedup-workflow/variables.tf"
STORE_ERRORS = "tests/test_store_errors.py::test_every_status_at_every_call_gives_one_outcome_line"
LATENESS = "tests/test_audit.py::test_a_delivery_past_max_lateness_is_recorded_skipped_and_never_runs"

MUTANTS = [
    # --- dedup.py: the three double-run holes of issue 10 --------------------------------------------------
    Mutant(
        "takeover-unguarded",
        DEDUP,
        "write_time = self.records.update_if_unchanged(ref, takeover, since=snapshot.update_time)",
        "write_time = self._call(ref.update, takeover, retry=None).update_time",
        "a takeover is guarded by the update time it read: two deliveries racing for one expired lease take it once",
        handler("test_two_deliveries_racing_for_one_expired_lease_take_it_over_once"),
    ),
    Mutant(
        "expire-at-from-claim-time",
        DEDUP,
        '"expire_at": max(now, key.schedule_time) + self.config.retention,',
        '"expire_at": now + self.config.retention,',
        "a forced run's record lives until its schedule time + the retention",
        handler("test_a_forced_run_more_than_the_retention_ahead_makes_the_real_delivery_a_duplicate"),
    ),
    Mutant(
        "gone-then-claim-unconditionally",
        DEDUP,
        '            raise InProgress("the run was released while this delivery claimed it; retry")',
        "            record = self._claim_record(key, attempt_id, attempt=1, now=now)\n"
        "            result = self._call(ref.set, record, retry=None)\n"
        "            return Claim(key, attempt_id, 1, result.update_time)",
        "a record released between a failed create and the read is left to the next claim (409), never overwritten",
        handler("test_a_release_and_a_new_claim_between_a_failed_create_and_its_read_leave_the_new_claim_alone"),
    ),
    # --- dedup.py: writes are never retried by the client -----------------------------------------------
    Mutant(
        "create-retried",
        DEDUP,
        "self._call(ref.create, record, retry=None,",
        "self._call(ref.create, record,",
        "the claim's create is not retried by the client",
        handler(
            "test_no_write_goes_out_with_a_retry_policy",
            "test_firestore_unreachable_answers_500_without_running_the_work",
        ),
    ),
    Mutant(
        "takeover-retried",
        DEDUP,
        "write_time = self.records.update_if_unchanged(ref, takeover, since=snapshot.update_time)",
        "guard = self.client.write_option(last_update_time=snapshot.update_time)\n"
        "            write_time = self._call(ref.update, takeover, option=guard, answers=GUARD_FAILED).update_time",
        "a takeover's update is not retried by the client",
        handler("test_no_write_goes_out_with_a_retry_policy"),
    ),
    Mutant(
        "guarded-update-retried",
        DEDUP,
        "self._call(ref.update, fields, option=option, retry=None,",
        "self._call(ref.update, fields, option=option,",
        "a guarded update (a finish, a takeover) is not retried by the client (a retried finish reports superseded)",
        handler("test_no_write_goes_out_with_a_retry_policy"),
    ),
    Mutant(
        "release-retried",
        DEDUP,
        "self._call(ref.delete, option=option, retry=None,",
        "self._call(ref.delete, option=option,",
        "a release is not retried by the client",
        handler("test_no_write_goes_out_with_a_retry_policy"),
    ),
    Mutant(
        "read-not-retried",
        DEDUP,
        "snapshot = self._call(ref.get, retry=READ_RETRY)",
        "snapshot = self._call(ref.get, retry=None)",
        "the claim's read (it writes nothing) is retried on a transient error",
        handler("test_the_claims_read_is_retried_on_a_transient_error"),
    ),
    Mutant(
        "rpc-timeout-30s",
        DEDUP,
        "RPC_TIMEOUT_SECONDS = 5.0",
        "RPC_TIMEOUT_SECONDS = 30.0",
        "a hung store answers 500 within one bounded deadline",
        ("tests/test_outage.py::test_hung_store_answers_500_within_the_deadline_and_the_run_proceeds_once_after",),
    ),
    # --- dedup.py: the state machine ---------------------------------------------------------------------
    Mutant(
        "expired-at-expire-at-not-absent",
        DEDUP,
        'if record["expire_at"] <= now:',
        'if record["expire_at"] < now:',
        "a record counts as absent from expire_at on",
        (f"{PROTOCOL}::test_decide",),
    ),
    Mutant(
        "expired-record-counts",
        DEDUP,
        '    if record["expire_at"] <= now:  # TTL deletes lazily; an expired record counts as absent\n'
        "        return Decision.TAKE_OVER\n",
        "",
        "a record past expire_at counts as absent (TTL deletes lazily)",
        (f"{PROTOCOL}::test_decide", *handler("test_record_past_expire_at_counts_as_absent")),
    ),
    Mutant(
        "failed-run-replayed",
        DEDUP,
        'if record["status"] in (Status.COMPLETED, Status.FAILED, Status.SKIPPED):',
        'if record["status"] in (Status.COMPLETED, Status.SKIPPED):',
        "a terminally failed run is never run again",
        (f"{PROTOCOL}::test_decide",),
    ),
    Mutant(
        "lease-live-at-its-end",
        DEDUP,
        'if record["lease_expires"] > now:',
        'if record["lease_expires"] >= now:',
        "a lease is over at lease_expires",
        (f"{PROTOCOL}::test_decide",),
    ),
    Mutant(
        "live-lease-taken-over",
        DEDUP,
        "        return Decision.IN_PROGRESS\n",
        "        return Decision.TAKE_OVER\n",
        "a live lease makes other deliveries wait (409)",
        (f"{PROTOCOL}::test_decide",),
    ),
    Mutant(
        "lease-of-zero",
        DEDUP,
        '"lease_expires": now + self.config.lease,',
        '"lease_expires": now,',
        "a claim holds the run for the lease",
        handler("test_delivery_during_a_live_lease_gets_409"),
    ),
    Mutant(
        "create-overwrites",
        DEDUP,
        "self._call(ref.create, record, retry=None,",
        "self._call(ref.set, record, retry=None,",
        "the claim is a create: it fails when the run exists",
        handler("test_replay_of_a_completed_run_skips_the_work"),
    ),
    Mutant(
        "attempts-not-counted",
        DEDUP,
        'attempt = int(current.get("attempts", 1)) + 1',
        'attempt = int(current.get("attempts", 1))',
        "a takeover is the run's next attempt",
        handler("test_expired_lease_is_taken_over_and_the_zombie_cannot_overwrite"),
    ),
    Mutant(
        "takeover-keeps-finished-at",
        DEDUP,
        '            "finished_at": firestore.DELETE_FIELD,\n',
        "",
        "a takeover keeps nothing of the old outcome (finished_at)",
        handler("test_record_past_expire_at_counts_as_absent"),
    ),
    Mutant(
        "takeover-keeps-last-error",
        DEDUP,
        '            "last_error": firestore.DELETE_FIELD,\n',
        "",
        "a takeover keeps nothing of the old outcome (last_error)",
        handler("test_record_past_expire_at_counts_as_absent"),
    ),
    Mutant(
        "takeover-keeps-result",
        DEDUP,
        '            "result": firestore.DELETE_FIELD,\n',
        "",
        "a takeover keeps nothing of the old outcome (result)",
        handler("test_record_past_expire_at_counts_as_absent"),
    ),
    Mutant(
        "takeover-conflict-not-409",
        DEDUP,
        "        except RecordChanged:\n"
        '            raise InProgress("another delivery took the run over first") from None',
        "        except api_exceptions.NotFound:\n"
        '            raise InProgress("another delivery took the run over first") from None',
        "a delivery that loses the takeover race answers 409",
        handler("test_two_deliveries_racing_for_one_expired_lease_take_it_over_once"),
    ),
    Mutant(
        "complete-leaves-in-progress",
        DEDUP,
        'fields = {"status": Status.COMPLETED.value, "finished_at": now}',
        'fields = {"status": Status.IN_PROGRESS.value, "finished_at": now}',
        "a processed run is recorded completed",
        handler("test_fresh_run_is_processed_and_recorded"),
    ),
    Mutant(
        "fail-recorded-completed",
        DEDUP,
        'self._finish(claim, {"status": Status.FAILED.value,',
        'self._finish(claim, {"status": Status.COMPLETED.value,',
        "a terminal failure is recorded failed",
        handler("test_terminal_failure_is_recorded_and_never_retried"),
    ),
    Mutant(
        "release-keeps-the-claim",
        DEDUP,
        "        self._finish(claim, None)\n",
        "",
        "a retryable failure releases the run so the next retry runs at once",
        handler("test_retryable_failure_releases_the_run_for_an_immediate_retry"),
    ),
    Mutant(
        "finish-unguarded",
        DEDUP,
        "self._call(ref.update, fields, option=option, retry=None,",
        "self._call(ref.update, fields, retry=None,",
        "a finish is guarded by the claim's update time: a zombie cannot overwrite its successor",
        handler("test_expired_lease_is_taken_over_and_the_zombie_cannot_overwrite"),
    ),
    Mutant(
        "release-unguarded",
        DEDUP,
        "self._call(ref.delete, option=option, retry=None,",
        "self._call(ref.delete, retry=None,",
        "a release is guarded by the claim's update time: a zombie cannot delete its successor's record",
        handler("test_zombie_failure_cannot_delete_the_successors_record"),
    ),
    Mutant(
        "lost-claim-not-superseded",
        DEDUP,
        "        except RecordChanged:\n            raise Superseded(",
        "        except api_exceptions.NotFound:\n            raise Superseded(",
        "a zombie's finish answers 409 superseded",
        handler("test_expired_lease_is_taken_over_and_the_zombie_cannot_overwrite"),
    ),
    # --- dedup.py: the run key and the accepted window ---------------------------------------------------
    Mutant(
        "retention-edge-accepted",
        DEDUP,
        "if schedule_time <= now - config.retention:",
        "if schedule_time < now - config.retention:",
        "a delivery exactly one retention old is refused (its record may be gone)",
        (f"{PROTOCOL}::test_the_accepted_window_ends_exactly_at_the_retention_and_the_max_future",),
    ),
    Mutant(
        "max-future-edge-refused",
        DEDUP,
        "if schedule_time > now + config.max_future:",
        "if schedule_time >= now + config.max_future:",
        "a forced run exactly max_future ahead is accepted",
        (f"{PROTOCOL}::test_the_accepted_window_ends_exactly_at_the_retention_and_the_max_future",),
    ),
    Mutant(
        "max-future-one-day",
        DEDUP,
        'MAX_FUTURE_SECONDS = "2764800"',
        'MAX_FUTURE_SECONDS = "86400"',
        "a forced run of a monthly job (its next time a month ahead) is accepted",
        handler("test_schedule_times_outside_the_accepted_window_are_refused"),
    ),
    Mutant(
        "leap-second-accepted",
        DEDUP,
        '    if match["second"] == "60":\n'
        '        raise ValueError("is a leap second, which Cloud Scheduler never sends")\n',
        "",
        "a leap second is refused as one (Cloud Scheduler never sends it)",
        handler("test_bad_headers_get_400_and_nothing_is_written"),
    ),
    Mutant(
        "fraction-milliseconds",
        DEDUP,
        'fraction = (match["fraction"] or "")[:7]',
        'fraction = (match["fraction"] or "")[:4]',
        "schedule times keep microseconds, the precision Firestore stores",
        (f"{PROTOCOL}::test_parse_schedule_time",),
    ),
    Mutant(
        "offset-kept",
        DEDUP,
        "        return parsed.astimezone(UTC)",
        "        return parsed",
        "equal instants in other offsets are one run (the key is in UTC)",
        handler("test_equal_instants_in_other_offsets_are_one_run"),
    ),
    Mutant(
        "run-id-without-project",
        DEDUP,
        '"\\n".join((self.project, self.location, self.job_name, self.schedule_time.isoformat()))',
        '"\\n".join((self.location, self.job_name, self.schedule_time.isoformat()))',
        "the run id keys project, location, job and instant",
        (f"{PROTOCOL}::test_run_id_is_sha256_of_project_location_job_and_instant",),
    ),
    Mutant(
        "job-name-path-characters",
        DEDUP,
        'JOB_NAME = re.compile(r"[A-Za-z0-9_-]{1,500}")',
        'JOB_NAME = re.compile(r"[A-Za-z0-9_./%-]{1,500}")',
        "a job name is a Cloud Scheduler job id",
        handler("test_bad_headers_get_400_and_nothing_is_written"),
    ),
    Mutant(
        "location-anything",
        DEDUP,
        'LOCATION = re.compile(r"[a-z]+-[a-z]+[0-9]{1,2}")',
        'LOCATION = re.compile(r".+")',
        "a location is a GCP region",
        handler("test_bad_headers_get_400_and_nothing_is_written"),
    ),
    Mutant(
        "zero-seconds-accepted",
        DEDUP,
        "if int(text) == 0:",
        "if int(text) < 0:",
        "a DEDUP_* duration is a positive whole number",
        (f"{PROTOCOL}::test_bad_setting_is_refused_naming_variable_and_value",),
    ),
    Mutant(
        "fractional-seconds-accepted",
        DEDUP,
        'WHOLE_NUMBER = re.compile(r"[0-9]+")',
        'WHOLE_NUMBER = re.compile(r"[0-9.]+")',
        "a DEDUP_* duration is a whole number (Misconfigured naming it, never a crash)",
        (f"{PROTOCOL}::test_bad_setting_is_refused_naming_variable_and_value",),
    ),
    Mutant(
        "environment-ignored",
        DEDUP,
        "text = environ.get(name) or baked_settings().get(name)",
        "text = baked_settings().get(name)",
        "every setting can be overridden by its environment variable",
        (f"{PROTOCOL}::test_settings_come_from_the_environment_with_baked_defaults",),
    ),
    Mutant(
        "in-progress-503",
        MAIN,
        'dedup.Outcome.IN_PROGRESS: (409, "WARNING"),',
        'dedup.Outcome.IN_PROGRESS: (503, "WARNING"),',
        "a live lease answers 409, never 503 (keeps Scheduler's retries counting)",
        handler("test_delivery_during_a_live_lease_gets_409"),
    ),
    Mutant(
        "terminal-failure-500",
        MAIN,
        'dedup.Outcome.TERMINAL_FAILURE: (200, "ERROR"),',
        'dedup.Outcome.TERMINAL_FAILURE: (500, "ERROR"),',
        "a terminal failure answers 2xx so that Scheduler stops retrying",
        handler("test_terminal_failure_is_recorded_and_never_retried"),
    ),
    # --- dedup.py: firestore_call maps the store's errors --------------------------------------------------
    Mutant(
        "store-answers-mapped",
        DEDUP,
        "    except answers:\n        raise\n",
        "",
        "an error the call site expects (the protocol's answer) reaches it, never mapped to a store error",
        (STORE_ERRORS, "-k", "claim-create-ALREADY_EXISTS or finish-update-FAILED_PRECONDITION"),
    ),
    Mutant(
        "database-unusable-is-unavailable",
        DEDUP,
        "    except DATABASE_UNUSABLE as error:\n",
        "    except () as error:\n",
        "NOT_FOUND / FAILED_PRECONDITION outside the guard: a missing or Datastore-mode database, 500 misconfigured",
        (STORE_ERRORS, "-k", "claim-create-NOT_FOUND or claim-read-FAILED_PRECONDITION"),
    ),
    Mutant(
        "misconfigured-without-the-database",
        DEDUP,
        "self._call = functools.partial(firestore_call, database=config.database_name)",
        "self._call = functools.partial(firestore_call, database=config.collection)",
        "a misconfigured database is named in the outcome line",
        (STORE_ERRORS, "-k", "claim-create-NOT_FOUND"),
    ),
    Mutant(
        "store-error-escapes",
        DEDUP,
        "    except api_exceptions.GoogleAPIError as error:\n        raise StoreUnavailable(",
        "    except api_exceptions.RetryError as error:\n        raise StoreUnavailable(",
        "every other store error is 500 store_unavailable, in one outcome line",
        (STORE_ERRORS, "-k", "claim-create-UNAVAILABLE or finish-update-INTERNAL"),
    ),
    Mutant(
        "rpc-unbounded",
        DEDUP,
        "return method(*args, timeout=RPC_TIMEOUT_SECONDS, **kwargs)",
        "return method(*args, **kwargs)",
        "every Firestore call has a bounded time",
        ("tests/test_outage.py::test_hung_store_answers_500_within_the_deadline_and_the_run_proceeds_once_after",),
    ),
    # --- dedup.py: max_lateness_seconds (skip_if_late) ------------------------------------------------------
    Mutant(
        "lateness-ignored",
        DEDUP,
        "if job is None or job.max_lateness is None or now - claim.key.schedule_time <= job.max_lateness:",
        "if True:",
        "a delivery past its job's max_lateness_seconds never runs the work",
        (LATENESS,),
    ),
    Mutant(
        "lateness-from-the-claim",
        DEDUP,
        "now - claim.key.schedule_time <= job.max_lateness:",
        "now - now <= job.max_lateness:",
        "lateness is measured from the schedule time",
        (LATENESS,),
    ),
    Mutant(
        "skip-not-recorded",
        DEDUP,
        '        self._finish(claim, {"status": Status.SKIPPED.value, "finished_at": now, "last_error": reason})\n',
        "",
        "a late run is recorded skipped, so its replays are duplicates",
        (LATENESS,),
    ),
    Mutant(
        "skipped-replayed",
        DEDUP,
        'if record["status"] in (Status.COMPLETED, Status.FAILED, Status.SKIPPED):',
        'if record["status"] in (Status.COMPLETED, Status.FAILED):',
        "a skipped run is finished: its replays never run the work",
        (LATENESS,),
    ),
    Mutant(
        "skipped-late-500",
        MAIN,
        'dedup.Outcome.SKIPPED_LATE: (200, "WARNING"),',
        'dedup.Outcome.SKIPPED_LATE: (500, "WARNING"),',
        "a late delivery answers 2xx so that Scheduler stops retrying",
        (LATENESS,),
    ),
    Mutant(
        "lateness-string-accepted",
        DEDUP,
        "if lateness is not None and (type(lateness) is not int or lateness <= 0):",
        "if lateness is not None and lateness <= 0:",
        "DEDUP_JOBS' max_lateness_seconds is a whole number (Misconfigured naming it)",
        ("tests/test_audit.py::test_bad_dedup_jobs_is_misconfigured_naming_the_field",),
    ),
    # --- main.py: the HTTP adapter -----------------------------------------------------------------------
    Mutant(
        "lateness-never-checked",
        MAIN,
        "        ledger.skip_if_late(claim, now)\n",
        "",
        "each claimed run is checked against its job's max_lateness_seconds before the work",
        (LATENESS,),
    ),
    Mutant(
        "terminal-failure-released",
        MAIN,
        "        ledger.fail(claim, ending.message, dedup.utcnow())\n",
        "        ledger.release(claim)\n",
        "a TerminalJobError is recorded failed, not released for a retry",
        handler("test_terminal_failure_is_recorded_and_never_retried"),
    ),
    Mutant(
        "retryable-failure-completed",
        MAIN,
        "    ledger.release(claim)\n    if ending.how is stop.Ended.UNKNOWN_JOB:",
        "    ledger.complete(claim, dedup.utcnow())\n    if ending.how is stop.Ended.UNKNOWN_JOB:",
        "any other error releases the run for a retry",
        handler("test_retryable_failure_releases_the_run_for_an_immediate_retry"),
    ),
    Mutant(
        "status-always-200",
        MAIN,
        'return f"{outcome}: {detail}\\n", ANSWERS[outcome][0]',
        'return f"{outcome}: {detail}\\n", 200',
        "the answer's status is the outcome's",
        handler("test_delivery_during_a_live_lease_gets_409"),
    ),
    Mutant(
        "severity-always-info",
        MAIN,
        "logging.getLevelNamesMapping()[severity],",
        "logging.INFO,",
        "the outcome line's severity is the outcome's",
        handler("test_every_log_line_carries_the_run_and_its_outcome"),
    ),
    Mutant(
        "run-fields-missing",
        MAIN,
        'RUN_FIELDS.set({"run_id": key.run_id, "job": key.job_name, "schedule_time": key.schedule_time.isoformat()})',
        "RUN_FIELDS.set({})",
        "every log line carries the run",
        handler("test_every_log_line_carries_the_run_and_its_outcome"),
    ),
    Mutant(
        "traceback-not-logged",
        MAIN,
        '        f"{detail}\\n{traceback}".rstrip("\\n"),\n',
        "        detail,\n",
        "a retryable failure's one outcome line carries its traceback",
        handler("test_a_retryable_failure_logs_its_traceback_in_its_one_outcome_line"),
    ),
    Mutant(
        "takeover-line-missing",
        MAIN,
        "        if claim.taken_over_from:",
        "        if False:",
        "a takeover logs a `takeover` line before the outcome",
        ("tests/test_faults.py::test_kill_after_claim_before_work_a_retry_after_the_lease_runs_it_once",),
    ),
    Mutant(
        "invalid-delivery-uncaught",
        MAIN,
        "    except dedup.RunNotProcessed as refusal:",
        "    except (dedup.RunAlreadyFinished, dedup.RunInProgress) as refusal:",
        "a bad delivery answers 400 with one line",
        handler("test_bad_headers_get_400_and_nothing_is_written"),
    ),
    # --- hooks/rules.py: the bake-time rules -------------------------------------------------------------
    Mutant(
        "rules-lease-margin-0",
        RULES,
        "LEASE_MARGIN_SECONDS = 30",
        "LEASE_MARGIN_SECONDS = 0",
        "the lease outlasts the function timeout by the margin",
        RULES_TESTS,
    ),
    Mutant(
        "rules-deadline-3600",
        RULES,
        "ATTEMPT_DEADLINE_RANGE = (15, 1800)",
        "ATTEMPT_DEADLINE_RANGE = (15, 3600)",
        "Scheduler's attempt deadline is 15-1800 s",
        RULES_TESTS,
    ),
    Mutant(
        "rules-retry-count-6",
        RULES,
        "MAX_RETRY_COUNT = 5",
        "MAX_RETRY_COUNT = 6",
        "retry_count is 0-5",
        RULES_TESTS,
    ),
    Mutant(
        "rules-reserved-collection",
        RULES,
        'COLLECTION_ID = re.compile(r"(?!__.*__\\Z)[A-Za-z0-9_-]{1,100}")',
        'COLLECTION_ID = re.compile(r"[A-Za-z0-9_-]{1,100}")',
        "a collection id is not __reserved__",
        RULES_TESTS,
    ),
    Mutant(
        "rules-database-3-chars",
        RULES,
        'DATABASE_ID = re.compile(r"\\(default\\)|[a-z][a-z0-9-]{2,61}[a-z0-9]")',
        'DATABASE_ID = re.compile(r"\\(default\\)|[a-z][a-z0-9-]{1,61}[a-z0-9]")',
        "a database id is (default) or 4-63 chars",
        RULES_TESTS,
    ),
    Mutant(
        "rules-slug-21",
        RULES,
        'SLUG = re.compile(r"[a-z][a-z0-9-]{1,18}[a-z0-9]")',
        'SLUG = re.compile(r"[a-z][a-z0-9-]{1,19}[a-z0-9]")',
        "a slug is at most 20 chars (service-account ids)",
        RULES_TESTS,
    ),
    Mutant(
        "rules-retries-meet-the-lease",
        RULES,
        "if waits and sum(waits) <= lease:",
        "if waits and sum(waits) < lease:",
        "the retries reach strictly past the lease",
        RULES_TESTS,
    ),
    Mutant(
        "rules-retention-without-window",
        RULES,
        "if retention < lease + window:",
        "if retention < lease:",
        "the retention covers the lease and the retry window",
        RULES_TESTS,
    ),
    # Not `retry <= max_doublings` -> `<` (or `<= max_doublings + 1`): equivalent mutants, the linear
    # formula gives the same waits at those two retries (min_backoff * 2**max_doublings * 1, then * 2).
    Mutant(
        "rules-linear-step-off-by-one",
        RULES,
        "wait = min_backoff * 2**max_doublings * (retry - max_doublings + 1)",
        "wait = min_backoff * 2**max_doublings * (retry - max_doublings + 2)",
        "after the doublings Scheduler's wait grows by min_backoff * 2**max_doublings per retry",
        RULES_TESTS,
    ),
    Mutant(
        "rules-no-linear-growth",
        RULES,
        "wait = min_backoff * 2**max_doublings * (retry - max_doublings + 1)",
        "wait = min_backoff * 2**retry",
        "after the doublings Scheduler's wait grows linearly",
        RULES_TESTS,
    ),
    Mutant(
        "rules-window-ignores-duration",
        RULES,
        "by_duration = max_retry_duration + max_backoff + attempt_deadline if max_retry_duration else 0",
        "by_duration = 0",
        "the retry window covers max_retry_duration",
        RULES_TESTS,
    ),
    Mutant(
        "rules-timeout-below-deadline",
        RULES,
        "    if timeout < deadline:",
        "    if timeout + 1 < deadline:",
        "the function timeout is at least the attempt deadline",
        RULES_TESTS,
    ),
    Mutant(
        "rules-cron-step-0",
        RULES,
        'if match["step"] is not None and int(match["step"]) == 0:',
        'if match["step"] is not None and int(match["step"]) < 0:',
        "a cron step is not 0",
        RULES_TESTS,
    ),
    Mutant(
        "rules-cron-backwards",
        RULES,
        "names) < start:",
        "names) < start - 100:",
        "a cron range does not run backwards",
        RULES_TESTS,
    ),
    Mutant(
        "rules-cron-unicode-digits",
        RULES,
        "(?P<lo>[0-9A-Za-z]+)(?:-(?P<hi>[0-9A-Za-z]+))?",
        "(?P<lo>\\w+)(?:-(?P<hi>\\w+))?",
        "cron values are ASCII (Cloud Scheduler refuses digits such as '٣')",
        RULES_TESTS,
    ),
    Mutant(
        "rules-localtime-zone",
        RULES,
        'frozenset(zoneinfo.available_timezones() - {"localtime"})',
        "frozenset(zoneinfo.available_timezones())",
        "a time zone is an IANA name ('localtime' is the machine's alias)",
        RULES_TESTS,
    ),
    Mutant(
        "rules-control-characters",
        RULES,
        'in ("Cc", "Cs", "Zl", "Zp")',
        'in ("Cs", "Zl", "Zp")',
        "a project name has no control characters",
        RULES_TESTS,
    ),
    Mutant(
        "rules-unicode-seconds",
        RULES,
        'if not re.fullmatch(r"[0-9]+", text):',
        'if not re.fullmatch(r"\\d+", text):',
        "seconds are ASCII whole numbers",
        RULES_TESTS,
    ),
    Mutant(
        "rules-lateness-59",
        RULES,
        "MIN_MAX_LATENESS_SECONDS = 60",
        "MIN_MAX_LATENESS_SECONDS = 59",
        "max_lateness_seconds is at least a minute",
        RULES_TESTS,
    ),
    Mutant(
        "rules-audit-any-interval",
        RULES,
        "    if minutes not in AUDIT_INTERVALS_MINUTES:\n",
        "    if minutes < 1:\n",
        "the audit interval divides an hour or a day (one of AUDIT_INTERVALS_MINUTES)",
        RULES_TESTS,
    ),
    Mutant(
        "rules-audit-lookback-edge",
        RULES,
        "if minutes * 60 + settle > lookback:",
        "if minutes * 60 + settle >= lookback:",
        "interval + settle may fill the audit's lookback exactly",
        RULES_TESTS,
    ),
    Mutant(
        "rules-audit-lookback-ignores-retention",
        RULES,
        'lookback = min(AUDIT_LOOKBACK_SECONDS, timing["retention_seconds"])',
        "lookback = AUDIT_LOOKBACK_SECONDS",
        "the audit's lookback never reaches past the retention",
        RULES_TESTS,
    ),
    Mutant(
        "rules-audit-settle-without-lease",
        RULES,
        'settle = timing["lease_seconds"] + retry_window_seconds(',
        "settle = retry_window_seconds(",
        "a run settles after the lease and the retry window",
        RULES_TESTS,
    ),
    Mutant(
        "rules-uuid-database",
        RULES,
        "    if UUID_LIKE.fullmatch(value):\n",
        "    if False:\n",
        "a database id is not UUID-like (Firestore refuses it)",
        RULES_TESTS,
    ),
    Mutant(
        "rules-email-anything",
        RULES,
        'EMAIL = re.compile(r"[^@\\s]+@[^@\\s]+\\.[^@\\s]+")',
        'EMAIL = re.compile(r".+")',
        "alert_email is an e-mail address",
        RULES_TESTS,
    ),
    # --- the module's validation blocks (variables.tf) ---------------------------------------------------
    Mutant(
        "tf-timing-fractions",
        VARIABLES,
        "condition     = alltrue([for v in values(var.timing) : floor(v) == v])",
        "condition     = true",
        "timing values are whole numbers",
        validations("lease_fraction", "retention_fraction"),
    ),
    Mutant(
        "tf-deadline-3600",
        VARIABLES,
        "var.timing.attempt_deadline_seconds <= 1800",
        "var.timing.attempt_deadline_seconds <= 3600",
        "the attempt deadline is at most 1800 s",
        validations("deadline_1801"),
    ),
    Mutant(
        "tf-deadline-1",
        VARIABLES,
        "var.timing.attempt_deadline_seconds >= 15 &&",
        "var.timing.attempt_deadline_seconds >= 1 &&",
        "the attempt deadline is at least 15 s",
        validations("deadline_14"),
    ),
    Mutant(
        "tf-timeout-7200",
        VARIABLES,
        "var.timing.function_timeout_seconds <= 3600",
        "var.timing.function_timeout_seconds <= 7200",
        "the function timeout is at most 3600 s",
        validations("timeout_3601"),
    ),
    Mutant(
        "tf-timeout-below-deadline",
        VARIABLES,
        "condition     = var.timing.function_timeout_seconds >= var.timing.attempt_deadline_seconds &&",
        "condition     = var.timing.function_timeout_seconds >= var.timing.attempt_deadline_seconds - 1 &&",
        "the function timeout is at least the attempt deadline",
        validations("timeout_below_deadline"),
    ),
    Mutant(
        "tf-lease-without-margin",
        VARIABLES,
        "condition     = var.timing.lease_seconds >= var.timing.function_timeout_seconds + local.lease_margin_seconds",
        "condition     = var.timing.lease_seconds >= var.timing.function_timeout_seconds",
        "the lease outlasts the function timeout by the margin",
        validations("lease_below_timeout_plus_margin"),
    ),
    Mutant(
        "tf-retention-edge",
        VARIABLES,
        "condition = var.timing.retention_seconds >= var.timing.lease_seconds + max(",
        "condition = var.timing.retention_seconds + 1 >= var.timing.lease_seconds + max(",
        "the retention covers the lease and the retry window, to the second",
        validations("retention_3659"),
    ),
    Mutant(
        "tf-retention-ignores-duration",
        VARIABLES,
        'var.timing.attempt_deadline_seconds : 0,\n    )\n    error_message = "timing.retention_seconds',
        '0 : 0,\n    )\n    error_message = "timing.retention_seconds',
        "the retry window covers max_retry_duration",
        validations("retention_short_of_the_retry_duration"),
    ),
    Mutant(
        "tf-retries-meet-the-lease",
        VARIABLES,
        ")])) > var.timing.lease_seconds",
        ")])) >= var.timing.lease_seconds",
        "the retries reach strictly past the lease",
        validations("retries_end_at_the_lease"),
    ),
    Mutant(
        "tf-retry-negative",
        VARIABLES,
        "values(var.retry) : floor(v) == v && v >= 0",
        "values(var.retry) : floor(v) == v",
        "retry values are not negative",
        validations("retry_negative"),
    ),
    Mutant(
        "tf-retry-count-6",
        VARIABLES,
        "condition     = var.retry.retry_count <= 5",
        "condition     = var.retry.retry_count <= 6",
        "retry_count is 0-5",
        validations("retry_count_6"),
    ),
    Mutant(
        "tf-backoff-order",
        VARIABLES,
        " && var.retry.max_backoff_seconds >= var.retry.min_backoff_seconds",
        "",
        "max_backoff is at least min_backoff",
        validations("max_backoff_below_min"),
    ),
    Mutant(
        "tf-doublings-17",
        VARIABLES,
        "condition     = var.retry.max_doublings <= 16",
        "condition     = var.retry.max_doublings <= 17",
        "max_doublings is 0-16",
        validations("max_doublings_17"),
    ),
    Mutant(
        "tf-collection-reserved",
        VARIABLES,
        ' && !can(regex("^__.*__$", var.firestore.collection))',
        "",
        "a collection id is not __reserved__",
        validations("collection_reserved"),
    ),
    Mutant(
        "tf-collection-101",
        VARIABLES,
        'can(regex("^[A-Za-z0-9_-]{1,100}$", var.firestore.collection))',
        'can(regex("^[A-Za-z0-9_-]{1,101}$", var.firestore.collection))',
        "a collection id is at most 100 chars",
        validations("collection_101_chars"),
    ),
    Mutant(
        "tf-database-3-chars",
        VARIABLES,
        "[a-z][a-z0-9-]{2,61}[a-z0-9])$",
        "[a-z][a-z0-9-]{1,61}[a-z0-9])$",
        "a database id is (default) or 4-63 chars",
        validations("database_3_chars"),
    ),
    Mutant(
        "tf-no-jobs",
        VARIABLES,
        "condition     = length(var.jobs) > 0",
        "condition     = length(var.jobs) >= 0",
        "at least one job",
        validations("jobs_empty"),
    ),
    Mutant(
        "tf-job-id-uppercase",
        VARIABLES,
        '"^[a-z0-9][a-z0-9-]{0,39}$"',
        '"^[A-Za-z0-9][a-z0-9-]{0,39}$"',
        "a job id is lowercase",
        validations("job_id_uppercase"),
    ),
    Mutant(
        "tf-cron-letters-in-numbers",
        CORE_MAIN,
        'cron_numbers = "[0-9*,/-]+"',
        'cron_numbers = "[0-9A-Za-z*,/-]+"',
        "minute, hour and day of month hold no names (the cron's shape)",
        validations("schedule_letters_in_the_hour"),
    ),
    Mutant(
        "tf-cron-unanchored",
        CORE_MAIN,
        'local.cron_names, local.cron_names])}\\\\s*$"',
        'local.cron_names, local.cron_names])}"',
        "a schedule is exactly five fields (the cron's shape)",
        validations("schedule_six_fields"),
    ),
    Mutant(
        "tf-cron-four-fields",
        CORE_MAIN,
        "local.cron_numbers, local.cron_names, local.cron_names]",
        "local.cron_numbers, local.cron_names]",
        "a schedule has five fields, not four (the cron's shape)",
        validations("schedule_four_fields"),
    ),
    Mutant(
        "tf-time-zone-any",
        VARIABLES,
        '(/[A-Za-z0-9_+-]+)*$", job.time_zone)',
        '(/[A-Za-z0-9_+-]*)*$", job.time_zone)',
        "a time zone has the shape of an IANA name",
        validations("time_zone_trailing_slash"),
    ),
    Mutant(
        "tf-slug-21",
        VARIABLES,
        '"^[a-z][a-z0-9-]{1,18}[a-z0-9]$"',
        '"^[a-z][a-z0-9-]{1,19}[a-z0-9]$"',
        "a slug is at most 20 chars",
        validations("slug_21_chars"),
    ),
    Mutant(
        "tf-dedup-variables-allowed",
        VARIABLES,
        'k if startswith(k, "DEDUP_")]) == 0',
        'k if startswith(k, "DEDUP_")]) >= 0',
        "the module sets the DEDUP_* variables itself",
        validations("function_sets_a_dedup_variable"),
    ),
    Mutant(
        "tf-cloud-run-job-image-optional",
        JOB_VARIABLES,
        "condition     = var.job.image != null",
        "condition     = true",
        "the Cloud Run job module needs an image",
        validations("job_without_image"),
    ),
    Mutant(
        "tf-alerting-window-59",
        VARIABLES,
        "var.alerting.window_seconds >= 60",
        "var.alerting.window_seconds >= 59",
        "the alerting window is at least 60 s",
        validations("alerting_window_59"),
    ),
    Mutant(
        "tf-collection-block-deleted",
        VARIABLES,
        "\n  validation {\n"
        "    # rules.COLLECTION_ID (Firestore reserves ids of the form __name__).\n"
        '    condition     = can(regex("^[A-Za-z0-9_-]{1,100}$", var.firestore.collection))'
        ' && !can(regex("^__.*__$", var.firestore.collection))\n'
        "    error_message = \"firestore.collection: must be 1-100 chars of letters, digits, '_' or '-', and not"
        ' __like_this__ (reserved by Firestore)."\n'
        "  }\n",
        "",
        "every validation block has a test (a deleted block fails the suite)",
        (VALIDATIONS, "-k", "every_validation_block"),
    ),
    Mutant(
        "tf-alert-window-90001",
        VARIABLES,
        "var.alerting.window_seconds <= 90000",
        "var.alerting.window_seconds <= 90001",
        "the alert window is at most 90000 s (Monitoring's limit for an alerting policy's alignment period)",
        validations("alerting_window_90001"),
    ),
    Mutant(
        "tf-alert-window-fractions",
        VARIABLES,
        " && floor(var.alerting.window_seconds) == var.alerting.window_seconds",
        "",
        "the alert window is whole seconds",
        validations("alerting_window_fraction"),
    ),
    Mutant(
        "tf-lateness-59",
        VARIABLES,
        "job.max_lateness_seconds >= 60",
        "job.max_lateness_seconds >= 59",
        "max_lateness_seconds is at least a minute",
        validations("max_lateness_59"),
    ),
    Mutant(
        "tf-lateness-fractions",
        VARIABLES,
        " && floor(job.max_lateness_seconds) == job.max_lateness_seconds",
        "",
        "max_lateness_seconds is whole seconds",
        validations("max_lateness_fraction"),
    ),
    Mutant(
        "tf-database-uuid-like",
        VARIABLES,
        ' && !can(regex("^[0-9a-f]{8}(-[0-9a-f]{4}){3}-[0-9a-f]{12}$", var.firestore.database))',
        "",
        "a database id is not UUID-like",
        validations("database_uuid_like"),
    ),
    Mutant(
        "tf-alert-email-anything",
        VARIABLES,
        'can(regex("^[^@\\\\s]+@[^@\\\\s]+\\\\.[^@\\\\s]+$", var.alert_email))',
        'can(regex("^.+$", var.alert_email))',
        "alert_email is an e-mail address",
        validations("alert_email_without_dot"),
    ),
    Mutant(
        "tf-waits-1801",
        VARIABLES,
        "v >= 0 && v <= 1800",
        "v >= 0 && v <= 1801",
        "each wait is at most 1800 s",
        validations("waits_1801"),
    ),
    Mutant(
        "tf-audit-any-interval",
        VARIABLES,
        "try(contains([5, 10, 15, 20, 30, 60, 120, 180, 240, 360, 480, 720], var.audit.interval_minutes), false)",
        "try(var.audit.interval_minutes >= 1, false)",
        "the audit interval divides an hour or a day",
        validations("audit_interval_7"),
    ),
    Mutant(
        "tf-audit-lookback-ignores-retention",
        VARIABLES,
        ") <= min(86400, var.timing.retention_seconds), false)",
        ") <= 86400, false)",
        "the audit's lookback never reaches past the retention",
        validations("audit_past_the_retention"),
    ),
    Mutant(
        "tf-audit-lookback-past-a-day",
        VARIABLES,
        ") <= min(86400, var.timing.retention_seconds), false)",
        ") <= var.timing.retention_seconds, false)",
        "the audit looks back at most one day",
        validations("audit_past_one_day"),
    ),
    Mutant(
        "tf-job-retries-11",
        JOB_VARIABLES,
        "var.job.max_retries <= 10",
        "var.job.max_retries <= 11",
        "a Cloud Run job task retries at most 10 times",
        validations("job_11_retries"),
    ),
    Mutant(
        "tf-job-task-timeout-86401",
        JOB_VARIABLES,
        "var.job.task_timeout_seconds <= 86400",
        "var.job.task_timeout_seconds <= 86401",
        "a Cloud Run job task runs at most 24 h",
        validations("job_task_timeout_86401"),
    ),
    Mutant(
        "tf-workflow-source-optional",
        WORKFLOW_VARIABLES,
        "condition     = var.workflow.source_contents != null",
        "condition     = true",
        "the workflow module needs the workflow's source",
        validations("workflow_without_source"),
    ),
    # --- issue 16: the stop (branch i16stop) ---
    Mutant(
        "stop-never-at-the-deadline",
        "baked/stop.py",
        "max(0.0, stop_at - time.monotonic())",
        "None",
        "the work's process is killed at the job's deadline, in Python code or C code alike",
        ("tests/test_timeout.py::test_work_past_the_deadline_is_killed_released_and_the_next_delivery_runs_it",),
    ),
    Mutant(
        "stop-after-without-release-margin",
        DEDUP,
        "        return deadline - RELEASE_MARGIN",
        "        return deadline",
        "the work is stopped the release margin before the job's attempt deadline",
        (f"{PROTOCOL}::test_the_work_is_stopped_at_its_jobs_attempt_deadline_less_the_release_margin",),
    ),
    Mutant(
        "stop-after-ignores-the-jobs-deadline",
        DEDUP,
        "deadline = job.attempt_deadline if job and job.attempt_deadline else self.attempt_deadline",
        "deadline = self.attempt_deadline",
        "each job is stopped at its own attempt deadline",
        (f"{PROTOCOL}::test_the_work_is_stopped_at_its_jobs_attempt_deadline_less_the_release_margin",),
    ),
    Mutant(
        "attempt-deadline-within-the-margin",
        DEDUP,
        "            if int(text) <= RELEASE_MARGIN.total_seconds():",
        "            if int(text) < 0:",
        "an attempt deadline within the release margin is refused, naming it",
        (f"{PROTOCOL}::test_an_attempt_deadline_within_the_release_margin_is_refused_naming_it",),
    ),
    Mutant(
        "work-endings-exception-only",
        "baked/stop.py",
        "    except BaseException as error:  # noqa: BLE001 - the work's own SystemExit",
        "    except Exception as error:  # noqa: BLE001 - the work's own SystemExit",
        "a SystemExit, KeyboardInterrupt or other BaseException of the work ends the work, not the handler",
        ("tests/test_stop.py::test_whatever_the_work_does_each_delivery_gets_one_answer_and_the_next_runs_the_work",),
    ),
    Mutant(
        "shown-trusts-str",
        "baked/stop.py",
        "        except BaseException:  # noqa: BLE001, S112 - a broken __str__ may raise anything, SystemExit included",
        "        except RuntimeError:  # noqa: BLE001, S112 - a broken __str__ may raise anything, SystemExit included",
        "an error or result whose str() and repr() fail is still told, by a placeholder naming its type",
        ("tests/test_stop.py::test_what_the_work_returned_is_told_as_text_even_when_its_str_fails",),
    ),
    Mutant(
        "died-taken-for-returned",
        "baked/stop.py",
        "        ending = Ending(Ended.DIED, exit_code=process.exitcode)",
        "        ending = Ending(Ended.RETURNED)",
        "a work process that ends without a report (os._exit) is a retryable failure, released",
        ("tests/test_stop.py::test_whatever_the_work_does_each_delivery_gets_one_answer_and_the_next_runs_the_work",),
    ),
    Mutant(
        "run-fields-not-reset",
        MAIN,
        "        RUN_FIELDS.reset(token)",
        "        pass",
        "a line logged after a delivery carries no finished run's fields",
        handler("test_a_line_logged_after_a_delivery_no_longer_carries_its_runs_fields"),
    ),
    Mutant(
        "work-process-prints-the-diagnostic-again",
        "baked/run_log.py",
        "    google.cloud.logging_v2._instrumentation_emitted = True",
        "    pass",
        "the work's process prints only its own lines, not google-cloud-logging's diagnostic line once per run",
        ("tests/test_log_lines.py::test_every_record_is_one_json_line_with_its_severity",),
    ),
    Mutant(
        "tf-threaded-timeout-on",
        "terraform/modules/scheduled-dedup/function.tf",
        '        THREADED_TIMEOUT_ENABLED  = "false"',
        '        THREADED_TIMEOUT_ENABLED  = "true"',
        "functions-framework's threaded timeout, which can wedge gRPC, stays off",
        ("tests/test_terraform.py::test_terraform_test",),
    ),

    # --- issue 16: what is accepted; issue 18: force run and DST (branch i16accept) ---
    # (new mutants of this branch go here)

    # --- issue 17: the configuration file and per-job timing (branch i17config) ---
    # (new mutants of this branch go here)

    # --- issue 17: the bake the user owns (branch i17bake) ---
    # (new mutants of this branch go here)

    # --- issue 18: pause, catch-up, re-run (branch i18manual) ---
    # (new mutants of this branch go here)

    # --- issue 18: proxy targets follow their executions (branch i18proxy) ---
    # (new mutants of this branch go here)

    # --- issue 19: security, pipeline, drift (branch i19secure) ---
    # (new mutants of this branch go here)

    # --- issue 19: monitoring at scale (branch i19monitor) ---
    # (new mutants of this branch go here)

    # --- issue 19: audit reads, smoke (branch i19audit) ---
    # (new mutants of this branch go here)

    # --- spare section (branch i17slim) ---
    # (new mutants of this branch go here)
]
