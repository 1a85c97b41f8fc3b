"""The deploy-time rules of a configuration: its schedules expanded to fire times. Each job's smallest gap against
how long one fault keeps a run busy, the dates daylight saving repeats or skips its fire times, and the busiest minute
against the function's capacity. `python config.py` runs them (make deploy, before Terraform), and so does the bake's
hook (rules.check_config with `schedules`, from the template's copy of this package); the function never does: it
lives in this package, outside the function's source (terraform/main.tf: the project root's *.py). Standard library
only, as rules.py: the hook runs it in whatever Python runs cookiecutter, so it expands crons itself (rules.Cron)
rather than with schedules.py's cronsim.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import itertools
import zoneinfo
from collections.abc import Callable, Iterator, Mapping

from rules import (
    ATTEMPT_DEADLINE_RANGE,
    AUDIT_TIME_ZONE,
    FUNCTION_DEFAULTS,
    JOB_CHOICES,
    SCHEDULER_KEYS,
    Cron,
    RuleError,
    audit_cron,
    cron_fields,
    retry_wait_seconds,
)

# ---------------------------------------------------------------- fire times: the smallest gap, daylight saving

# How far ahead fire times are expanded: long enough for every DST rule of the coming years and for a
# Feb 29 schedule to fire twice (the century rule aside).
GAP_WINDOW_YEARS = 9
# How many years ahead the bake and the baked configuration check name the dates daylight saving hits a job.
DST_WARNING_YEARS = 5


def _days(first: dt.date, last: dt.date) -> Iterator[dt.date]:
    return (first + dt.timedelta(days=n) for n in range((last - first).days + 1))


def _last_day(start: dt.date, years: int) -> dt.date:
    return dt.date(start.year + years, start.month, 1) - dt.timedelta(days=1)


@functools.lru_cache(maxsize=1 << 16)  # many jobs share a zone: each (day, zone) asked once per check
def _clocks_change_on(day: dt.date, zone: zoneinfo.ZoneInfo) -> bool:
    """Whether the zone's offset changes within this local day (no zone changes it twice in a day)."""
    return len({dt.datetime.combine(day + dt.timedelta(days=n), dt.time(), zone).utcoffset() for n in (0, 1)}) > 1


def _readings(wall: dt.datetime, zone: zoneinfo.ZoneInfo) -> tuple[int, int]:
    """The instants (epoch seconds) of a wall-clock time read with fold 0 and 1 (PEP 495): equal for most, in order
    for one the clocks pass twice (repeated), inverted for one they jump over (skipped: before and after the jump)."""
    early, late = (wall.replace(tzinfo=zone, fold=fold) for fold in (0, 1))
    return int(early.timestamp()), int(late.timestamp())


def _wall_clock_instants(wall: dt.datetime, zone: zoneinfo.ZoneInfo) -> set[int]:
    """The instants Cloud Scheduler may fire at for one local wall-clock time, the worst counted: a time that occurs
    twice (clocks go back) at both, a time that does not exist (clocks go forward) at the transition, as cron does.
    Scheduler "runs on wall clock time" and warns that around DST a job may "run or not run unexpectedly":
    https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules#time_zone"""
    early, late = _readings(wall, zone)
    if early <= late:
        return {early, late}
    low, high, before = late, early, dt.datetime.fromtimestamp(late, zone).utcoffset()
    while high - low > 1:  # skipped: the transition lies between the two readings; find it to the second
        middle = (low + high) // 2
        low, high = (middle, high) if dt.datetime.fromtimestamp(middle, zone).utcoffset() == before else (low, middle)
    return {high}


def _fire_instants(
    cron: Cron, time_zone: str, first: dt.date, last: dt.date, sample: tuple[int, ...] = ()
) -> Iterator[tuple[int, ...]]:
    """For each local day from `first` to `last` on which the schedule fires, its fire instants (epoch seconds),
    sorted: all of them on a day the clocks change; on a day of one offset, those of the wall-clock minutes
    `sample` only, if given."""
    zone = zoneinfo.ZoneInfo(time_zone)
    for day in filter(cron.fires_on, _days(first, last)):
        if _clocks_change_on(day, zone):
            yield tuple(sorted(set().union(*(_wall_clock_instants(wall, zone) for wall in cron.walls(day)))))
        else:
            midnight = int(dt.datetime.combine(day, dt.time(), zone).timestamp())
            yield tuple(sorted({midnight + 60 * minute for minute in sample or cron.day_minutes}))


@dataclasses.dataclass(frozen=True)
class Gap:
    seconds: int
    first: dt.datetime  # UTC; the fire time after which the next one comes soonest
    second: dt.datetime

    def where(self, time_zone: str) -> str:
        zone = zoneinfo.ZoneInfo(time_zone)
        return f"{self.first.astimezone(zone).isoformat()} to {self.second.astimezone(zone).isoformat()}"


@functools.lru_cache(maxsize=1024)  # jobs that share a schedule and zone share their gap
def smallest_gap(schedule: str, time_zone: str, start: dt.date, years: int = GAP_WINDOW_YEARS) -> Gap | None:
    """The shortest time between two consecutive fire times over `years` from `start` (local days);
    None if the schedule fires less than twice in them. A day of one offset has the wall-clock steps, its
    smallest at the same place every day: its first and last fire times and that step stand for it."""
    cron = Cron.parse(schedule)
    minutes = cron.day_minutes
    inner = min(itertools.pairwise(minutes), key=lambda pair: pair[1] - pair[0], default=())
    days = _fire_instants(cron, time_zone, start, _last_day(start, years), (minutes[0], *inner, minutes[-1]))
    pairs = itertools.pairwise(itertools.chain.from_iterable(days))
    best = min(pairs, key=lambda pair: pair[1] - pair[0], default=None)
    if best is None:
        return None
    return Gap(best[1] - best[0], *(dt.datetime.fromtimestamp(instant, dt.UTC) for instant in best))


@dataclasses.dataclass(frozen=True)
class DstHit:
    """A local day on which a zone's clocks repeat (`repeated`) or skip (`skipped`) fire times of a schedule."""

    day: dt.date
    kind: str
    walls: tuple[dt.time, ...]  # the fire times (wall clock) that happen twice, or never


def dst_hits(schedule: str, time_zone: str, start: dt.date, years: int = DST_WARNING_YEARS) -> list[DstHit]:
    """Every local day within `years` from `start` on which the zone's clocks repeat or skip a fire time."""
    cron, zone, hits = Cron.parse(schedule), zoneinfo.ZoneInfo(time_zone), []
    for day in filter(cron.fires_on, _days(start, _last_day(start, years))):
        if _clocks_change_on(day, zone):
            readings = [(wall.time(), *_readings(wall, zone)) for wall in cron.walls(day)]
            skipped = tuple(wall for wall, early, late in readings if early > late)
            repeated = tuple(wall for wall, early, late in readings if early < late)
            for kind, walls in (("skipped", skipped), ("repeated", repeated)):
                if walls:
                    hits.append(DstHit(day, kind, walls))
    return hits


def dst_warnings(jobs: Mapping[str, Mapping[str, str]], start: dt.date) -> list[str]:
    """One line per job whose fire times daylight saving repeats or skips, naming every such date."""
    warnings = []
    for job_id, job in jobs.items():
        hits = dst_hits(job["schedule"], job["time_zone"], start)
        if not hits:
            continue
        gap = job.get("dst_gap", JOB_CHOICES["dst_gap"][0])
        minute, hour = cron_fields(job["schedule"])[:2]
        if minute.startswith("*") or hour.startswith("*"):
            # Debian cron, and cronsim in the function: a '*' minute or hour runs on the new time as it comes.
            rule = "a '*' minute or hour field runs a repeated time at both instants and a skipped one not at all"
        else:
            skipped = "once at the end of the gap" if gap == "end_of_gap" else "not at all"
            rule = f"a repeated time runs once (the first), a skipped one {skipped} (dst_gap={gap})"
        dates = ", ".join(
            f"{hit.day} ({hit.kind} {'/'.join(f'{wall:%H:%M}' for wall in hit.walls[:3])}"
            f"{'...' if len(hit.walls) > 3 else ''})"
            for hit in hits
        )
        warnings.append(
            f"jobs.{job_id}.schedule={job['schedule']!r} in {job['time_zone']}: daylight saving repeats or skips "
            f"its fire times on {dates}: {rule}; docs/schedules-and-manual-runs.md#daylight-saving"
        )
    return warnings


# ---------------------------------------------------------------- one fault against the schedule


@dataclasses.dataclass(frozen=True)
class SchedulerRetries:
    """Cloud Scheduler's retry_config, as its reference documents it: retries stop when both retry_count and
    max_retry_duration are reached ("If specified with retry_count, the job will be retried until both limits are
    reached"; max_retry_duration 0 = no time limit, "However, if retry_count is also 0, a job attempt won't be
    retried"), measured from the first attempt; a retry counts as inside the duration only if it starts before it
    ends. The next fire time stops them too: check_schedule_timing."""

    retry_count: int
    min_backoff: int
    max_backoff: int
    max_doublings: int
    max_retry_duration: int

    @classmethod
    def of(cls, timing: Mapping[str, int]) -> SchedulerRetries:
        return cls(*(timing[key] for key in SCHEDULER_KEYS[1:]))  # all but the deadline, in the fields' order

    @property
    def retries_at_all(self) -> bool:
        return self.retry_count > 0 or self.max_retry_duration > 0

    def wait(self, failed_attempt: int) -> int:
        return retry_wait_seconds(failed_attempt, self.min_backoff, self.max_backoff, self.max_doublings)

    def allowed(self, retry: int, at: int) -> bool:
        """Whether retry number `retry` (1 = the first retry) happens when due at `at` s after the first attempt."""
        return retry <= self.retry_count or (self.max_retry_duration > 0 and at < self.max_retry_duration)

    def first_retry_from(self, failed_at: int, ready_at: int, failed_attempt: int = 0) -> tuple[int, int] | None:
        """(retry number, time) of the first retry at or after `ready_at`, when attempt `failed_attempt` failed
        at `failed_at` and every retry before `ready_at` is answered at once (409, nothing to claim yet);
        None when the retries stop first."""
        at, attempt = failed_at, failed_attempt
        while True:
            wait = self.wait(attempt)
            at, attempt = at + wait, attempt + 1
            if not self.allowed(attempt, at):
                return None
            if at >= ready_at:
                return attempt, at
            if wait == 0:  # the waits never shrink: no retry ever reaches ready_at
                return None


@dataclasses.dataclass(frozen=True)
class Busy:
    """How long one fault keeps a run busy: until its work and Scheduler's attempts at it have all ended."""

    fault: str
    seconds: int | None  # None: the run is lost (the retries stop before anything can claim it)
    story: str  # how, in a few words, for the one-line refusal and the docs' tables
    recovered_by: int | None = None  # when the attempt that does the work after the fault arrives


def busy_after_one_fault(timing: Mapping[str, int]) -> list[Busy]:
    """For each fault (and none), the worst over when it strikes (every whole second of the attempt: exact for
    whole-second answers), counted from the fire time. The first attempt arrives at the fire time and claims
    the run at once; 409 and `duplicate` answers are immediate; a delivery at the very second the lease ends,
    or the run is released, claims it (dedup.decide). A SIGKILL ends the attempt at once and leaves the claim to
    its lease; a retryable error releases the claim (main.py); a hang is modelled to the function timeout, the
    latest it can last (stop.py ends it sooner); a lost 2xx is a completed run that Scheduler counts failed."""
    retries = SchedulerRetries.of(timing)
    deadline, timeout = timing["attempt_deadline_seconds"], timing["function_timeout_seconds"]
    lease = timing["lease_seconds"]

    def after_claim(attempt: int, claimed_at: int) -> int:
        """Attempt `attempt` (0 = the first) claims the run at `claimed_at` and works the whole function timeout:
        the longest work there is. Past the attempt deadline Scheduler counts it failed and retries; those
        retries get 409 until the work is done, then `duplicate` (a 2xx), which ends them."""
        done = claimed_at + timeout
        duplicate = retries.first_retry_from(claimed_at + deadline, done, attempt) if timeout > deadline else None
        return max(done, duplicate[1]) if duplicate else done

    def worst(fault: str, cases: list[tuple[str, int, int]]) -> Busy:
        """The worst of `cases` (what struck, when Scheduler saw the attempt fail, when the run can be claimed
        again): lost, else the latest."""
        busiest = None
        for what, failed_at, ready_at in cases:
            retry = retries.first_retry_from(failed_at, ready_at)
            if retry is None:
                return Busy(fault, None, f"{what}: the retries stop before the run can be claimed")
            busy = after_claim(*retry)
            if busiest is None or busy > busiest.seconds:
                story = f"{what}, retry {retry[0]} claims the run at {retry[1]} s and may work the whole timeout"
                busiest = Busy(fault, busy, story, retry[1])
        return busiest

    lost_2xx = retries.first_retry_from(deadline, timeout)
    return [
        Busy("none", after_claim(0, 0), "the work lasts the whole function timeout"),
        worst("sigkill before the claim", [("killed before the claim", 0, 0)]),
        # Scheduler sees the failure when the instance dies, or at the deadline if the work outlasts it.
        worst("sigkill after the claim", [(f"killed {f} s after the claim", f, lease) for f in range(deadline + 1)]),
        worst("retryable error", [(f"error {k} s into the work", min(k, deadline), k) for k in range(timeout + 1)]),
        worst("hang", [("hung until the timeout", deadline, timeout)]),
        Busy("lost 2xx", max(timeout, lost_2xx[1]) if lost_2xx else timeout, "completed, its 2xx lost"),
    ]


def check_schedule_timing(
    jobs: Mapping[str, Mapping[str, str]], timing: Mapping[str, int], start: dt.date, prefix: str = ""
) -> list[str]:
    """No fault loses a run (retries permitting), and no run overlaps the next: each job's smallest gap must
    exceed the longest one fault keeps a run busy (at least the function timeout). Cloud Scheduler retries a run
    "retry_count times, or until the next scheduled execution time, whichever comes first", or else "the next
    scheduled execution time might be skipped if the retries continue through that time": a run still busy at
    the next fire time is lost either way. Terraform cannot expand a cron. Returns warnings."""
    retries = SchedulerRetries.of(timing)
    outcomes = busy_after_one_fault(timing)
    lost = [outcome for outcome in outcomes if outcome.seconds is None]
    if lost and retries.retries_at_all:
        unlimited = busy_after_one_fault({**timing, "max_retry_duration_seconds": 10**9})
        needed = max(outcome.recovered_by or 0 for outcome in unlimited)
        rule = (
            f"with retry_count {timing['retry_count']} it alone bounds the retries, and it ends before a "
            f"{lost[0].fault} is recovered ({lost[0].story}); it must be 0 (no retries at all) or more than {needed}"
        )
        raise RuleError(prefix + "max_retry_duration_seconds", str(timing["max_retry_duration_seconds"]), rule)
    busiest = max((outcome for outcome in outcomes if outcome.seconds is not None), key=lambda o: o.seconds)
    for job_id, job in jobs.items():
        gap = smallest_gap(job["schedule"], job["time_zone"], start)
        if gap is not None and gap.seconds <= busiest.seconds:
            rule = (
                f"fires only {gap.seconds} s apart in {job['time_zone']} ({gap.where(job['time_zone'])}), "
                f"with attempt_deadline_seconds {timing['attempt_deadline_seconds']}, lease_seconds "
                f"{timing['lease_seconds']} and retry_count {timing['retry_count']} one fault can keep a run busy "
                f"for {busiest.seconds} s ({busiest.fault}: {busiest.story}), so a run would be lost or overlap "
                f"the next: choose a schedule whose runs are at least {busiest.seconds + 1} s apart, or "
                f"{passing_deadline_hint(timing, gap.seconds)}"
            )
            raise RuleError(f"jobs.{job_id}.schedule", job["schedule"], rule)
    if not retries.retries_at_all:
        return [
            "retry_count=0 with max_retry_duration_seconds=0: Cloud Scheduler never retries, so one crash, "
            "retryable error or hang loses the run (a crash after the claim leaves it for `python -m "
            "scheduled_dedup_tools.runs stuck`; an error or a hang releases it and leaves only its retryable_failure "
            "log line)"
        ]
    return []


def passing_deadline_hint(timing: Mapping[str, int], gap: int) -> str:
    """The largest attempt_deadline_seconds (its lease as far beyond it) with which one fault keeps a run busy
    for less than `gap`, for a refusal's "a value that would pass"."""
    slack = timing["lease_seconds"] - timing["attempt_deadline_seconds"]

    def fits(deadline: int) -> bool:
        shorter = {**timing, "attempt_deadline_seconds": deadline, "function_timeout_seconds": deadline}
        busy = [outcome.seconds for outcome in busy_after_one_fault({**shorter, "lease_seconds": deadline + slack})]
        return None not in busy and max(busy) < gap

    low, high = ATTEMPT_DEADLINE_RANGE[0], timing["attempt_deadline_seconds"] - 1
    if high < low or not fits(low):
        return "a sparser schedule is the only fix with these retries (no attempt_deadline_seconds fits the gap)"
    while low < high:  # the busy time grows with the deadline
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return f"an attempt_deadline_seconds of at most {low} (lease_seconds {low + slack})"


# ---------------------------------------------------------------- capacity: the busiest minute against the function

# How far ahead the busiest minute is looked for: the gap rule's window (every DST rule of the coming years, a
# Feb 29 schedule on each weekday it can fall on within it).
CAPACITY_WINDOW_YEARS = GAP_WINDOW_YEARS


@dataclasses.dataclass(frozen=True)
class Herd:
    """The most runs the schedule has in flight at once: `runs` at `minute` (UTC, the first such minute), counting
    every fire of that minute and of the minutes before it whose runs may still hold an instance."""

    runs: int
    minute: dt.datetime

    def where(self) -> str:
        return f"{self.minute:%Y-%m-%dT%H:%MZ}"


def _minute_counts(
    zones: Mapping[str, Mapping[tuple, tuple[Cron, dict[int, int], list[Cron]]]], day: dt.date
) -> tuple[tuple, Callable[[], list[int]]]:
    """The signature of UTC day `day` (what decides its fires: per zone, for the local days that reach into it,
    their offset, whether the clocks change on them, which day rules fire) and a function giving its fires per
    minute of the day (a list of 1440), made only when the signature is new."""
    signature, parts = [], []
    midnight = int(dt.datetime.combine(day, dt.time(), dt.UTC).timestamp())
    for zone_name, groups in zones.items():
        zone = zoneinfo.ZoneInfo(zone_name)
        for shift in (-1, 0, 1):  # a local day reaches at most 14 h into the UTC days beside it
            local = day + dt.timedelta(days=shift)
            changes = _clocks_change_on(local, zone)
            start = int(dt.datetime.combine(local, dt.time(), zone).timestamp())
            firing = tuple(rule for rule, (cron, _, _) in groups.items() if cron.fires_on(local))
            signature.append((zone_name, shift, start - midnight, local if changes else None, firing))
            parts.append((zone, local, changes, start - midnight, firing, groups))

    def counts() -> list[int]:
        minutes = [0] * 1440
        for zone, local, changes, offset, firing, groups in parts:
            for rule in firing:
                _, day_minutes, crons = groups[rule]
                if changes:  # each job's instants that day, a time the clocks pass twice at both (the worst)
                    instants = [
                        instant
                        for cron in crons
                        for instant in set().union(*(_wall_clock_instants(wall, zone) for wall in cron.walls(local)))
                    ]
                    pairs = [((instant - midnight) // 60, 1) for instant in instants]
                else:
                    pairs = [(offset // 60 + minute, count) for minute, count in day_minutes.items()]
                for minute, count in pairs:
                    if 0 <= minute < 1440:
                        minutes[minute] += count
        return minutes

    return tuple(signature), counts


def busiest_minute(
    schedules: list[tuple[str, str]], hold_seconds: int, start: dt.date, years: int = CAPACITY_WINDOW_YEARS
) -> Herd:
    """The most runs in flight at once over `years` from `start` (UTC days), for (cron, time zone) pairs, each
    run holding an instance for `hold_seconds` after its fire time: fires less than that apart overlap. Every
    minute counts, daylight saving's too (a repeated time at both its instants, a skipped one at the gap's end:
    _wall_clock_instants, the gap rule's walk). Days with the same signature are counted once."""
    zones: dict[str, dict[tuple, tuple[Cron, dict[int, int], list[Cron]]]] = {}
    for schedule, time_zone in schedules:
        cron = Cron.parse(schedule)
        rule = (cron.days, cron.months, cron.weekdays, cron.days_and_weekdays)
        _, day_minutes, crons = zones.setdefault(time_zone, {}).setdefault(rule, (cron, {}, []))
        for minute in cron.day_minutes:
            day_minutes[minute] = day_minutes.get(minute, 0) + 1
        crons.append(cron)
    window = max(1, -(-hold_seconds // 60))  # a run fired k minutes earlier overlaps when k * 60 < hold
    days: dict[tuple, list[int]] = {}
    peaks: dict[tuple, tuple[int, int]] = {}
    best, previous = Herd(0, dt.datetime.combine(start, dt.time(), dt.UTC)), None
    for day in _days(start, _last_day(start, years)):
        signature, counts = _minute_counts(zones, day)
        if signature not in days:
            days[signature] = counts()
        key = (previous, signature)
        if key not in peaks:
            before = days[previous][1440 - window + 1 :] if previous is not None and window > 1 else []
            minutes = before + days[signature]
            running = sum(minutes[: len(before)])
            peak = (0, 0)
            for minute in range(1440):
                running += minutes[len(before) + minute]
                if minute + len(before) - window >= 0:
                    running -= minutes[minute + len(before) - window]
                if running > peak[0]:
                    peak = (running, minute)
            peaks[key] = peak
        runs, minute = peaks[key]
        if runs > best.runs:
            best = Herd(runs, dt.datetime.combine(day, dt.time(), dt.UTC) + dt.timedelta(minutes=minute))
        previous = signature
    return best


def schedule_herd(checked: Mapping[str, object], start: dt.date) -> Herd:
    """busiest_minute of a checked configuration: every job and the audit, each run holding its instance for the
    longest function timeout of all (the function has one timeout: the largest)."""
    jobs = checked["jobs"]
    timings = [checked["defaults"], *(job["timing"] for job in jobs.values())]
    hold = max(timing["function_timeout_seconds"] for timing in timings)
    # A paused job counts: it can be resumed in the console without a deploy (and this check).
    schedules = [(job["schedule"], job["time_zone"]) for job in jobs.values()]
    schedules.append((audit_cron(checked["audit_interval_minutes"]), AUDIT_TIME_ZONE))
    return busiest_minute(schedules, hold, start)


def instances_for(herd: Herd, concurrency: int) -> int:
    """The max_instance_count that starts every run of the busiest minute at once; FUNCTION_DEFAULTS' at the least."""
    return max(-(-herd.runs // concurrency), FUNCTION_DEFAULTS["max_instance_count"])


def check_capacity(function: Mapping[str, int], herd: Herd, retry_count: int) -> None:
    """Every run of the busiest minute finds an instance at its first attempt. One fault: the timing rules
    (busy_after_one_fault) let each run's first attempt claim it at its fire time and keep every retry for one
    fault. Past the capacity Cloud Run answers 429 (a request waits at most 10 s for an instance:
    https://cloud.google.com/run/docs/about-instance-autoscaling) and the herd waits for Scheduler's retry waves:
    each wave spent is a retry the fault no longer has, and with runs longer than the waits a wave starts only the
    capacity's worth, so the herd may need more waves than retry_count + 1 and lose runs with no fault at all. A
    herd may need no wave beyond the first."""
    instances, concurrency = function["max_instance_count"], function["max_instance_request_concurrency"]
    capacity = instances * concurrency
    if herd.runs > capacity:
        waves = -(-herd.runs // capacity)
        rule = (
            f"the busiest minute, {herd.where()}, has {herd.runs} runs in flight at once (every job and the audit), "
            f"the function serves {capacity} ({instances} instances x concurrency {concurrency}): the rest are "
            f"answered 429 and wait for Scheduler's retry waves ({waves} waves of {capacity}; retry_count "
            f"{retry_count} gives {retry_count + 1}, and the one-fault rules count on the first alone); "
            f"a value that passes: function.max_instance_count {instances_for(herd, concurrency)}"
        )
        raise RuleError("function.max_instance_count", instances, rule)
