"""Print the run_id (the Firestore document id) of one scheduled run: `python tools/run_id.py JOB TIME`.

Computed by dedup.RunKey itself, from the same inputs the handler keys on: the job id, the
schedule time (any RFC 3339 spelling: it is normalised to UTC first, as the handler does) and the
project/location (default: the baked DEDUP_PROJECT / DEDUP_LOCATION, or those env variables).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the project root: dedup.py
import dedup  # noqa: E402


def run_key(job: str, time: str, project: str | None = None, location: str | None = None) -> dedup.RunKey:
    config = dedup.DedupConfig.from_env()
    return dedup.RunKey(
        project=project or config.project,
        location=location or config.location,
        job_name=job,
        schedule_time=dedup.parse_schedule_time(time),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("job", help="Cloud Scheduler job id (X-CloudScheduler-JobName)")
    parser.add_argument("time", help="schedule time, RFC 3339 (X-CloudScheduler-ScheduleTime)")
    parser.add_argument("--project", help="the X-Scheduler-Project the run was keyed under")
    parser.add_argument("--location", help="the X-Scheduler-Location the run was keyed under")
    args = parser.parse_args(argv)
    try:
        key = run_key(args.job, args.time, args.project, args.location)
    except dedup.Misconfigured as error:  # a DEDUP_* setting: it names itself
        print(error, file=sys.stderr)
        return 2
    except ValueError as error:
        print(f"TIME={args.time!r}: {error}", file=sys.stderr)
        return 2
    print(key.run_id)
    return 0


if __name__ == "__main__":
    sys.exit(main())
