"""Structured logs: every record made while a request runs carries that request's fields.

`bind(...)` sets the fields of the running request (tenant, session, client, request id, method,
tool) in a context variable, so a log record made anywhere below it, the handler's included, gets
them through `RequestFields` (a logging filter on the handlers of settings.LOGGING). With
LOG_FORMAT=json, `JsonFormatter` writes one JSON object a line with those fields; the text format
ignores them. Argument values, tokens and headers are never among the fields.
"""

from __future__ import annotations

import contextvars
import logging
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _JsonFormatter

FIELDS = ("tenant", "session", "client", "request_id", "method", "tool")
_current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
    "mcp_log_fields", default=None
)


def bind(**fields: Any) -> contextvars.Token:
    """Set the running request's fields (None values are left out); undo with `unbind(token)`."""
    return _current.set({key: value for key, value in fields.items() if value is not None})


def unbind(token: contextvars.Token) -> None:
    _current.reset(token)


class RequestFields(logging.Filter):
    """Copy the running request's fields onto each record (attributes a formatter may use)."""

    def filter(self, record: logging.LogRecord) -> bool:
        fields = _current.get()
        if fields:
            for key, value in fields.items():
                if not hasattr(record, key):
                    setattr(record, key, value)
        return True


class JsonFormatter(_JsonFormatter):
    """One JSON object a line: time, level, logger, message, the request's fields and any `extra`."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("timestamp", "time")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        super().__init__("%(levelname)s %(name)s %(message)s", *args, **kwargs)
