"""Definitions to check, made without the database."""

from __future__ import annotations

from typing import Any

from mcp_app.core.types import PromptDef, TemplateDef, ToolDef, offered_to_legacy


def tool(**fields: Any) -> ToolDef:
    values: dict[str, Any] = {
        "id": 7, "name": "greet", "title": "", "description": "Say hello.",
        "input_schema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        "output_schema": None, "annotations": {}, "icons": [], "meta": {},
        "handler": "template", "handler_config": {"text": "Hello, {{ name }}!"},
    }  # fmt: skip
    values.update(fields)
    values.setdefault("legacy", offered_to_legacy(values["output_schema"]))
    return ToolDef(**values)


def prompt(**fields: Any) -> PromptDef:
    values: dict[str, Any] = {
        "id": 3, "name": "review", "title": "", "description": "",
        "arguments": [{"name": "code", "required": True}],
        "messages": [{"role": "user", "content": {"type": "text", "text": "Review {{ code }}"}}],
        "icons": [], "meta": {},
    }  # fmt: skip
    values.update(fields)
    return PromptDef(**values)


def template(**fields: Any) -> TemplateDef:
    values: dict[str, Any] = {
        "id": 4, "uri_template": "notes://{id}", "name": "note", "title": "", "description": "",
        "mime_type": "text/plain", "handler": "template", "handler_config": {"text": "Note {{ id }}"},
        "completions": {}, "annotations": {}, "icons": [], "meta": {},
    }  # fmt: skip
    values.update(fields)
    return TemplateDef(**values)
