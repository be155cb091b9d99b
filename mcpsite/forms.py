"""Form fields shared by every admin of the site: JSON edited as indented text."""

from __future__ import annotations

import json
from typing import Any

from django import forms
from django.core.exceptions import ValidationError
from django.db import models


class JSONTextarea(forms.Textarea):
    """Monospace textarea sized for JSON documents."""

    def __init__(self, attrs: dict[str, Any] | None = None) -> None:
        base = {"rows": 8, "cols": 80, "spellcheck": "false", "style": "font-family: monospace;"}
        super().__init__({**base, **(attrs or {})})


class WriteOnlyTextarea(JSONTextarea):
    """A textarea that never renders a value back, not even after a validation error."""

    def format_value(self, value: Any) -> None:
        return None


class PrettyJSONField(forms.JSONField):
    """A JSON form field that shows indented JSON and says where a syntax error is."""

    widget = JSONTextarea

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
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                "Invalid JSON: %(msg)s at line %(line)s, column %(col)s.",
                code="invalid",
                params={"msg": exc.msg, "line": exc.lineno, "col": exc.colno},
            ) from None

    def validate(self, value: Any) -> None:
        if self.required and value in (None, "", [], {}):
            raise ValidationError(self.error_messages["required"], code="required")

    def prepare_value(self, value: Any) -> Any:
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, ensure_ascii=False, indent=2)


def json_formfield(db_field: models.JSONField, **kwargs: Any) -> Any:
    """Return a pretty-printed JSON form field; a cleared box means the model default."""
    empty = None if db_field.null else db_field.get_default()
    return db_field.formfield(form_class=PrettyJSONField, empty_value=empty, **kwargs)
