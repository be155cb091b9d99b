"""Admin forms: tool handler choices and secrets, resource uploads (JSON fields: formfields)."""

from __future__ import annotations

import json
import mimetypes
from typing import Any, cast

from django import forms
from django.core.exceptions import ValidationError
from django.utils.html import format_html_join

from lib import nesting
from lib.formfields import WriteOnlyTextarea
from mcp_app.admin import kind_examples, kind_form
from mcp_app.handlers import python, registry
from mcp_app.handlers.secrets import check_secret_headers, encrypt_secrets, secret_names
from mcp_app.models import MAX_UPLOAD_BYTES, Prompt, Resource, ResourceTemplate, Tool

# Key of handler_config naming the registered callable of a `python` tool.
PYTHON_CALLABLE_KEY = "callable"


def _kind_choices() -> list[tuple[str, str]]:
    return list(registry.kind_choices())


def _template_kind_choices() -> list[tuple[str, str]]:
    return list(registry.template_kind_choices())


def _python_names() -> list[str]:
    return sorted(python.registered_names())


def secret_summary(tool: Tool) -> str:
    """Return e.g. "Authorization (set)." for display; never a value."""
    names = secret_names(tool.handler_secrets)
    if not names:
        return "none set."
    return str(format_html_join(", ", "{} (set)", ((name,) for name in names))) + "."


class ToolAdminForm(forms.ModelForm):
    """Tool form: handler kind select, python callable select, write-only secret headers."""

    handler = forms.ChoiceField(label="Kind", help_text=kind_form.HELP["handler"])
    python_callable = forms.ChoiceField(required=False, label="Python callable")
    secret_headers = forms.CharField(
        required=False,
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off"}),
        help_text="Headers sent to the URL or endpoint, stored encrypted and never shown again, e.g. "
        '{"Authorization": "Bearer sk-…"}; blank keeps the current ones.',
    )
    clear_secrets = forms.BooleanField(required=False, help_text="Remove every stored secret header.")

    class Media:
        css = {"all": ("mcpsite/kind_form.css",)}
        # After the JSON editors' own script (formfields), whose roots they build on.
        js = (
            "dist/jsoneditor.min.js",
            "mcpsite/json_editor.js",
            "mcpsite/schema_table.js",
            "mcpsite/kind_form.js",
        )

    class Meta:
        model = Tool
        fields = (
            "tenant", "name", "title", "description", "enabled", "input_schema", "output_schema",
            "handler", "handler_config", "timeout_seconds", "required_scope", "annotations", "icons", "meta",
        )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "handler_config" not in self.fields:
            return  # read-only view: the admin renders no editable fields
        new = self.instance.pk is None
        if not new and not self.is_bound:
            self.initial["handler_config"] = self.instance.wire_config()  # its upstream by name (AMB-310)
        kind_form.structured(
            self, {"input_schema": "schema", "output_schema": "schema", "handler_config": "form_fields"}
        )
        cast(forms.ChoiceField, self.fields["handler"]).choices = _kind_choices()  # declared below as one
        kind_form.apply_help(self)
        docs = kind_examples.callable_docs()
        callables = cast(forms.ChoiceField, self.fields["python_callable"])
        callables.choices = [("", "---------"), *[(name, name) for name in docs]]
        self.fields["python_callable"].help_text = kind_form.callables_help(docs)
        self.fields["handler_config"].help_text = "Settings of the kind: " + kind_form.CONFIG_HELP.get(
            self.instance.handler or "template", "a JSON object."
        )
        self.fields["handler"].widget.attrs.update(kind_form.kind_select_attrs(new))
        if new and not self.is_bound:
            kind_form.new_tool_initial(self)
        config = self.initial.get("handler_config")
        config = config if isinstance(config, dict) else {}
        if self.initial.get("handler") == "python" and config.get(PYTHON_CALLABLE_KEY) in docs:
            self.fields["python_callable"].initial = config[PYTHON_CALLABLE_KEY]

    def clean_secret_headers(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("secret_headers", "").strip()
        if not raw:
            return None
        try:
            value = nesting.loads(raw)
        except json.JSONDecodeError as exc:
            raise ValidationError(
                f"Invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None
        except ValueError as exc:  # nested too deep (the limit named), NaN or Infinity
            raise ValidationError(f"Invalid JSON: {exc}.") from None
        return check_secret_headers(value)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        if data.get("secret_headers") and data.get("clear_secrets"):
            self.add_error("clear_secrets", "Either enter new secret headers or clear them, not both.")
        callable_name = data.get("python_callable")
        if data.get("handler") == "python":
            if callable_name:
                # The select is the python kind's whole configuration (its schema allows nothing else):
                # it wins over the settings box, hidden for this kind, so an earlier kind's example
                # left there cannot make the tool invalid.
                data["handler_config"] = {PYTHON_CALLABLE_KEY: callable_name}
                self.instance.handler_config = data["handler_config"]
                self.errors.pop("handler_config", None)
            elif not (
                isinstance(data.get("handler_config"), dict)
                and data["handler_config"].get(PYTHON_CALLABLE_KEY)
            ):
                self.add_error("python_callable", "Choose the registered callable this tool runs.")
        return data

    def save(self, commit: bool = True) -> Tool:
        if self.cleaned_data.get("clear_secrets"):
            self.instance.handler_secrets = ""
        elif self.cleaned_data.get("secret_headers"):
            self.instance.handler_secrets = encrypt_secrets(self.cleaned_data["secret_headers"])
        return super().save(commit=commit)


class PromptAdminForm(forms.ModelForm):
    """Prompt form: its arguments as a table and its messages in an editor over the JSON (AMB-261)."""

    class Meta:
        model = Prompt
        fields = (
            "tenant",
            "name",
            "title",
            "description",
            "enabled",
            "arguments",
            "messages",
            "icons",
            "meta",
        )

    class Media:
        css = {"all": ("mcpsite/kind_form.css",)}
        js = (
            "dist/jsoneditor.min.js",
            "mcpsite/json_editor.js",
            "mcpsite/prompt_editor.js",
            "mcpsite/schema_table.js",
        )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kind_form.apply_help(self)
        kind_form.structured(self, {"arguments": "prompt_arguments", "messages": "messages"})


class ResourceAdminForm(forms.ModelForm):
    """Resource form: text, or an uploaded file that becomes the binary blob."""

    class Media:
        css = {"all": ("mcpsite/kind_form.css",)}

    upload = forms.FileField(
        required=False,
        help_text="Upload a file to serve as binary contents (fills the MIME type when left blank or default).",
    )
    clear_blob = forms.BooleanField(
        required=False, label="Remove uploaded file", help_text="Serve the text instead."
    )

    class Meta:
        model = Resource
        fields = (
            "tenant", "uri", "name", "title", "description", "mime_type", "enabled", "text",
            "annotations", "icons", "meta",
        )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        kind_form.apply_help(self)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        upload = data.get("upload")
        if upload and data.get("clear_blob"):
            self.add_error("clear_blob", "Either upload a file or remove the current one, not both.")
            return data
        if upload:
            if upload.size > MAX_UPLOAD_BYTES:
                self.add_error("upload", f"The file is larger than {MAX_UPLOAD_BYTES // (1024 * 1024)} MiB.")
                return data
            if data.get("text"):
                self.add_error("text", "A resource has text or an uploaded file, not both: clear the text.")
                return data
            mime = data.get("mime_type") or ""
            # A blank type, or the default the admin left untouched, takes the upload's type.
            if not mime or ("mime_type" not in self.changed_data and mime == "text/plain"):
                guessed = upload.content_type
                if not guessed or guessed == "application/octet-stream":
                    guessed = mimetypes.guess_type(upload.name)[0] or "application/octet-stream"
                data["mime_type"] = guessed
        elif data.get("text") and not data.get("clear_blob") and self.instance.blob is not None:
            self.add_error(
                "text", "This resource serves an uploaded file: tick 'Remove uploaded file' to serve text."
            )
        return data

    def save(self, commit: bool = True) -> Resource:
        upload = self.cleaned_data.get("upload")
        if self.cleaned_data.get("clear_blob"):
            self.instance.blob = None
        elif upload:
            upload.seek(0)
            self.instance.blob = upload.read()
            self.instance.text = ""
        return super().save(commit=commit)


class ResourceTemplateAdminForm(forms.ModelForm):
    """Resource template form: the handler kind offered from the kinds that can produce contents."""

    handler = forms.ChoiceField(help_text="What produces the contents of an expanded URI.")

    class Media:
        css = {"all": ("mcpsite/kind_form.css",)}

    class Meta:
        model = ResourceTemplate
        fields = (
            "tenant", "uri_template", "name", "title", "description", "mime_type", "enabled",
            "handler", "handler_config", "completions", "annotations", "icons", "meta",
        )  # fmt: skip

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "handler_config" not in self.fields:
            return  # read-only view
        kind_form.apply_help(self)
        cast(forms.ChoiceField, self.fields["handler"]).choices = _template_kind_choices()
        self.fields["handler"].initial = self.instance.handler or "template"
        names = ", ".join(_python_names()) or "none"
        self.fields["handler_config"].help_text = (
            'template: {"text": "<Django template over the URI variables>"}; '
            f'python: {{"callable": "<name>"}} (registered: {names}).'
        )
