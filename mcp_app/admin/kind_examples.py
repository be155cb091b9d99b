"""A working example per handler kind: what a new tool's form starts with once its kind is chosen (AMB-260).

Each example is a whole tool a person can save and try at once: the handler settings, the input
schema naming the arguments those settings use, and arguments to try it with. Every example passes
its kind's own checks (handlers.registry.config_problems, the model's full_clean); the tests run each
through the dispatcher. The `http` example calls the platform's own demo echo endpoint when the SSRF
policy admits it (MCP_HTTP_HANDLER_ALLOW), else a public echo service. The `upstream` kind has none:
its tools are published from an Upstream's page, not written by hand.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from mcp_app.core import ssrf
from mcp_app.handlers import python

# A public echo service, for a deployment whose own address the SSRF policy refuses.
PUBLIC_ECHO_URL = "https://postman-echo.com/post"


@dataclass(frozen=True)
class Example:
    """One kind's starting point: what the form is prefilled with, and arguments that run it."""

    kind: str
    handler_config: dict[str, Any]
    input_schema: dict[str, Any]
    arguments: dict[str, Any] = field(default_factory=dict)
    note: str = ""

    def as_json(self) -> dict[str, Any]:
        return {"handler_config": self.handler_config, "input_schema": self.input_schema, "note": self.note}


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def echo_url() -> str:
    """The demo echo endpoint of this deployment when the SSRF policy admits it, else a public one."""
    own = f"{settings.MCP_PUBLIC_URL}/demo/echo"
    try:
        ssrf.check_url_statically(own)
    except ssrf.SsrfRefused:
        return PUBLIC_ECHO_URL
    return own


def _template() -> Example:
    return Example(
        kind="template",
        handler_config={"text": "Hello, {{ name }}!{% if shout %} HOW ARE YOU?{% endif %}"},
        input_schema=_object(
            {
                "name": {"type": "string", "description": "Whom to greet."},
                "shout": {"type": "boolean", "description": "Add a loud question.", "default": False},
            },
            ["name"],
        ),
        arguments={"name": "Ada", "shout": True},
        note="A Django template over the arguments: {{ name }} is the argument 'name'.",
    )


def _http() -> Example:
    return Example(
        kind="http",
        handler_config={
            "url": echo_url(),
            "method": "POST",
            "headers": {"Accept": "application/json"},
            "parameters": {"units": {"in": "query"}},
            "timeout": 10,
        },
        input_schema=_object(
            {
                "city": {"type": "string", "description": "The city to look up."},
                "units": {"type": "string", "enum": ["metric", "imperial"], "default": "metric"},
            },
            ["city"],
        ),
        arguments={"city": "Lisbon", "units": "metric"},
        note="POSTs the arguments as JSON ('units' goes in the query); a JSON object reply becomes the "
        "structured result, a newline-delimited JSON reply streams progress.",
    )


def _form() -> Example:
    return Example(
        kind="form",
        handler_config={
            "message": "How was your day, {{ name }}?",
            "fields": {
                "type": "object",
                "properties": {
                    "mood": {"type": "string", "title": "Mood", "enum": ["good", "fine", "bad"]},
                    "score": {"type": "integer", "title": "Score", "minimum": 1, "maximum": 5, "default": 3},
                },
                "required": ["mood"],
            },
            "text": "{{ name }} feels {{ mood }} ({{ score }}/5).",
        },
        input_schema=_object({"name": {"type": "string", "description": "Whom to ask."}}, ["name"]),
        arguments={"name": "Ada"},
        note="Asks the person at the client to fill in the fields, then answers with 'text' over the answers.",
    )


def _llm() -> Example:
    return Example(
        kind="llm",
        handler_config={
            "prompt": "Summarise in one sentence:\n\n{{ text }}",
            "system": "You are a concise assistant.",
            "max_tokens": 200,
            "model_preferences": {"hints": [{"name": "claude"}], "intelligencePriority": 0.5},
        },
        input_schema=_object({"text": {"type": "string", "description": "The text to summarise."}}, ["text"]),
        arguments={"text": "MCP lets a model call tools that a server describes with JSON Schema."},
        note="Asks the client's model (sampling); give an 'endpoint' {url, model} instead of "
        "'model_preferences' to call your own chat completions endpoint.",
    )


def _python() -> Example:
    names = python.registered_names()
    name = "echo" if "echo" in names else (names[0] if names else "")
    schema = (
        _object({"message": {"type": "string", "description": "What to echo."}}, ["message"])
        if name == "echo"
        else {"type": "object", "properties": {}}
    )
    return Example(
        kind="python",
        handler_config={"callable": name},
        input_schema=schema,
        arguments={"message": "hello"} if name == "echo" else {},
        note="Runs a callable the operator registered in code; choose it below.",
    )


_BUILDERS = {"template": _template, "http": _http, "form": _form, "llm": _llm, "python": _python}


def examples() -> dict[str, Example]:
    """The example of every kind that has one, built now (the http URL depends on the settings)."""
    return {kind: build() for kind, build in _BUILDERS.items()}


def callable_docs() -> dict[str, str]:
    """Each registered python callable's docstring (its first paragraph), for the form to show."""
    docs = {}
    for name in python.registered_names():
        text = inspect.getdoc(python.get_callable(name)) or "No description."
        docs[name] = text.split("\n\n", 1)[0].replace("\n", " ")
    return docs
