"""Issue 24 item 8: the audit job's deliveries are checked against its own cron like any job's. Its cron is known
(every audit_interval_minutes, Etc/UTC: Terraform's local.audit_schedule), yet a delivery dated up to 32 days
ahead (config.Config.max_future) was keyed as a manual audit: that hour's real audit then answered `duplicate`."""

import datetime as dt

import pytest
from conftest import Work, scheduler_headers

import audit
import config
import schedules

AUDIT_JOB = config.load().audit_job
AUDIT = schedules.Schedule(config.load().audit_schedule, "Etc/UTC")


def iso(moment: dt.datetime) -> str:
    return moment.isoformat().replace("+00:00", "Z")


@pytest.fixture
def audit_work(monkeypatch, handler_module):
    """The audit's work, counted instead of run (main.py calls audit.run for the audit job)."""
    recorder = Work()
    monkeypatch.setattr(audit, "run", recorder)
    return recorder


def next_audit_fire() -> dt.datetime:
    """What a Force run of the audit sends: its next fire time after now + the clock margin."""
    return schedules.next_fire_after(AUDIT, dt.datetime.now(dt.UTC) + schedules.CLOCK_MARGIN)


def test_an_audit_delivery_a_month_ahead_is_refused_like_any_jobs(http, audit_work):
    """A fire time of the audit's cron, 30 days ahead: today 200 (a manual audit, keyed at that hour); now 400."""
    ahead = next_audit_fire() + dt.timedelta(days=30)
    assert schedules.fire_time_of(AUDIT, ahead) is not None  # on the cron: only its distance is wrong
    response = http.post("/", headers=scheduler_headers(AUDIT_JOB, iso(ahead)))
    assert response.status_code == 400, response.text
    assert response.text.startswith("invalid_delivery") and "later than the job's next fire time" in response.text
    assert audit_work.calls == []


def test_a_force_run_of_the_audit_runs_and_the_fire_time_after_it_is_refused(http, audit_work):
    """Both sides of the rule: the next fire time (what Force run sends) runs the audit once, as a manual run;
    the fire time after it is refused."""
    forced = next_audit_fire()
    response = http.post("/", headers=scheduler_headers(AUDIT_JOB, iso(forced)))
    assert response.status_code == 200 and response.text.startswith("processed"), response.text
    assert [call.trigger for call in audit_work.calls] == ["manual"]
    after = schedules.next_fire_after(AUDIT, forced)
    refused = http.post("/", headers=scheduler_headers(AUDIT_JOB, iso(after)))
    assert refused.status_code == 400 and "later than the job's next fire time" in refused.text, refused.text
    assert len(audit_work.calls) == 1


def test_the_audits_scheduled_delivery_runs_as_before(http, audit_work, now):
    """The audit's last fire time, as Scheduler delivers it: the scheduled audit, once."""
    (last,) = [fire.instant for fire in schedules.runs(AUDIT, now - dt.timedelta(hours=12), now)][-1:]
    response = http.post("/", headers=scheduler_headers(AUDIT_JOB, iso(last)))
    assert response.status_code == 200 and response.text.startswith("processed"), response.text
    assert [call.trigger for call in audit_work.calls] == ["scheduled"]
