"""Every problem of a field, in plain words, wherever a definition is checked (AMB-143, AMB-144).

One handler configuration with three problems (an unknown key, a wrong type, a template that does
not compile) is refused with all three by the admin's form, its check as you type, the API's 400
body and the import; a prompt whose arguments break both the schema and a rule only code can check
gets both from the import too.
"""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from mcp_app.content import fields
from mcp_app.handlers import registry
from mcp_app.models import Tool
from mcp_app.portability.document import DocumentError, schema
from mcp_app.portability.importer import import_document
from tests.admin.support import tool_form_data
from tests.api.conftest import API, tool_body

pytestmark = pytest.mark.django_db

BROKEN = {"text": "{% if %}", "bogus": 1, "is_error": "yes"}
SAYS = (
    "Unknown template handler keys: bogus.",
    "'is_error' must be true or false.",
    "'text': Template syntax error",
)


def all_said(messages: list[str]) -> bool:
    return len(messages) == len(SAYS) and all(any(s in m for m in messages) for s in SAYS)


def test_the_admin_form_lists_every_problem_of_a_field(client, alice, tenant_a):
    client.force_login(alice)
    tool = Tool(
        tenant=tenant_a, name="t", handler="template", handler_config=BROKEN, input_schema={"type": "object"}
    )
    response = client.post(reverse("admin:mcp_app_tool_add"), tool_form_data(tool))
    errors = list(response.context["adminform"].form.errors["handler_config"])
    assert all_said(errors), errors
    assert not Tool.objects.exists()


def test_the_check_as_you_type_lists_every_problem_of_a_field(client, alice):
    client.force_login(alice)
    url = reverse("admin:mcp_app_tool_check_json")
    answer = client.post(url, {"field": "handler_config", "value": json.dumps(BROKEN), "handler": "template"})
    assert all_said(answer.json()["errors"]), answer.json()


def test_the_api_lists_every_problem_of_a_field(as_alice, tenant_a):
    response = as_alice.call(
        "POST", f"{API}/tenant-a/tools/", tool_body(handler="template", handler_config=BROKEN)
    )
    assert response.status_code == 400
    assert all_said(response.json()["error"]["fields"]["handler_config"]), response.json()


def document(**changes: object) -> dict[str, object]:
    tool = {"name": "t", "handler": "template", "handler_config": {"text": "hi"}}
    return {"format": "mcp-platform/tenant", "version": 1, "tools": [{**tool, **changes}]}


def test_the_import_lists_every_problem_of_a_field(tenant_a):
    with pytest.raises(DocumentError) as caught:
        import_document(tenant_a, document(handler_config=BROKEN))
    said = [m for path, m in caught.value.problems if path == "tools[0].handler_config"]
    assert all_said(said), caught.value.problems
    assert not Tool.objects.exists()


def test_the_import_lists_the_schemas_problems_and_those_only_code_finds_together(tenant_a):
    # A 'required' that is not a boolean is the schema's; a name used twice only code can tell.
    arguments = [{"name": "a"}, {"name": "a", "required": "yes"}]
    prompt = {
        "name": "p",
        "arguments": arguments,
        "messages": [{"role": "user", "content": {"type": "text", "text": "x"}}],
    }
    with pytest.raises(DocumentError) as caught:
        import_document(tenant_a, {"format": "mcp-platform/tenant", "version": 1, "prompts": [prompt]})
    assert caught.value.problems == [
        ("prompts[0].arguments", "'required' of argument 2 must be true or false."),
        ("prompts[0].arguments", "Argument 'a' is defined twice."),
    ]


def test_a_json_schema_keyword_that_fits_no_branch_is_told_by_its_closest_one(tenant_a):
    # The meta-schema's "type" is an anyOf (a type name, or a list of them): the words are the enum's.
    with pytest.raises(DocumentError) as caught:
        import_document(
            tenant_a, document(input_schema={"type": "object", "properties": {"a": {"type": "strin"}}})
        )
    [(path, message)] = caught.value.problems
    assert path == "tools[0].input_schema.properties.a.type"
    assert message.startswith('\'type\' must be one of: "array", "boolean"')
    assert "any of the given schemas" not in message


def test_every_handler_kind_has_its_schema_and_the_tenant_document_dispatches_to_it():
    defs = fields.schema()["$defs"]
    assert {f"handler.{kind}" for kind in registry.KINDS} <= set(defs)
    assert {f"read.{kind}" for kind in registry.TEMPLATE_KINDS} <= set(defs)
    for item, prefix, kinds in (
        ("tool", "handler.", registry.KINDS),
        ("resource_template", "read.", registry.TEMPLATE_KINDS),
    ):
        dispatched = {
            rule["if"]["properties"]["handler"]["const"]: rule["then"]["properties"]["handler_config"]["$ref"]
            for rule in schema()["$defs"][item]["allOf"]
        }
        assert dispatched == {kind: f"{fields.SCHEMA_ID}#/$defs/{prefix}{kind}" for kind in kinds}
