"""An example test of your work (job.py), called as a claimed delivery would. Replace the assertions with what your
work does; keep the repeat: a run's work may be called again for the same run_id, which must change nothing."""

import datetime as dt
import logging

import pytest

import config
import job
from run_context import RunContext, UnknownJob


def context_for(job_id: str) -> RunContext:
    return RunContext(
        run_id="0" * 64,
        job_id=job_id,
        job_name=f"scheduler-name-of-{job_id}",
        schedule_time=dt.datetime(2026, 1, 1, 2, 0, tzinfo=dt.UTC),
        attempt_id="test-attempt",
        attempt=1,
        project="test-project",
        location="test-location",
    )


@pytest.mark.parametrize("job_id", sorted(job.WORK))
def test_each_job_s_work_runs_and_a_repeat_of_its_run_is_harmless(job_id, caplog):
    with caplog.at_level(logging.INFO, logger="job"):
        job.run(context_for(job_id))
        job.run(context_for(job_id))
    assert [r.getMessage() for r in caplog.records] == [f"scheduled work for {job_id} at 2026-01-01T02:00:00+00:00"] * 2


def test_a_job_without_work_is_refused_naming_it():
    with pytest.raises(UnknownJob, match="'no-such-job'"):
        job.run(context_for("no-such-job"))


def test_the_jobs_of_config_yaml_are_the_jobs_of_job_work():
    """A job without work would answer `misconfigured` on every delivery, a work without a job never runs."""
    jobs = {spec.job_id for spec in config.load().jobs.values()}
    assert jobs == set(job.WORK), "config.yaml's jobs and job.py's WORK must name the same job ids"
