"""The JSON editor's check as you type (AMB-70): one field's value through the server's own checks.

The editor POSTs the text of one field; the answer is the messages the save would show for it: the
JSON syntax error of the shared form field (formfields), then the field's check from
mcp_app/validation.py. Nothing is saved and no tenant data is read, so any admin user may ask.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponseNotAllowed, JsonResponse

from formfields import PrettyJSONField
from mcp_app import validation
from mcp_app.content.fields import validate_annotations, validate_icons, validate_meta

Check = Callable[[Any, Mapping[str, str]], None]


def _input_schema(value: Any, _data: Mapping[str, str]) -> None:
    validation.validate_object_schema(value, "Input schema")
    validation.validate_x_mcp_headers(value)


def _output_schema(value: Any, _data: Mapping[str, str]) -> None:
    if value is not None:
        validation.validate_object_schema(value, "Output schema", object_root=False)


def _tool_handler(value: Any, data: Mapping[str, str]) -> None:
    if data.get("handler"):
        validation.validate_handler(data["handler"], value)


def _template_handler(value: Any, data: Mapping[str, str]) -> None:
    if data.get("handler"):
        validation.validate_template_handler(data["handler"], value)


def _only(check: Callable[[Any], None]) -> Check:
    return lambda value, _data: check(value)


_COMMON: dict[str, Check] = {"icons": _only(validate_icons), "meta": _only(validate_meta)}

# model name → field → the check its model's clean() runs on it (mcp_app/validation.py).
CHECKS: dict[str, dict[str, Check]] = {
    "tool": {
        "input_schema": _input_schema,
        "output_schema": _output_schema,
        "handler_config": _tool_handler,
        "annotations": _only(validation.validate_tool_annotations),
        **_COMMON,
    },
    "prompt": {
        "arguments": _only(validation.validate_prompt_arguments),
        "messages": _only(validation.validate_prompt_messages),
        **_COMMON,
    },
    "resource": {"annotations": _only(validate_annotations), **_COMMON},
    "resourcetemplate": {
        "handler_config": _template_handler,
        "completions": lambda value, data: validation.validate_template_completions(
            data.get("uri_template", ""), value
        ),
        "annotations": _only(validate_annotations),
        **_COMMON,
    },
}

VALID = {"input_schema": "A valid JSON Schema.", "output_schema": "A valid JSON Schema."}


def check(model: str, field: str, raw: str, data: Mapping[str, str]) -> list[str]:
    """The messages saving `raw` in this field would show (none: it would be accepted)."""
    if not raw.strip():
        return []  # blank saves the model's default
    try:
        value = PrettyJSONField(required=False).to_python(raw)
    except ValidationError as exc:
        return exc.messages
    checker = CHECKS.get(model, {}).get(field)
    if checker is None:
        return []
    try:
        checker(value, data)
    except ValidationError as exc:
        return exc.messages
    return []


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
