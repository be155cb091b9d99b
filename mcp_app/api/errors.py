"""One JSON shape for every error of the API: {"error": {"code", "message", "fields"}}.

DRF's exception funnel (REST_FRAMEWORK["EXCEPTION_HANDLER"]) routes every error through `handle`;
anything unexpected is logged and answered 500 in the same shape, internals never on the wire.
"""

from __future__ import annotations

import logging
from typing import Any

from django.core.exceptions import PermissionDenied
from django.core.exceptions import ValidationError as DjangoValidationError
from django.http import Http404, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework import exceptions, serializers, status
from rest_framework.response import Response
from rest_framework.views import exception_handler

from mcp_app.catalog import apart

logger = logging.getLogger(__name__)

NOT_FOUND = "Not found."


class ErrorBodySerializer(serializers.Serializer):
    code = serializers.CharField(help_text="Machine-readable: not_found, permission_denied, invalid, ...")
    message = serializers.CharField(help_text="What went wrong, in a sentence for people.")
    # The error body's key "fields": DRF's metaclass moves a declared field into _declared_fields, so
    # the serializer's own `fields` property stays; the stubs see the class attribute only.
    fields = serializers.DictField(  # type: ignore[assignment]
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Field name → its error messages (validation errors only).",
    )


class ErrorSerializer(serializers.Serializer):
    """The body of every error response."""

    error = ErrorBodySerializer()


def django_errors(error: DjangoValidationError) -> dict[str, list[str]]:
    """A model's full_clean errors as field → messages ("non_field_errors" for the whole row)."""
    if hasattr(error, "error_dict"):
        out: dict[str, list[str]] = {}
        for field, errors in error.message_dict.items():
            key = "non_field_errors" if field == "__all__" else field
            out.setdefault(key, []).extend(errors)
        return out
    return {"non_field_errors": list(error.messages)}


def _flatten(detail: Any, prefix: str = "") -> dict[str, list[str]]:
    """DRF's nested error detail as dotted field paths → messages."""
    if isinstance(detail, dict):
        out: dict[str, list[str]] = {}
        for key, value in detail.items():
            path = f"{prefix}.{key}" if prefix else str(key)
            for field, messages in _flatten(value, path).items():
                out.setdefault(field, []).extend(messages)
        return out
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return {prefix or "non_field_errors": [str(item) for item in detail]}
        out = {}
        for index, value in enumerate(detail):
            for field, messages in _flatten(value, f"{prefix}.{index}" if prefix else str(index)).items():
                out.setdefault(field, []).extend(messages)
        return out
    return {prefix or "non_field_errors": [str(detail)]}


def error_response(status_code: int, code: str, message: str, fields: dict | None = None) -> Response:
    body: dict[str, Any] = {"code": code, "message": message}
    if fields:
        body["fields"] = fields
    return Response({"error": body}, status=status_code)


def handle(exc: Exception, context: dict[str, Any]) -> Response:
    """The API's exception handler: every error, expected or not, in the one shape."""
    if isinstance(exc, DjangoValidationError):
        exc = exceptions.ValidationError(django_errors(exc))
    if isinstance(exc, Http404):
        exc = exceptions.NotFound(NOT_FOUND)  # the same words for a missing and a hidden object
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied(str(exc) or None)
    elif isinstance(exc, apart.Unfinished):
        return error_response(status.HTTP_503_SERVICE_UNAVAILABLE, "unfinished", f"{exc} Try again.")
    response = exception_handler(exc, context)
    if response is None:
        logger.exception("management API error", exc_info=exc)
        return error_response(status.HTTP_500_INTERNAL_SERVER_ERROR, "server_error", "Internal server error.")
    if isinstance(exc, exceptions.ValidationError):
        fields = _flatten(exc.detail)
        general = fields.pop("non_field_errors", [])
        message = " ".join(general) or "The request is not valid: see fields."
        out = error_response(response.status_code, "invalid", message, fields)
    else:
        detail = exc.detail if isinstance(exc, exceptions.APIException) else str(exc)
        code = exc.get_codes() if isinstance(exc, exceptions.APIException) else "error"
        out = error_response(
            response.status_code,
            code if isinstance(code, str) else "error",
            str(detail) if not isinstance(detail, dict | list) else " ".join(map(str, _flatten(detail).values())),
        )
    for header in ("WWW-Authenticate", "Allow", "Retry-After"):
        if header in response:
            out[header] = response[header]
    return out


@csrf_exempt  # a 404 changes nothing; without this, a cookie-carrying POST got the CSRF page (HTML)
def not_found(request: Any, *args: Any, **kwargs: Any) -> JsonResponse:
    """Any URL under /api/v1/ that names nothing: the same JSON 404 as a missing object."""
    return JsonResponse({"error": {"code": "not_found", "message": NOT_FOUND}}, status=404)
