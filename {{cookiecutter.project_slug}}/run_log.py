"""The log lines of a delivery: one JSON line on stdout per record, stamped with the run's identity, in the handler's
process and the work's (stop.py) alike."""

import contextvars
import logging
import os
import sys
from collections.abc import Mapping
from types import MappingProxyType

import google.cloud.logging_v2
from google.cloud.logging.handlers import StructuredLogHandler

# The run's identity, stamped on every line logged while a delivery is handled (the job's too).
RUN_FIELDS: contextvars.ContextVar[Mapping[str, object]] = contextvars.ContextVar(
    "run_fields", default=MappingProxyType({})
)
# Set by `make dev` (scheduled_dedup_tools.dev_server): one short line per record for a person, not JSON.
TEXT_LOGS_ENV = "TEXT_LOGS"


class RunFieldsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        record.json_fields = {**RUN_FIELDS.get(), **getattr(record, "json_fields", {})}
        return True


class TextFormatter(logging.Formatter):
    """One short line per record: what the JSON line says, for a terminal."""

    def format(self, record: logging.LogRecord) -> str:
        fields = getattr(record, "json_fields", {})
        message = record.getMessage()
        if record.exc_info and record.exc_info[1] is not None:
            message += f" ({type(record.exc_info[1]).__name__}: {record.exc_info[1]})"
        if "duration_ms" in fields:
            message += f" [{fields['duration_ms']} ms]"
        parts = [self.formatTime(record, "%H:%M:%S"), f"{record.levelname:<7}"]
        parts += [str(fields[name]) for name in ("outcome", "job", "schedule_time") if fields.get(name) is not None]
        return " ".join([*parts, " | ".join(message.splitlines())])


def configure_logging() -> None:
    """One JSON line on stdout per record, which Cloud Run turns into a structured entry (no Logging API call). Ours
    is the root logger's only handler: functions-framework (3.10.2, create_app) adds its own before it loads main.py
    (LOG_EXECUTION_ID, ENTRY_POINT), each printing every record again without severity: twice the log volume."""
    if os.environ.get(TEXT_LOGS_ENV):
        handler = logging.StreamHandler(sys.stdout)
        handler.setFormatter(TextFormatter())
    else:
        handler = StructuredLogHandler(stream=sys.stdout)
    handler.addFilter(RunFieldsFilter())
    root = logging.getLogger()
    root.handlers = [handler]
    root.setLevel(logging.INFO)


def configure_work_logging(fields: Mapping[str, object]) -> None:
    """Logging in the work's process (stop.py), stamped with the run's `fields`. The library's one diagnostic line
    per process (google-cloud-logging 3.17.0, StructuredLogHandler.emit) is the handler's to print, not once per run."""
    configure_logging()
    google.cloud.logging_v2._instrumentation_emitted = True
    RUN_FIELDS.set(dict(fields))
