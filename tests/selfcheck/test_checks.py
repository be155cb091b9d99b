"""Each check of the self-check on definitions made without the database (mcp_app/selfcheck/checks.py)."""

from __future__ import annotations

import pytest

from mcp_app.connect.page import Listing
from mcp_app.core.schema_examples import sample_arguments
from mcp_app.core.types import Catalog
from mcp_app.core.versions import ALL_VERSIONS, V2024_11_05, V2025_03_26, V2026_07_28
from mcp_app.selfcheck import checks
from mcp_app.selfcheck.report import ERROR, INFO, WARNING, Finding, Report
from mcp_app.selfcheck.runner import listing_findings, safe_to_call
from tests.selfcheck.support import prompt, template, tool


def of(findings: list[Finding], check: str) -> list[tuple[str, str]]:
    return [(f.severity, f.message) for f in findings if f.check == check]


def test_a_clean_tool_has_no_finding_and_links_to_its_change_page():
    assert checks.check_tool(tool()) == []
    (finding,) = checks.tool_name(tool(name="a b"))
    assert finding.fix_url == "/admin/mcp_app/tool/7/change/"
    assert (finding.kind, finding.name) == ("tool", "a b")


@pytest.mark.parametrize(
    ("name", "severity"),
    [
        ("get_pet", None),
        ("pets.get", WARNING),
        ("x" * 65, WARNING),
        ("a b", ERROR),
        ("x" * 129, ERROR),
        ("é", ERROR),
    ],
)
def test_names_by_the_2025_11_25_rule_and_the_model_apis(name, severity):
    found = of(checks.tool_name(tool(name=name)), "name")
    assert [s for s, _ in found] == ([severity] if severity else [])


def test_schemas_a_client_cannot_use_are_errors():
    broken = tool(input_schema={"type": "object", "properties": {"n": {"type": "whole"}}})
    assert [s for s, _ in of(checks.tool_schemas(broken), "schema")] == [ERROR]
    array_root = tool(input_schema={"type": "array"})
    assert "type" in of(checks.tool_schemas(array_root), "schema")[0][1]
    bad_output = tool(output_schema={"type": "object", "properties": {"n": {"minimum": "one"}}})
    assert [s for s, _ in of(checks.tool_schemas(bad_output), "schema")] == [ERROR]


def test_a_tool_only_2026_07_28_can_describe_says_why_legacy_clients_miss_it():
    ((severity, message),) = of(checks.tool_schemas(tool(output_schema={"type": "array"})), "era")
    assert severity == INFO
    assert "2026-07-28 clients only" in message and '"type": "object"' in message
    assert of(checks.tool_schemas(tool(output_schema={"type": "object"})), "era") == []


def test_2020_12_keywords_without_a_dialect_are_noted_but_property_names_are_not_keywords():
    tuple_schema = {
        "type": "object",
        "properties": {"p": {"type": "array", "prefixItems": [{"type": "string"}]}},
    }
    assert "prefixItems" in of(checks.tool_schemas(tool(input_schema=tuple_schema)), "schema")[0][1]
    named = {"type": "object", "properties": {"prefixItems": {"type": "string"}}}
    assert of(checks.tool_schemas(tool(input_schema=named)), "schema") == []


def test_the_schemas_own_examples_go_through_the_tools_validation():
    schema = {
        "type": "object",
        "properties": {"n": {"type": "integer", "minimum": 1}},
        "required": ["n"],
        "examples": [{"n": 2}, {"n": 0}],
    }
    ((severity, message),) = of(checks.tool_examples(tool(input_schema=schema)), "example")
    assert severity == ERROR
    assert message.startswith("Example 2 of the input schema is refused") and "minimum" in message
    schema["examples"] = [{"n": 2}]
    assert checks.tool_examples(tool(input_schema=schema)) == []


def test_arguments_made_from_the_schema_alone_and_a_default_the_schema_refuses():
    bounded = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "code": {"type": "string", "minLength": 12},
            "size": {"type": "integer", "minimum": 3, "maximum": 9},
            "mode": {"enum": ["fast", "slow"]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        },
        "required": ["email", "code", "size", "mode", "tags"],
    }
    assert checks.tool_examples(tool(input_schema=bounded)) == []
    bad_default = {"type": "object", "properties": {"n": {"type": "integer", "maximum": 5, "default": 10}}}
    ((severity, message),) = of(checks.tool_examples(tool(input_schema=bad_default)), "example")
    assert severity == WARNING and "at n" in message and "{'n': 10}" in message


def test_sample_arguments_prefer_the_schemas_own_values():
    schema = {
        "type": "object",
        "properties": {
            "a": {"type": "string", "default": "d"},
            "b": {"type": "string", "examples": ["e"]},
            "c": {"const": 3},
            "d": {"type": "object", "properties": {"x": {"type": "boolean"}}, "required": ["x"]},
            "optional": {"type": "string"},
        },
        "required": ["b", "c", "d"],
    }
    assert sample_arguments(schema) == {"a": "d", "b": "e", "c": 3, "d": {"x": False}}
    assert sample_arguments({**schema, "examples": [{"b": "given"}]}) == {"b": "given"}


def test_urls_the_ssrf_policy_refuses_without_resolving_them(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = []
    private = tool(handler="http", handler_config={"url": "https://10.1.2.3/hook"})
    ((severity, message),) = of(checks.tool_ssrf(private), "ssrf")
    assert severity == ERROR and "https://10.1.2.3/hook" in message and "private address" in message
    plain = tool(handler="http", handler_config={"url": "http://api.example.com/x"})
    assert "https" in of(checks.tool_ssrf(plain), "ssrf")[0][1]
    metadata = tool(
        handler="llm", handler_config={"prompt": "hi", "endpoint": {"url": "http://169.254.169.254/v1"}}
    )
    assert of(checks.tool_ssrf(metadata), "ssrf")
    assert checks.tool_ssrf(tool(handler="http", handler_config={"url": "https://api.example.com/x"})) == []
    settings.MCP_HTTP_HANDLER_ALLOW = ["10.0.0.0/8"]
    assert checks.tool_ssrf(private) == []


def test_kinds_that_need_client_capabilities():
    form = {"message": "Name?", "fields": {"type": "object", "properties": {"n": {"type": "string"}}}}
    assert (
        "elicitation"
        in of(checks.tool_capabilities(tool(handler="form", handler_config=form)), "capability")[0][1]
    )
    sensitive = tool(handler="form", handler_config={**form, "sensitive": True})
    assert of(checks.tool_capabilities(sensitive), "capability")[0][0] == WARNING
    llm = tool(handler="llm", handler_config={"prompt": "Summarize {{ text }}"})
    assert "sampling" in of(checks.tool_capabilities(llm), "capability")[0][1]
    with_endpoint = tool(
        handler="llm", handler_config={"prompt": "x", "endpoint": {"url": "https://a.example/v1"}}
    )
    assert checks.tool_capabilities(with_endpoint) == []
    approved = tool(approval="every_time")
    assert "refused" in of(checks.tool_capabilities(approved), "capability")[0][1]
    assert of(checks.tool_capabilities(tool(task_support="required")), "capability")[0][0] == WARNING


def test_a_configuration_saving_would_refuse_now():
    unregistered = tool(handler="python", handler_config={"callable": "no_such_callable"})
    ((severity, message),) = of(checks.tool_config(unregistered), "config")
    assert severity == ERROR and "no_such_callable" in message


def test_prompts_and_templates():
    assert checks.check_prompt(prompt()) == []
    assert of(checks.check_prompt(prompt(name="code review")), "name")[0][0] == ERROR
    asking = prompt(arguments=[{"name": "code", "required": True, "ask": True}])
    assert "elicitation" in of(checks.check_prompt(asking), "capability")[0][1]
    assert checks.check_template(template()) == []
    stray = checks.check_template(template(completions={"nope": ["a"]}))
    assert stray[0].severity == ERROR and "nope" in stray[0].message
    assert stray[0].fix_url == "/admin/mcp_app/resourcetemplate/4/change/"
    assert stray[0].name == "notes://{id}"


def test_which_tools_a_dry_run_may_call():
    closed = {"readOnlyHint": True, "openWorldHint": False}
    assert safe_to_call(tool(handler="python", handler_config={"callable": "echo"}, annotations=closed))
    assert safe_to_call(tool())  # a template only renders
    assert not safe_to_call(
        tool(handler="python", annotations={"readOnlyHint": True})
    )  # open world by default
    assert not safe_to_call(tool(annotations=closed, approval="every_time"))
    assert not safe_to_call(tool(handler="python", annotations=closed, execution="background"))
    assert not safe_to_call(tool(handler="llm", handler_config={"prompt": "x"}, annotations=closed))


def test_the_report_groups_findings_worst_first():
    report = Report(tenant="t", checked={"tool": 2})
    report.findings = [
        Finding(INFO, "tool", "b", "era", "only 2026"),
        Finding(ERROR, "tool", "a", "name", "bad", "/fix/a"),
        Finding(WARNING, "tool", "b", "name", "dot"),
    ]
    assert [(g.name, g.severity) for g in report.groups()] == [("a", ERROR), ("b", WARNING)]
    body = report.as_dict()
    assert body["ok"] is False and body["counts"] == {"error": 1, "warning": 1, "info": 1}
    assert body["definitions"][0]["fix_url"] == "/fix/a"
    assert "1 error" in report.summary()


def listings(tools_by_version: dict[str, list[dict]], error: dict | None = None) -> dict:
    listed = {}
    for version in ALL_VERSIONS:
        tools = Listing("tools/list", pages=[{"tools": tools_by_version.get(version, [])}])
        prompts = Listing(
            "prompts/list", pages=[{"prompts": []}], error=error if version == V2024_11_05 else None
        )
        listed[version] = {"tools/list": tools, "prompts/list": prompts}
    return listed


def test_what_each_revision_lists_against_the_catalog():
    greet, modern_only = tool(), tool(id=8, name="table", output_schema={"type": "array"})
    cat = Catalog(tenant_id=1, version=1, tools=(greet, modern_only))
    listed_greet = {"name": "greet", "inputSchema": {"type": "object"}}
    listed_table = {"name": "table", "inputSchema": {"type": "object"}}
    everywhere = {v: [listed_greet] for v in ALL_VERSIONS} | {V2026_07_28: [listed_greet, listed_table]}
    assert listing_findings(listings(everywhere), cat, 1) == []

    missing = {**everywhere, V2024_11_05: []}
    (finding,) = listing_findings(listings(missing), cat, 1)
    assert (finding.severity, finding.name) == (ERROR, "greet") and "2024-11-05" in finding.message

    failing = listing_findings(listings(everywhere, error={"code": -32603, "message": "boom"}), cat, 1)
    assert [(f.kind, f.message) for f in failing] == [
        ("tenant", "prompts/list answers 2024-11-05 clients an error: boom.")
    ]
    assert failing[0].fix_url == "/admin/tenants/tenant/1/change/"

    shapeless = {**everywhere, V2025_03_26: [{"name": "greet"}]}
    (finding,) = listing_findings(listings(shapeless), cat, 1)
    assert "2025-03-26 clients get no object input schema" in finding.message
