"""Form fields shared by every admin of the site: JSON edited in a structured editor (AMB-70).

The editor is JSONEditor as shipped by django-json-widget, served from our own static files; our own
template and script keep the real textarea as the submitted value (the exact text typed, so the
server's "Invalid JSON ... at line, column" stays the one verdict) and check it as you type.

In lib/, the bottom, below tenants/ and mcp_app/ whose admins use it (AMB-320); it imports nothing of
the project but the nesting limit beside it.
"""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models
from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString

from lib import nesting


class JSONTextarea(forms.Textarea):
    """Monospace textarea sized for JSON documents."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        base = {"rows": 8, "cols": 80, "spellcheck": "false", "style": "font-family: monospace;"}
        super().__init__({**base, **(attrs or {})})


class JSONEditorWidget(JSONTextarea):
    """A JSON textarea that the browser turns into a tree/code editor, checked as you type.

    Without JavaScript it stays the plain textarea. `check_url`, when given, is where the script
    POSTs the value to hear the server's own validation of this field (mcp_app.admin.json_check).
    `structured`, when set by a form, names the table or editor a script builds over the JSON
    (static/mcpsite/schema_table.js: "schema", "form_fields", "prompt_arguments", "messages"; AMB-261).
    """

    class Media:
        css = {"all": ("dist/jsoneditor.min.css", "mcpsite/json_editor.css")}
        js = ("dist/jsoneditor.min.js", "mcpsite/json_editor.js")

    def __init__(self, attrs: dict[str, Any] | None = None, check_url: str = "", field: str = "") -> None:
        super().__init__(attrs)
        self.check_url = check_url
        self.field = field
        self.structured = ""

    def render(
        self, name: str, value: Any, attrs: dict[str, Any] | None = None, renderer: Any = None
    ) -> SafeString:
        # Rendered here, not by a template: the form renderer only searches apps' templates, and the
        # tenant admin (which may not depend on mcp_app) uses this widget too.
        textarea = super().render(name, value, attrs, renderer)
        return format_html(
            '<div class="json-editor" data-json-editor data-field="{}" data-check-url="{}" data-structured="{}" data-worker-url="{}">{}'
            '<div class="json-editor-box" hidden></div>'
            '<p class="json-editor-status" role="status" aria-live="polite"></p></div>',
            self.field or name,
            self.check_url,
            self.structured,
            reverse("json-editor-worker"),  # lib/ace_worker.py, AMB-233
            textarea,
        )


class WriteOnlyTextarea(JSONTextarea):
    """A textarea that never renders a value back, not even after a validation error."""

    def format_value(self, value: Any) -> None:
        return None


class PrettyJSONField(forms.JSONField):
    """A JSON form field that shows indented JSON and says where a syntax error is."""

    widget = JSONEditorWidget

    def __init__(self, *args: Any, empty_value: Any = None, **kwargs: Any) -> None:
        # A cleared textarea means "no value": the model default ([] or {}), not SQL NULL.
        self.empty_json_value = empty_value
        kwargs.pop("max_length", None)
        super().__init__(*args, **kwargs)

    def to_python(self, value: Any) -> Any:
        if self.disabled:
            return value
        if value in self.empty_values:
            return self.empty_json_value
        if isinstance(value, list | dict | int | float):
            return value
        try:
            return nesting.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                "Invalid JSON: %(msg)s at line %(line)s, column %(col)s.",
                code="invalid",
                params={"msg": exc.msg, "line": exc.lineno, "col": exc.colno},
            ) from None
        except ValueError as exc:  # nested too deep (the limit named), NaN or Infinity
            raise ValidationError("Invalid JSON: %(why)s.", code="invalid", params={"why": exc}) from None

    def bound_data(self, data: Any, initial: Any) -> Any:
        # Django's own re-parses what was typed to show it again, with json.loads: bounded here too.
        if self.disabled:
            return initial
        if data is None:
            return None
        try:
            return nesting.loads(data)
        except ValueError:
            return forms.fields.InvalidJSONInput(data)

    def validate(self, value: Any) -> None:
        if self.required and value in (None, "", [], {}):
            raise ValidationError(self.error_messages["required"], code="required")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2)


def json_formfield(db_field: models.JSONField, check_url: str = "", **kwargs: Any) -> Any:
    """Return a JSON form field in the structured editor; a cleared box means the model default.

    `check_url`: where the editor asks the server to check the value as it is typed (optional).
    """
    empty = None if db_field.null else db_field.get_default()
    kwargs.setdefault("widget", JSONEditorWidget(check_url=check_url, field=db_field.name))
    return db_field.formfield(form_class=PrettyJSONField, empty_value=empty, **kwargs)
