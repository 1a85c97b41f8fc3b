"""The scheduled work: your room. Replace the body of `run`; it touches nothing but what the work needs.

Rules of the room:
- `run` may be called again for the same scheduled run if an earlier attempt died after doing its
  effect but before recording it (see docs/how-it-works.md). Key every side effect by
  `context.run_id` (put-if-absent, or an idempotency token downstream) and a repeat is harmless.
- Raise `TerminalJobError` when retrying cannot help; raise anything else to get a retry.
"""

import logging

from run_context import RunContext, TerminalJobError  # noqa: F401  (TerminalJobError: raise it from run)

logger = logging.getLogger(__name__)


def run(context: RunContext) -> None:
    """Does the scheduled work once per scheduled run."""
    logger.info("scheduled work for %s at %s", context.job_name, context.schedule_time.isoformat())
