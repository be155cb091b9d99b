"""JSON-RPC 2.0 framing: error classes (one funnel) and message constructors."""

from __future__ import annotations

from typing import Any, Literal

from mcp_app.core.errors import cut, error_object

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002  # legacy era only; 2026-07-28 answers INVALID_PARAMS
# 2026-07-28 (the range -32020..-32099 is the specification's own).
HEADER_MISMATCH = -32020
MISSING_REQUIRED_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

RequestId = str | int


class JsonRpcError(Exception):
    """A protocol fault; becomes {"error": ...} on the wire."""

    code: int = INTERNAL_ERROR
    message: str = "Internal error"

    def __init__(self, message: str | None = None, data: Any = None) -> None:
        super().__init__(message or self.message)
        if message:
            self.message = message
        self.data = data

    def to_error(self) -> dict[str, Any]:
        return error_object(self.code, self.message, self.data)


class ParseError(JsonRpcError):
    code, message = PARSE_ERROR, "Parse error"


class InvalidRequest(JsonRpcError):
    code, message = INVALID_REQUEST, "Invalid request"


class MethodNotFound(JsonRpcError):
    code, message = METHOD_NOT_FOUND, "Method not found"


class InvalidParams(JsonRpcError):
    code, message = INVALID_PARAMS, "Invalid params"


class HeaderMismatch(JsonRpcError):
    """2026-07-28: a standard or Mcp-Param-* header disagrees with the body (HTTP 400)."""

    code, message = HEADER_MISMATCH, "Header mismatch"


class InternalError(JsonRpcError):
    code, message = INTERNAL_ERROR, "Internal error"


class ResourceNotFound(JsonRpcError):
    code, message = RESOURCE_NOT_FOUND, "Resource not found"


class MissingRequiredClientCapability(JsonRpcError):
    """2026-07-28: the request needs a client capability (or extension) it did not declare; `data`
    is `{"requiredCapabilities": ...}`, shaped like ClientCapabilities."""

    code, message = MISSING_REQUIRED_CLIENT_CAPABILITY, "Missing required client capability"


def response(request_id: RequestId | None, result: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: RequestId | None, error: JsonRpcError) -> dict[str, Any]:
    # A message with no usable id is answered with "id": null, as JSON-RPC 2.0 says (AMB-11).
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error()}


def notification(method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
    if params is not None:
        message["params"] = params
    return message


# --- Message classification (used by dispatch and by the transport to pick 202 vs a response) ---

MessageKind = Literal["request", "notification", "response"]

# Error texts that reach the wire are capped: a handler exception or a jsonschema error can embed
# the whole offending input, and the client must never get an unbounded echo of it.
MAX_ERROR_TEXT = 500


def truncate(text: str, limit: int = MAX_ERROR_TEXT) -> str:
    """Cap `text` at `limit` characters, marking the cut (error messages default to MAX_ERROR_TEXT)."""
    return cut(text, limit)


def is_valid_id(value: object) -> bool:
    """True for a usable JSON-RPC request id: a string or an integer, never null, bool or float (BP-04)."""
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def usable_id(message: object) -> RequestId | None:
    """Return the message's id when it is usable for an error reply, else None (answered as "id": null)."""
    if isinstance(message, dict):
        value = message.get("id")
        if is_valid_id(value):
            return value
    return None


def classify(message: object) -> MessageKind:
    """Tell a request from a notification from a response; raise InvalidRequest for anything else."""
    if not isinstance(message, dict):
        raise InvalidRequest("A JSON-RPC message must be a JSON object.")
    if message.get("jsonrpc") != "2.0":
        raise InvalidRequest('The "jsonrpc" member must be exactly "2.0".')
    if "method" in message:
        if not isinstance(message["method"], str) or not message["method"]:
            raise InvalidRequest('The "method" member must be a non-empty string.')
        if "params" in message and not isinstance(message["params"], dict):
            raise InvalidRequest('The "params" member must be a JSON object.')
        if "id" not in message:
            return "notification"
        if not is_valid_id(message["id"]):
            raise InvalidRequest(
                'A request "id" must be a string or an integer (not null, boolean or fractional).'
            )
        return "request"
    if "id" in message and (("result" in message) != ("error" in message)):
        return "response"
    raise InvalidRequest("The message is neither a request, a notification nor a response.")


def is_initialize(message: object) -> bool:
    """True when `message` is an initialize request (the one request that may come without a session)."""
    return isinstance(message, dict) and message.get("method") == "initialize" and "id" in message
