"""The API's JSON bodies, read through the one nesting rule (AMB-115, AMB-119).

DRF's own JSONParser hands the body to json.load, which recurses once per level: a body nested a few
thousand deep ended in RecursionError and a 500. This one reads at most the largest document the
API takes, checks the nesting first and answers DRF's ParseError (400, the one error shape).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser

from mcp_app.portability.document import MAX_DOCUMENT_BYTES
from mcpsite import nesting


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"
    default_detail = f"The request body is larger than {MAX_DOCUMENT_BYTES // 1024 // 1024} MiB."


class BoundedJSONParser(JSONParser):
    """JSON bodies no larger than a tenant document and no deeper than MCP_MAX_JSON_DEPTH."""

    def parse(self, stream: Any, media_type: str | None = None, parser_context: dict | None = None) -> Any:
        raw = stream.read(MAX_DOCUMENT_BYTES + 1)
        if len(raw) > MAX_DOCUMENT_BYTES:
            raise BodyTooLarge
        encoding = (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET
        try:
            return nesting.loads(raw.decode(encoding))
        except LookupError:
            raise ParseError(f"Unsupported charset {encoding!r} in the Content-Type header.") from None
        except ValueError as exc:  # TooDeep, bad JSON, NaN and undecodable bytes alike
            raise ParseError(f"JSON parse error - {exc}") from None
