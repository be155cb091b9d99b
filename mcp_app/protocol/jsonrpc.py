"""JSON-RPC 2.0 framing: error classes (one funnel) and message constructors."""

from __future__ import annotations

from typing import Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002

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
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not None:
            error["data"] = self.data
        return error


class ParseError(JsonRpcError):
    code, message = PARSE_ERROR, "Parse error"


class InvalidRequest(JsonRpcError):
    code, message = INVALID_REQUEST, "Invalid request"


class MethodNotFound(JsonRpcError):
    code, message = METHOD_NOT_FOUND, "Method not found"


class InvalidParams(JsonRpcError):
    code, message = INVALID_PARAMS, "Invalid params"


class InternalError(JsonRpcError):
    code, message = INTERNAL_ERROR, "Internal error"


class ResourceNotFound(JsonRpcError):
    code, message = RESOURCE_NOT_FOUND, "Resource not found"


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
