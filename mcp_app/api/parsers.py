"""The API's JSON bodies, read through the one nesting rule (AMB-115, AMB-119).

DRF's own JSONParser hands the body to json.load, which recurses once per level: a body nested a few
thousand deep ended in RecursionError and a 500. This one reads at most the largest document the
API takes, checks the nesting first and answers DRF's ParseError (400, the one error shape).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from rest_framework import status
from rest_framework.exceptions import APIException, ParseError
from rest_framework.parsers import JSONParser

from lib import nesting
from mcp_app.portability.limits import DocumentTooLarge, max_upload_bytes, refuse_large


class BodyTooLarge(APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "too_large"


def _refuse_large(size: int) -> None:
    try:
        refuse_large(size)
    except DocumentTooLarge as exc:
        raise BodyTooLarge(exc.problems[0][1]) from None


class BoundedJSONParser(JSONParser):
    """JSON bodies no larger than MCP_MAX_UPLOAD_BYTES (AMB-278: its size said by Content-Length is
    refused before the body is read, a body longer than it says before it is parsed) and no deeper than
    MCP_MAX_JSON_DEPTH."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        try:
            return read_bounded(stream, parser_context).parse()
        except BodyUnreadable as exc:
            raise ParseError(str(exc)) from None


class DeferredJSONParser(BoundedJSONParser):
    """A body read within MCP_MAX_UPLOAD_BYTES but not parsed: `request.data` is a `JSONBody`, parsed by
    the work that takes it in a process of its own (a tenant document: parsing a megabyte holds the GIL
    for some 50 ms, a stall of every request this server is serving)."""

    def parse(
        self, stream: Any, media_type: str | None = None, parser_context: Mapping[str, Any] | None = None
    ) -> Any:
        return read_bounded(stream, parser_context)


class BodyUnreadable(Exception):  # noqa: N818 - the words of a ParseError, raised where DRF is not
    """A body that is not JSON the API reads; its message is the ParseError's (picklable, unlike it)."""


@dataclass(frozen=True)
class JSONBody:
    """A request's JSON body as read, and the charset it declared."""

    raw: bytes
    encoding: str

    def parse(self) -> Any:
        """The JSON value; BodyUnreadable past the nesting limit, for bad JSON or an unknown charset."""
        try:
            return nesting.loads(self.raw.decode(self.encoding))
        except LookupError:
            raise BodyUnreadable(
                f"Unsupported charset {self.encoding!r} in the Content-Type header."
            ) from None
        except ValueError as exc:  # TooDeep, bad JSON, NaN and undecodable bytes alike
            raise BodyUnreadable(f"JSON parse error - {exc}") from None


def read_bounded(stream: Any, parser_context: Mapping[str, Any] | None) -> JSONBody:
    """The body, refused past MCP_MAX_UPLOAD_BYTES: by its Content-Length before it is read, by its
    length before it is parsed (AMB-278)."""
    request = (parser_context or {}).get("request")
    declared = request.META.get("CONTENT_LENGTH") if request is not None else None
    if declared and str(declared).isdigit():
        _refuse_large(int(declared))
    limit = max_upload_bytes()
    raw = stream.read(limit + 1)
    if len(raw) > limit:
        _refuse_large(len(raw))
    return JSONBody(raw, (parser_context or {}).get("encoding") or settings.DEFAULT_CHARSET)
