"""What the definition forms say and show per handler kind (AMB-260, AMB-261).

The tool form renders every field (so it works without JavaScript); `static/mcpsite/kind_form.js`
hides the rows that do not apply to the chosen kind (`KIND_ROWS`, handed over as data attributes of
the kind's select), swaps the handler settings' one-line help (`CONFIG_HELP`) and, on a new tool,
replaces an untouched example with the newly chosen kind's (kind_examples.py). `HELP` is the one
line each field says about itself where the model's own help is missing or too long for a line.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

from django import forms
from django.utils.html import format_html, format_html_join

from mcp_app.admin import kind_examples
from mcp_app.handlers import registry

_ALL = tuple(registry.KINDS)

# Form row (field name) → the kinds it applies to; a row not named here applies to every kind.
KIND_ROWS: dict[str, tuple[str, ...]] = {
    "python_callable": ("python",),
    "handler_config": tuple(k for k in _ALL if k != "python"),
    "stored_secrets": ("http", "llm"),
    "secret_headers": ("http", "llm"),
    "clear_secrets": ("http", "llm"),
    # A form asks the person from the serving process: it never runs on a worker.
    "execution": tuple(k for k in _ALL if k != "form"),
    "worker_wait_seconds": tuple(k for k in _ALL if k != "form"),
    # A form asks the person each call: nothing to keep (AMB-374).
    "result_cache_seconds": tuple(k for k in _ALL if k != "form"),
    "result_cache_shared": tuple(k for k in _ALL if k != "form"),
}

CONFIG_HELP: dict[str, str] = {
    "template": "'text': a Django template over the arguments ({{ name }}); or 'content' blocks, or 'structured' JSON.",
    "http": "'url' (https), 'method', 'headers', 'parameters' (arguments in the path, query or a header), "
    "'body', 'timeout'; secret headers go below.",
    "form": "'message' shown to the person, 'fields' they fill in (the table builds it), 'text' answered over the answers.",
    "llm": "'prompt' and 'system' (templates over the arguments), 'max_tokens', 'temperature', and "
    "'model_preferences' for the client's model or 'endpoint' {url, model} for your own.",
    "python": "Set by the callable chosen above.",
    "upstream": "Set when the tool is published from its Upstream's page: 'upstream', 'tool', 'fixed' arguments.",
}

HELP: dict[str, str] = {
    "tenant": "The tenant whose MCP server offers this definition.",
    "name": "The name clients see and use to call it; unique in the tenant.",
    "title": "A human-readable name shown by clients (optional).",
    "description": "What it does and when to use it: the model reads this to decide.",
    "enabled": "Untick to hide it from clients without deleting it.",
    "input_schema": "The arguments (a JSON Schema object): build it in the table, or edit the JSON.",
    "output_schema": "The shape of the structured result, when the tool returns one (optional).",
    "handler": "What runs when the tool is called; choosing a kind shows its fields and an example.",
    "timeout_seconds": "Seconds a call may run before it ends with an error.",
    "annotations": "Hints for clients: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint.",
    "icons": "Icons clients may show: a list of {src, mimeType, sizes, theme}.",
    "meta": "Extra _meta keys sent with the definition (optional).",
    "arguments": "The prompt's arguments: name, title, description, required (the table builds the list).",
    "messages": "The messages the prompt returns: a role and one content block each; text is a template.",
    "uri": "The resource's absolute URI, e.g. docs://readme.",
    "mime_type": "The MIME type of the contents, e.g. text/markdown or image/png.",
    "text": "The text clients read; leave empty when you upload a file.",
    "uri_template": "An RFC 6570 URI template with at least one {variable}, e.g. users://{id}/profile.",
    "completions": 'Values offered per variable while a client types, e.g. {"id": ["1", "2"]}.',
}


def apply_help(form: forms.BaseForm, texts: dict[str, str] | None = None) -> None:
    """Give every field its one line: ours for the fields named in HELP, else the field's own."""
    texts = {**HELP, **(texts or {})}
    for name, field in form.fields.items():
        if name in texts:
            field.help_text = texts[name]


def structured(form: forms.BaseForm, editors: dict[str, str]) -> None:
    """Name the table or editor the browser builds over each JSON field (schema_table.js)."""
    for name, editor in editors.items():
        field = form.fields.get(name)
        if field is not None and hasattr(field.widget, "structured"):
            field.widget.structured = editor


def kind_select_attrs(new: bool) -> dict[str, str]:
    """The kind select's data: rows per kind, settings' help per kind, and (new tool) the examples."""
    attrs = {
        "data-kind-rows": json.dumps(KIND_ROWS),
        "data-kind-help": json.dumps(CONFIG_HELP),
    }
    if new:
        attrs["data-kind-examples"] = json.dumps(
            {k: e.as_json() for k, e in kind_examples.examples().items()}
        )
    return attrs


def callables_help(docs: dict[str, str]) -> str:
    """The python callables with their docstrings, one per line, for the callable select's help."""
    if not docs:
        return "No python callable is registered by the operator."
    items = format_html_join("", "<li><code>{}</code>: {}</li>", docs.items())
    return format_html('The registered callables:<ul class="callable-docs">{}</ul>', items)


def new_tool_initial(form: forms.ModelForm) -> None:
    """Prefill a new tool's form with its kind's example (template unless the add link names one)."""
    initial: MutableMapping[str, Any] = form.initial
    kind = initial.get("handler") or "template"
    example = kind_examples.examples().get(kind)
    initial["handler"] = kind
    if example is None:
        return
    if not initial.get("handler_config"):
        initial["handler_config"] = example.handler_config
    if initial.get("input_schema") in (None, {}, {"type": "object", "properties": {}}, {"type": "object"}):
        initial["input_schema"] = example.input_schema
