"""When a job fires: the one module that expands a job's cron (cronsim) in its time zone (handler, audit, tools).

The cron names wall-clock times of the job's zone. Daylight saving makes some of them happen twice (fall back) or
never (spring forward). One rule per job, like Debian cron (and cronsim's zone-aware mode):
- a time that happens twice runs once, at its first instant;
- a time that does not exist runs once at the end of the gap (`dst_gap: end_of_gap`, the default), or not at all
  (`dst_gap: skip`); several skipped times, or one and a real fire time at the gap's end, are one run.
What Scheduler sends for such a time is not documented: it "runs on wall clock time" and a job may "run or not run
unexpectedly" (https://cloud.google.com/scheduler/docs/configuring/cron-job-schedules#time_zone). So every instant
a delivery may carry for one wall-clock time (both of a repeated time; for a skipped one, the gap's end and the time
read with either offset) is a *reading* of that fire time, and the handler keys the run by its one instant."""

from __future__ import annotations

import dataclasses
import datetime as dt
import enum
import functools
import zoneinfo

from cronsim import CronSim

import rules

DST_GAP_RULES = rules.JOB_CHOICES["dst_gap"]
END_OF_GAP, SKIP = DST_GAP_RULES
# How far apart the function's clock and Scheduler's may be: a delivery dated after now + this is a Force run, and
# the latest schedule time accepted is the next fire time + this (keys.read_run_key).
CLOCK_MARGIN = dt.timedelta(seconds=60)
# Daylight saving moves a wall-clock time by at most 2 h (Antarctica/Troll): walk the cron this far beyond a window.
WALL_CLOCK_MARGIN = dt.timedelta(hours=3)
# How far ahead the next fire time is looked for (a Feb 29 schedule fires every 4 years, 8 across 2100).
SEARCH_YEARS = 9


class Dst(enum.StrEnum):
    AMBIGUOUS = "ambiguous"  # the wall-clock time happens twice: runs at the first
    NONEXISTENT = "nonexistent"  # the clocks skip it: runs at the gap's end, or not (dst_gap: skip)


@dataclasses.dataclass(frozen=True)
class Schedule:
    cron: str
    time_zone: str
    dst_gap: str = END_OF_GAP


@dataclasses.dataclass(frozen=True)
class FireTime:
    wall: dt.datetime  # naive: the time on the zone's wall clock, as the cron means it
    instant: dt.datetime | None  # UTC: the run's schedule time; None when dst_gap is skip and the time is skipped
    readings: tuple[dt.datetime, ...]  # every instant a delivery for it may carry (UTC)
    dst: Dst | None = None

    @property
    def moment(self) -> dt.datetime:
        """Its instant, or for a skipped one the gap's end."""
        return self.instant or self.readings[0]


def _utc(wall: dt.datetime, zone: zoneinfo.ZoneInfo, fold: int) -> dt.datetime:
    return wall.replace(tzinfo=zone, fold=fold).astimezone(dt.UTC)


def _gap_end(before: dt.datetime, after: dt.datetime, zone: zoneinfo.ZoneInfo) -> dt.datetime:
    """The instant the clock jumps forward, between `before` (old offset) and `after` (new offset)."""
    old = before.astimezone(zone).utcoffset()
    while after - before > dt.timedelta(minutes=1):
        middle = before + (after - before) / 2
        if middle.astimezone(zone).utcoffset() == old:
            before = middle
        else:
            after = middle
    return after.replace(second=0, microsecond=0)


def _readings(wall: dt.datetime, zone: zoneinfo.ZoneInfo) -> tuple[tuple[dt.datetime, ...], Dst | None]:
    """Every instant a delivery for the wall-clock time `wall` may carry, the likeliest first."""
    first, second = _utc(wall, zone, 0), _utc(wall, zone, 1)
    if first == second:
        return (first,), None
    if first.astimezone(zone).replace(tzinfo=None) == wall:  # happens twice: fold 0 is the first
        return (first, second), Dst.AMBIGUOUS
    # Never happens: fold 0 reads it with the old offset (later), fold 1 with the new one.
    return (_gap_end(second, first, zone), first, second), Dst.NONEXISTENT


def fire_times(schedule: Schedule, since: dt.datetime, until: dt.datetime) -> list[FireTime]:
    """The fire times whose moment lies in [since, until), in time order (skipped ones included, instant None).
    When the job runs is cronsim's zone-aware mode ('*' in the minute or hour field: a repeated hour runs twice, a
    skipped one never); the naive walk adds the other readings of each wall-clock time."""
    zone = zoneinfo.ZoneInfo(schedule.time_zone)
    low, high = since - WALL_CLOCK_MARGIN, until + WALL_CLOCK_MARGIN
    run_at: list[dt.datetime] = []
    for moment in CronSim(schedule.cron, (low - dt.timedelta(microseconds=1)).astimezone(zone)):
        if moment.astimezone(dt.UTC) >= high:
            break
        run_at.append(moment.astimezone(dt.UTC))
    runs_at = set(run_at)
    on_time: set[dt.datetime] = set()  # run at a reading of their own wall time, not moved by a gap
    owned: dict[dt.datetime, FireTime] = {}
    skipped: dict[dt.datetime, FireTime] = {}
    start = low.astimezone(zone).replace(tzinfo=None) - WALL_CLOCK_MARGIN
    end = high.astimezone(zone).replace(tzinfo=None) + WALL_CLOCK_MARGIN
    for wall in CronSim(schedule.cron, start):  # naive: cronsim walks the wall clock, no DST rule of its own
        if wall >= end:
            break
        readings, dst = _readings(wall, zone)
        running = [moment for moment in readings if moment in runs_at]
        if dst is not Dst.NONEXISTENT:
            on_time.update(running)
        if not running:  # a skipped time cronsim does not run: one entry per gap
            other = skipped.get(readings[0])
            merged = tuple(dict.fromkeys((other.readings if other else ()) + readings))
            skipped[readings[0]] = FireTime((other or FireTime(wall, None, ())).wall, None, merged, dst)
            continue
        for moment in running:  # a reading that is a run's own instant is that run's; the earliest wall names it
            if moment not in owned:
                owned[moment] = FireTime(wall, moment, (moment,), dst)
        owner = owned[running[0]]
        extra = tuple(moment for moment in readings if moment not in runs_at)
        owned[running[0]] = dataclasses.replace(owner, readings=tuple(dict.fromkeys(owner.readings + extra)))
    fires = list(skipped.values())
    for moment, fire in owned.items():
        moved = moment not in on_time
        fires.append(dataclasses.replace(fire, instant=None) if moved and schedule.dst_gap == SKIP else fire)
    return sorted((fire for fire in fires if since <= fire.moment < until), key=lambda fire: fire.moment)


def runs(schedule: Schedule, since: dt.datetime, until: dt.datetime) -> list[FireTime]:
    """The fire times in [since, until) the job runs for (what the audit expects)."""
    return [fire for fire in fire_times(schedule, since, until) if fire.instant is not None]


def next_fire_after(schedule: Schedule, instant: dt.datetime) -> dt.datetime | None:
    """The first schedule time the job runs for after `instant`; None if none within SEARCH_YEARS."""
    after = instant + dt.timedelta(microseconds=1)
    for days in (2, 62, 400, SEARCH_YEARS * 366):
        found = runs(schedule, after, instant + dt.timedelta(days=days))
        if found:
            return found[0].instant
    return None


@functools.lru_cache(maxsize=1024)  # a replay asks what its run's first delivery asked: the answer never changes
def fire_time_of(schedule: Schedule, delivered: dt.datetime) -> FireTime | None:
    """The fire time a delivery's schedule time is a reading of; None if it is none (a schedule since changed)."""
    for fire in fire_times(schedule, delivered - WALL_CLOCK_MARGIN, delivered + WALL_CLOCK_MARGIN):
        if delivered in fire.readings:
            return fire
    return None
