"""The self-check's checks that need no network: pure functions over the catalog's definitions.

Each takes a definition (``ToolDef``, ``PromptDef``, ``ResourceDef``, ``TemplateDef``: the published
rows as the catalog holds them, or a draft's ``to_def()``) and returns its findings; nothing here reads
the database or the wire, so the admin runs them on every save (AMB-243). What a client would trip
over, per definition:

- its name, by the 2025-11-25 rule (1-128 of letters, digits, ``_``, ``-``, ``.``) every revision's
  clients now apply, and the stricter one of the model APIs many clients hand tools to (AMB-242);
- its schemas: valid JSON Schemas, an object input, and an output schema older revisions can describe
  (a tool the legacy era never lists, and why), keywords a pre-2025-11-25 client may not read as meant;
- its input schema's own ``examples`` and arguments made from the schema alone
  (``core.schema_examples.sample_arguments``), through the tool's own validation (protocol/schemas.py);
- its kind's configuration, by the rules saving it would apply now (``definitions.checks``);
- the SSRF policy's answer for its URLs, decided without resolving them (``core.ssrf.check_url_statically``);
- the client capabilities its kind needs (sampling, elicitation, URL elicitation).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable
from typing import Any

from mcp_app.core import ssrf
from mcp_app.core.schema_examples import sample_arguments
from mcp_app.core.types import PromptDef, ResourceDef, TemplateDef, ToolDef, offered_to_legacy
from mcp_app.definitions import checks as rules
from mcp_app.protocol import schemas
from mcp_app.selfcheck.report import ERROR, INFO, WARNING, Finding, fix_url

# 2025-11-25 server/tools "Tool names": what every client may now insist on.
SPEC_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# What model APIs accept as a function name (OpenAI, Anthropic): clients that pass tools on refuse more.
STRICT_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
# JSON Schema 2020-12 keywords a draft-07 validator ignores: a client before 2025-11-25 (which named no
# dialect) may accept arguments the tool then refuses, or refuse good ones.
NEWER_KEYWORDS = frozenset(
    {"prefixItems", "dependentRequired", "dependentSchemas", "unevaluatedProperties", "unevaluatedItems",
     "$dynamicRef", "$dynamicAnchor"}
)  # fmt: skip
# Maps of names (not keywords) inside a schema.
_NAME_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
MAX_EXAMPLES = 5


def _finding(severity: str, kind: str, definition: Any, check: str, message: str) -> Finding:
    name = getattr(definition, "name", "") or getattr(definition, "uri", "")
    if kind == "template":
        name = definition.uri_template
    elif kind == "resource":
        name = definition.uri
    upstream = getattr(definition, "upstream", None)
    link = fix_url("upstream", upstream.upstream_id) if upstream is not None else fix_url(kind, definition.id)
    return Finding(severity, kind, name, check, message, link)


# --- Tools ---------------------------------------------------------------------------------------


def tool_name(tool: ToolDef) -> list[Finding]:
    if not SPEC_NAME.match(tool.name):
        return [_finding(ERROR, "tool", tool, "name",
                         "The name breaks the 2025-11-25 rule (1-128 letters, digits, '_', '-' or '.'): "
                         "clients may refuse the whole tool list. Rename it.")]  # fmt: skip
    if not STRICT_NAME.match(tool.name):
        return [_finding(WARNING, "tool", tool, "name",
                         "Clients that pass tools to a model API (names of 1-64 letters, digits, '_' or '-') "
                         "cannot offer this one: avoid '.' and keep the name to 64 characters.")]  # fmt: skip
    return []


def _newer_keywords(schema: Any, names: bool = False) -> set[str]:
    found: set[str] = set()
    if isinstance(schema, dict):
        for key, value in schema.items():
            if not names and key in NEWER_KEYWORDS:
                found.add(key)
            found |= _newer_keywords(value, names=not names and key in _NAME_MAPS)
    elif isinstance(schema, list):
        for item in schema:
            found |= _newer_keywords(item)
    return found


def _shared(schema: Any) -> Any:
    """One object for equal schemas: protocol/schemas.py keeps a compiled validator per schema object,
    and checking a schema against its meta-schema costs milliseconds, so a tenant's many tools of one
    schema (an upstream's thousands) are compiled once."""
    try:
        return _parsed(json.dumps(schema, sort_keys=True))
    except (TypeError, ValueError):
        return schema


@functools.lru_cache(maxsize=1024)
def _parsed(text: str) -> Any:
    return json.loads(text)


def _compiles(schema: Any) -> bool:
    try:
        schemas.compile_schema(_shared(schema))
    except schemas.InvalidSchema:
        return False
    return True


def tool_schemas(tool: ToolDef) -> list[Finding]:
    found: list[Finding] = []
    if not isinstance(tool.input_schema, dict) or not _compiles(tool.input_schema):
        found.append(_finding(ERROR, "tool", tool, "schema",
                              "The input schema is not a valid JSON Schema: every call is answered "
                              "'misconfigured'."))  # fmt: skip
    elif tool.input_schema.get("type") != "object":
        found.append(_finding(ERROR, "tool", tool, "schema",
                              'Every revision needs an input schema with "type": "object" at its root; '
                              "clients may refuse the tool."))  # fmt: skip
    if tool.output_schema is not None and not _compiles(tool.output_schema):
        found.append(_finding(ERROR, "tool", tool, "schema",
                              "The output schema is not a valid JSON Schema: every call is answered "
                              "'misconfigured'."))  # fmt: skip
    if not offered_to_legacy(tool.output_schema):
        found.append(_finding(INFO, "tool", tool, "era",
                              "Offered to 2026-07-28 clients only: before 2026-07-28 an output schema must "
                              'have "type": "object" at its root, so 2024-11-05..2025-11-25 clients do not '
                              "see this tool. Wrap the output in an object to reach them."))  # fmt: skip
    newer = sorted(_newer_keywords(tool.input_schema) | _newer_keywords(tool.output_schema))
    if newer and isinstance(tool.input_schema, dict) and "$schema" not in tool.input_schema:
        found.append(_finding(INFO, "tool", tool, "schema",
                              f"Uses {', '.join(newer)} (JSON Schema 2020-12): clients before 2025-11-25 "
                              "may validate with draft-07, which ignores them."))  # fmt: skip
    return found


def _problems(schema: dict[str, Any], instance: Any) -> list[str] | None:
    """The tool's own validation of `instance` (protocol/schemas.py); None when the schema is broken."""
    try:
        return schemas.errors(_shared(schema), instance)
    except schemas.InvalidSchema:
        return None


def tool_examples(tool: ToolDef) -> list[Finding]:
    """The schema's own examples, and arguments made from it alone, through the tool's own validation."""
    schema = tool.input_schema
    if not isinstance(schema, dict) or not _compiles(schema):
        return []  # tool_schemas said so
    found: list[Finding] = []
    examples = schema.get("examples")
    if isinstance(examples, list):
        for number, example in enumerate(examples[:MAX_EXAMPLES], start=1):
            problems = _problems(schema, example)
            if problems:
                found.append(_finding(ERROR, "tool", tool, "example",
                                      f"Example {number} of the input schema is refused by the tool's own "
                                      f"validation ({'; '.join(problems)}): a model that copies it fails. "
                                      "Fix the example or the schema."))  # fmt: skip
        if found:
            return found
    sample = sample_arguments(schema)
    problems = _problems(schema, sample)
    if problems:
        found.append(_finding(WARNING, "tool", tool, "example",
                              f"Arguments made from the schema alone ({_short(sample)}) are refused by its "
                              f"own validation: {'; '.join(problems)}. Check its defaults, or give it an "
                              '"examples" entry that passes.'))  # fmt: skip
    return found


def _short(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _saved_rules(
    kind: str, model: str, definition: Any, fields: dict[str, Any], row: dict[str, Any]
) -> list[Finding]:
    """What saving the definition now would refuse (rules may be newer than the row, or the row imported)."""
    found = []
    for field, value in fields.items():
        for problem in rules.field_problems(model, field, value, row):
            found.append(_finding(ERROR, kind, definition, "config", f"{field}: {problem}"))
    return found


def tool_config(tool: ToolDef) -> list[Finding]:
    if tool.handler == "upstream":
        return []  # its configuration is the catalog's, resolved from the Upstream row
    fields = {"handler_config": tool.handler_config, "annotations": tool.annotations}
    return _saved_rules("tool", "tool", tool, fields, {"handler": tool.handler})


def tool_urls(tool: ToolDef) -> list[str]:
    """The URLs a call of the tool goes out to (http: its url; llm: its endpoint's)."""
    config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
    if tool.handler == "http":
        url = config.get("url")
    elif tool.handler == "llm" and isinstance(config.get("endpoint"), dict):
        url = config["endpoint"].get("url")
    else:
        url = None
    return [url] if isinstance(url, str) and url else []


def refused(tool: ToolDef, url: str, reason: str) -> Finding:
    return _finding(ERROR, "tool", tool, "ssrf",
                    f"Every call would be refused: the SSRF policy refuses {url}: {reason} "
                    "Use a public https URL, or ask the operator to allow-list the host "
                    "(MCP_HTTP_HANDLER_ALLOW).")  # fmt: skip


def tool_ssrf(tool: ToolDef) -> list[Finding]:
    """The policy's decision without a DNS query (the network run resolves the host too)."""
    found = []
    for url in tool_urls(tool):
        try:
            ssrf.check_url_statically(url)
        except ssrf.SsrfRefused as exc:
            found.append(refused(tool, url, exc.message))
    return found


def tool_capabilities(tool: ToolDef) -> list[Finding]:
    config = tool.handler_config if isinstance(tool.handler_config, dict) else {}
    found = []

    def note(severity: str, message: str) -> None:
        found.append(_finding(severity, "tool", tool, "capability", message))

    if tool.handler == "form" and config.get("sensitive") is True:
        note(
            WARNING,
            "A sensitive form needs URL-mode elicitation (elicitation.url): only 2025-11-25 and "
            "2026-07-28 clients that declare it can use the tool; others get an error.",
        )
    elif tool.handler == "form":
        note(
            INFO,
            "Asks the person (elicitation, 2025-06-18 and later): clients without the elicitation "
            "capability get an error.",
        )
    if tool.handler == "llm" and not isinstance(config.get("endpoint"), dict):
        note(
            INFO,
            "Asks the client's model (sampling): clients without the sampling capability get an "
            "error. Give it an endpoint of your own to not depend on the client.",
        )
    if tool.approval != "off":
        without = ("are refused" if tool.approval_without_elicitation == "refuse"
                   else "run it without asking")  # fmt: skip
        note(INFO, f"Asks the person to approve each run (elicitation); clients without it {without}.")
    if config.get("connection"):
        note(
            INFO,
            f"Acts as the calling person through the provider {config['connection']!r}: a person "
            "not connected yet is sent a link to connect first (URL elicitation).",
        )
    if tool.task_support == "required":
        note(
            WARNING,
            "Must be called as a task: only 2025-11-25 clients with tasks (and 2026-07-28 ones "
            "with the tasks extension) can call it.",
        )
    return found


def check_tool(tool: ToolDef) -> list[Finding]:
    """Every check of one tool that needs no network."""
    return [
        *tool_name(tool),
        *tool_schemas(tool),
        *tool_examples(tool),
        *tool_config(tool),
        *tool_ssrf(tool),
        *tool_capabilities(tool),
    ]


# --- Prompts, resources, templates ---------------------------------------------------------------


def check_prompt(prompt: PromptDef) -> list[Finding]:
    found = []
    if not SPEC_NAME.match(prompt.name):
        found.append(_finding(ERROR, "prompt", prompt, "name",
                              "The name is not 1-128 letters, digits, '_', '-' or '.': clients may not "
                              "offer it. Rename it."))  # fmt: skip
    if prompt.upstream is None:
        fields = {"arguments": prompt.arguments, "messages": prompt.messages, "icons": prompt.icons}
        found += _saved_rules("prompt", "prompt", prompt, fields, {})
    asking = [a.get("name") for a in prompt.arguments if isinstance(a, dict) and a.get("ask")]
    if asking:
        found.append(_finding(INFO, "prompt", prompt, "capability",
                              f"Asks the person for {', '.join(map(str, asking))} when left out "
                              "(elicitation): clients without it must pass them."))  # fmt: skip
    return found


def check_resource(resource: ResourceDef) -> list[Finding]:
    if resource.upstream is not None:
        return []
    fields = {"uri": resource.uri, "mime_type": resource.mime_type, "annotations": resource.annotations}
    return _saved_rules("resource", "resource", resource, fields, {})


def check_template(template: TemplateDef) -> list[Finding]:
    if template.upstream is not None:
        return []
    fields = {
        "uri_template": template.uri_template,
        "completions": template.completions,
        "handler_config": template.handler_config,
    }
    row = {"uri_template": template.uri_template, "handler": template.handler}
    return _saved_rules("template", "resourcetemplate", template, fields, row)


def check_definitions(
    tools: Iterable[ToolDef] = (),
    prompts: Iterable[PromptDef] = (),
    resources: Iterable[ResourceDef] = (),
    templates: Iterable[TemplateDef] = (),
) -> list[Finding]:
    """Every check that needs no network, over the definitions given (published ones, or drafts)."""
    found: list[Finding] = []
    for tool in tools:
        found += check_tool(tool)
    for prompt in prompts:
        found += check_prompt(prompt)
    for resource in resources:
        found += check_resource(resource)
    for template in templates:
        found += check_template(template)
    return found


def check_one(definition: ToolDef | PromptDef | ResourceDef | TemplateDef) -> list[Finding]:
    """The findings of one definition (the admin's warning after a save, a draft's check)."""
    if isinstance(definition, ToolDef):
        return check_tool(definition)
    if isinstance(definition, PromptDef):
        return check_prompt(definition)
    if isinstance(definition, ResourceDef):
        return check_resource(definition)
    return check_template(definition)
