"""What a resource template's page shows of its contents: one URI expanded and read (AMB-261).

Only the `template` kind is read here: rendering a template touches nothing but its text and the URI's
variables. A `python` callable is the operator's code, which may read data: it is read by clients
(the connect page lists the template), not on an admin page view. The variables take the first value
their completions offer, else their own name, so the preview shows a URI a client could ask for.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from django.utils.html import format_html
from uritemplate import URITemplate

from mcp_app.catalog import loader
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import HandlerError
from mcp_app.handlers import registry
from mcp_app.models import ResourceTemplate

# Characters of a rendered preview shown at most.
PREVIEW_CHARS = 20_000


def example_variables(uri_template: str, completions: Any) -> dict[str, str]:
    """A value per variable: the first its completions offer (a list, or a dependent one's default)."""
    offered = completions if isinstance(completions, dict) else {}
    values: dict[str, str] = {}
    for name in URITemplate(uri_template).variable_names:
        choices = offered.get(name)
        if isinstance(choices, dict):
            choices = choices.get("default") or []
        first = choices[0] if isinstance(choices, list) and choices else None
        values[name] = first if isinstance(first, str) else name
    return values


def template_preview(obj: ResourceTemplate) -> str:
    """The contents of one expanded URI, rendered as a client would read them; or why not."""
    if obj.pk is None:
        return "Saved contents are shown here."
    if obj.handler != "template":
        return "A python callable makes these contents: read them from a client (the connect page lists it)."
    variables: dict[str, Any] = example_variables(obj.uri_template, obj.completions)
    uri = URITemplate(obj.uri_template).expand(variables)
    ctx = RequestContext(tenant=loader.tenant_info(obj.tenant))
    try:
        contents = async_to_sync(registry.read_template)(ctx, obj.to_def(), uri, variables)
    except HandlerError as exc:
        return f"{uri} could not be read: {exc.message}"
    text = "".join(str(item.get("text", "")) for item in contents)
    return format_html(
        '<div class="resource-preview"><p><code>{}</code></p><pre>{}</pre></div>', uri, text[:PREVIEW_CHARS]
    )
