"""Failures a definition's handler reports, and the tool result that carries one to the model.

Shared by the handlers (which raise), the content renderer (ContentError), the protocol core and the
background worker (which turn them into `isError` results): one place, below all of them.
"""

from __future__ import annotations

from typing import Any

GENERIC_TOOL_ERROR = "The tool failed with an internal error."
# Longest error text put into a tool result; the rest is cut with a mark.
MAX_RESULT_ERROR_CHARS = 2000


class HandlerError(Exception):
    """A failure whose message is safe to show to the client (no internals)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class ToolError(HandlerError):
    """A tool-level failure the model should see: becomes an ``isError`` result."""


class ContentError(HandlerError):
    """A content spec that cannot be turned into a content block (unknown resource, bad template)."""


class UnknownKind(HandlerError):
    """The row names a handler kind that is not registered."""


class AskOutcome(Exception):
    """Asking the client ended this run at the protocol level (not a tool error): see protocol.asking."""


class InputRequired(AskOutcome):
    """2026-07-28: the answers to `requests` (name -> request) are not known yet; the call returns an
    InputRequiredResult asking them all in one round."""

    def __init__(self, requests: dict[str, dict[str, Any]]) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


class GoAsync(AskOutcome):
    """2026-07-28, a call that may become a task: the handler has asked its questions in rounds
    (`ctx.as_task()`), so the call answers with a task that runs it again with their answers (AMB-286)."""

    def __init__(self) -> None:
        super().__init__("the handler goes on as a task")


class MissingCapability(AskOutcome):
    """2026-07-28: the request did not declare the client capability the ask needs (-32021)."""

    def __init__(self, capability: str) -> None:
        super().__init__(f"missing client capability: {capability}")
        self.capability = capability


class ProtocolError(Exception):
    """A handler's failure at the protocol level (AMB-285): the call answers a JSON-RPC error, and a
    task running it ends `failed` with that error, never `completed` with an isError result. Raised by
    a python tool, or for an http tool's streamed `error` event. `message` goes to the client as is."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        return error_object(self.code, self.message, self.data)


def error_object(code: int, message: str, data: Any = None) -> dict[str, Any]:
    """A JSON-RPC error object (`data` only when there is some)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return error


def cut(text: str, limit: int) -> str:
    """Cap `text` at `limit` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def error_result(text: str) -> dict[str, Any]:
    """A tool execution error: a result the model can read and act on, not a protocol error (TL-07)."""
    return {"content": [{"type": "text", "text": cut(text, MAX_RESULT_ERROR_CHARS)}], "isError": True}
