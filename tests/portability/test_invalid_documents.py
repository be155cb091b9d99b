"""A table of broken documents: each problem reported at its exact path, and nothing changed."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from mcp_app.models import Tool
from mcp_app.portability.document import DocumentError, loads
from mcp_app.portability.importer import import_document

pytestmark = pytest.mark.django_db


def base() -> dict[str, Any]:
    greet = {"name": "greet", "handler": "template", "handler_config": {"text": "Hello, {{ name }}!"}}
    return {
        "format": "mcp-platform/tenant",
        "version": 1,
        "settings": {"name": "A", "auth_mode": "public"},
        "tools": [
            greet,
            {**greet, "name": "greet_again"},
            {
                "name": "lookup",
                "handler": "http",
                "handler_config": {"url": "https://api.example.com/lookup"},
                "input_schema": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        ],
        "prompts": [
            {"name": "review", "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]}
        ],
        "resources": [{"uri": "a://readme", "name": "readme", "text": "hello"}],
        "resource_templates": [
            {"uri_template": "a://users/{id}", "name": "user", "handler_config": {"text": "user {{ id }}"}}
        ],
    }


def edit(change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    document = copy.deepcopy(base())
    change(document)
    return document


def tool(index: int, **values: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda d: d["tools"][index].update(values)


CASES: list[tuple[str, Any, list[str]]] = [
    ("wrong format name", edit(lambda d: d.update(format="other")), ["format"]),
    ("no version", edit(lambda d: d.pop("version")), ["version"]),
    ("unknown top-level key", edit(lambda d: d.update(toolz=[])), ["toolz"]),
    ("tools not a list", edit(lambda d: d.update(tools={"greet": {}})), ["tools"]),
    ("tool without a handler", edit(lambda d: d["tools"][2].pop("handler")), ["tools[2].handler"]),
    ("tool name with a space", edit(tool(2, name="look up")), ["tools[2].name"]),
    (
        "secret values in a tool",
        edit(tool(2, handler_secrets={"Authorization": "x"})),
        ["tools[2].handler_secrets"],
    ),
    (
        "input schema's properties not an object",
        edit(tool(2, input_schema={"type": "object", "properties": "oops"})),
        ["tools[2].input_schema.properties"],
    ),
    (
        "input schema property with an unknown type",
        edit(tool(2, input_schema={"type": "object", "properties": {"q": {"type": "strin"}}})),
        ["tools[2].input_schema.properties.q.type"],
    ),
    (
        "input schema not an object at its root",
        edit(tool(2, input_schema={"type": "array"})),
        ["tools[2].input_schema"],
    ),
    ("unknown handler kind", edit(tool(2, handler="nope")), ["tools[2].handler_config"]),
    ("http tool without a url", edit(tool(2, handler_config={"method": "GET"})), ["tools[2].handler_config"]),
    ("unknown execution", edit(tool(2, execution="somewhere")), ["tools[2].execution"]),
    ("negative timeout", edit(tool(2, timeout_seconds=-1)), ["tools[2].timeout_seconds"]),
    ("no wait for a worker", edit(tool(2, worker_wait_seconds=0)), ["tools[2].worker_wait_seconds"]),
    ("a wait for a worker past a day", edit(tool(2, worker_wait_seconds=86_401)), ["tools[2].worker_wait_seconds"]),
    ("unknown tool annotation", edit(tool(2, annotations={"fastHint": True})), ["tools[2].annotations"]),
    (
        "output schema not an object or null",
        edit(tool(2, output_schema="string")),
        ["tools[2].output_schema"],
    ),
    ("reserved _meta prefix", edit(tool(1, meta={"mcp.dev/x": 1})), ["tools[1].meta"]),
    ("the same tool name twice", edit(tool(1, name="greet")), ["tools[1].name"]),
    ("prompt without messages", edit(lambda d: d["prompts"][0].update(messages=[])), ["prompts[0].messages"]),
    (
        "prompt message with an unknown role",
        edit(lambda d: d["prompts"][0]["messages"][0].update(role="robot")),
        ["prompts[0].messages"],
    ),
    (
        "blob with characters outside base64",
        edit(lambda d: d["resources"][0].update(blob="!!!")),
        ["resources[0].blob"],
    ),
    ("blob with broken padding", edit(lambda d: d["resources"][0].update(blob="abc")), ["resources[0].blob"]),
    (
        "resource URI without a scheme",
        edit(lambda d: d["resources"][0].update(uri="readme")),
        ["resources[0].uri"],
    ),
    (
        "URI template without a variable",
        edit(lambda d: d["resource_templates"][0].update(uri_template="a://users")),
        ["resource_templates[0].uri_template"],
    ),
    ("unknown auth mode", edit(lambda d: d["settings"].update(auth_mode="open")), ["settings.auth_mode"]),
    ("the slug in the settings", edit(lambda d: d["settings"].update(slug="other")), ["settings.slug"]),
    (
        "website that is not a URL",
        edit(lambda d: d["settings"].update(website_url="not a url")),
        ["settings.website_url"],
    ),
    (
        "polling after more than an hour",
        edit(lambda d: d["settings"].update(stream_poll_seconds=3601)),
        ["settings.stream_poll_seconds"],
    ),
    (
        "a polling retry past a minute",
        edit(lambda d: d["settings"].update(stream_poll_retry_ms=60_001)),
        ["settings.stream_poll_retry_ms"],
    ),
    (
        "two problems in two lists, both reported",
        edit(lambda d: (d["tools"][0].update(enabled="yes"), d["resources"][0].pop("name"))),
        ["resources[0].name", "tools[0].enabled"],
    ),
    ("a list instead of a document", [base()], ["(document)"]),
    # AMB-117: a reference outside the schema could never resolve (and was fetched from the server).
    (
        "input schema referring to a URL",
        edit(tool(2, input_schema={"type": "object", "properties": {"q": {"$ref": "https://example.com/q"}}})),
        ["tools[2].input_schema"],
    ),
    (
        "output schema referring to another file",
        edit(tool(2, output_schema={"type": "object", "properties": {"n": {"$ref": "defs.json#/n"}}})),
        ["tools[2].output_schema"],
    ),
    # AMB-115: a definition's JSON gets 8 levels less than the limit, so its export imports again.
    (
        "input schema nested past a definition's share of the limit",
        edit(tool(2, input_schema={"type": "object", "default": json.loads("[" * 56 + "]" * 56)})),
        ["tools[2].input_schema"],
    ),
]

# Texts that cannot even be read: each refused at (document) with the phrase, never a RecursionError.
_BOMB = "a: &a [x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 10)}]\n" for p, n in zip("abcdefg", "bcdefgh", strict=True)
)
TEXTS: list[tuple[str, str, str]] = [
    ("YAML flow sequences 20,000 deep", "[" * 20_000 + "]" * 20_000, "nested deeper than 64 levels"),
    ("JSON objects 20,000 deep", '{"a":' * 20_000 + "1" + "}" * 20_000, "nested deeper than 64 levels"),
    ("YAML block mappings 100 deep", "".join(f"{' ' * i}k:\n" for i in range(100)) + " " * 100 + "v\n", "64 levels"),
    ("a megabyte of [", "[" * 1_000_000, "nested deeper than 64 levels"),
    ("an alias used at depth past the limit", "a: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30, "64 levels"),
    ("an alias inside its own anchor", "a: &a [1, *a]\n", "inside its own anchor"),
    ("aliases doubling a billion times", _BOMB, "aliases repeat more than 100,000"),
]  # fmt: skip


@pytest.mark.parametrize(("document", "paths"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_broken_document_is_refused_with_each_problem_at_its_path(tenant_a, document, paths):
    with pytest.raises(DocumentError) as caught:
        import_document(tenant_a, document)
    assert sorted({path for path, _message in caught.value.problems}) == sorted(paths)
    assert all(message for _path, message in caught.value.problems)
    assert not Tool.objects.filter(tenant=tenant_a).exists()


def test_the_table_is_long_enough_and_the_unbroken_document_imports():
    assert len(CASES) >= 15
    assert len({c[0] for c in CASES}) == len(CASES)


def test_the_unbroken_document_imports(tenant_a):
    plan = import_document(tenant_a, base())
    assert plan.counts()["create"] == 6


@pytest.mark.parametrize(("text", "says"), [t[1:] for t in TEXTS], ids=[t[0] for t in TEXTS])
def test_a_document_that_cannot_be_read_is_refused_at_the_document_naming_why(text, says):
    with pytest.raises(DocumentError) as caught:
        loads(text)
    [(path, message)] = caught.value.problems
    assert path == "(document)" and says in message, message


def test_aliases_within_the_limits_still_read():
    text = "schema: &s {type: object}\ntools: [{input_schema: *s}, {input_schema: *s}]\n"
    assert loads(text)["tools"][1] == {"input_schema": {"type": "object"}}
    assert loads("[" * 64 + "]" * 64) is not None


def test_a_yaml_syntax_error_names_its_line():
    with pytest.raises(DocumentError) as caught:
        loads("format: mcp-platform/tenant\ntools: [\n  - name: x\n")
    [(path, message)] = caught.value.problems
    assert path == "(document)" and "line" in message


def test_problems_say_what_is_wrong_without_quoting_the_whole_value(tenant_a):
    document = edit(
        lambda d: (d["tools"][2].pop("handler"), d["tools"][2].update(handlr="http"), d.update(prompts={}))
    )
    with pytest.raises(DocumentError) as caught:
        import_document(tenant_a, document)
    problems = dict(caught.value.problems)
    assert problems["tools[2].handler"] == "Required."
    assert problems["tools[2].handlr"].startswith("Unknown key; allowed: annotations, approval,")
    assert problems["prompts"] == "Must be an array, not an object."
