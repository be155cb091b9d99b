"""The JSON editor's check as you type (AMB-70): one field's value through the server's own checks.

The editor POSTs the text of one field; the answer is the messages the save would show for it: the
JSON syntax error of the shared form field (formfields), then every problem the field's one check
(mcp_app/definitions/checks.FIELDS, the model's clean() runs the same) finds. Nothing is saved and no tenant data is read, so any admin user may ask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponseNotAllowed, JsonResponse

from lib.formfields import PrettyJSONField
from mcp_app.definitions import checks

VALID = {"input_schema": "A valid JSON Schema.", "output_schema": "A valid JSON Schema."}


def check(model: str, field: str, raw: str, data: Mapping[str, str]) -> list[str]:
    """The messages saving `raw` in this field would show (none: it would be accepted)."""
    if not raw.strip():
        return []  # blank saves the model's default
    try:
        value = PrettyJSONField(required=False).to_python(raw)
    except ValidationError as exc:
        return exc.messages
    return checks.field_problems(model, field, value, data)


def check_view(model: str) -> Callable[[HttpRequest], Any]:
    """The view answering {"errors": [...], "ok": "..."} for one field of `model` (POST only)."""

    def view(request: HttpRequest) -> Any:
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        field = request.POST.get("field", "")
        raw = request.POST.get("value", "")
        errors = check(model, field, raw, request.POST)
        ok = "null: none." if raw.strip() == "null" else VALID.get(field, "Valid.")
        return JsonResponse({"errors": errors, "ok": ok})

    return view
