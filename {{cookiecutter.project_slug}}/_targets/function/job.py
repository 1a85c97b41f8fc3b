"""The scheduled work: your room. Each job of your answers has its function below; replace its body.

Rules of the room:
- The work may be called again for the same run if an earlier attempt died after its effect but before recording
  it: key every side effect by `context.run_id` (put-if-absent, or an idempotency token downstream).
- Raise `TerminalJobError` when retrying cannot help; raise anything else to get a retry.
- The work runs in a worker process apart from the handler's, killed at the job's attempt deadline less 10 s
  (stop.py): no cleanup code runs then. A worker serves run after run, so a client you make at the first run (and
  keep in a module variable) serves the next ones. A run that leaves a process or a thread running, or changes the
  cwd, environment, a signal handler or the umask, gets its worker killed with all it started: wait for what you
  start. Make no client and call no API at import: this module is imported once into the fork server.
- `WORK` gives each job id (`context.job_id`, as you wrote it) its function. A job WORK lacks is refused
  `misconfigured` and retried until a deploy gives it work. Adding a job: config.yaml, a function, a line in WORK."""

import logging
from collections.abc import Callable

from run_context import RunContext, TerminalJobError, UnknownJob  # noqa: F401  (TerminalJobError: raise it from the work)

logger = logging.getLogger(__name__)
{#- A job's work function: its id as a Python name (a job id may start with a digit). #}
{%- macro work_function(job_id) %}{{ "job_" if job_id[0] in "0123456789" }}{{ job_id | replace("-", "_") }}_work{% endmacro %}
{%- for job_id in cookiecutter.jobs | sort %}


def {{ work_function(job_id) }}(context: RunContext) -> None:
    """The work of job {{ job_id }}, once per scheduled run."""
    logger.info("scheduled work for %s at %s", context.job_id, context.schedule_time.isoformat())
{%- endfor %}


WORK: dict[str, Callable[[RunContext], object]] = {
{%- for job_id in cookiecutter.jobs | sort %}
    {{ job_id | tojson }}: {{ work_function(job_id) }},
{%- endfor %}
}


def run(context: RunContext) -> object:
    """The work of the delivery's job."""
    work = WORK.get(context.job_id)
    if work is None:
        known = ", ".join(sorted(WORK))
        raise UnknownJob(f"job id {context.job_id!r} (Scheduler job {context.job_name!r}): not in job.WORK ({known})")
    return work(context)
