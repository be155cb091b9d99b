"""The admin's JSON fields as structured editors (AMB-70): same form, same errors, checked as you type."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse

from mcp_app.models import Prompt, Tool
from tests.admin.support import tool_form_data

pytestmark = pytest.mark.django_db

CHECK = "admin:mcp_app_tool_check_json"


def change_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_change", args=[tool.pk])


def test_every_json_field_of_a_tool_is_a_structured_editor_served_from_our_static_files(
    client, alice, tool_a
):
    client.force_login(alice)
    page = client.get(change_url(tool_a)).content.decode()
    for field in ("input_schema", "output_schema", "handler_config", "annotations", "icons", "meta"):
        assert f'data-field="{field}" data-check-url="{reverse(CHECK)}"' in page, field
    assert "/static/dist/jsoneditor.min.js" in page and "/static/mcpsite/json_editor.js" in page
    assert "cdn" not in page.lower()
    # The real field is still a textarea holding the JSON: the form submits exactly what was typed.
    assert '<textarea name="input_schema"' in page and "&quot;required&quot;: [" in page
    # Secrets stay a plain write-only box, never an editor that could show them.
    assert 'data-field="secret_headers"' not in page


def test_the_form_saves_what_the_editor_submits(client, alice, tool_a):
    client.force_login(alice)
    schema = {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}
    response = client.post(change_url(tool_a), tool_form_data(tool_a, input_schema=json.dumps(schema)))
    assert response.status_code == 302
    tool_a.refresh_from_db()
    assert tool_a.input_schema == schema


def test_bad_json_is_refused_with_the_same_message_as_before(client, alice, tool_a):
    client.force_login(alice)
    response = client.post(change_url(tool_a), tool_form_data(tool_a, input_schema='{"type": '))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["input_schema"] == [
        "Invalid JSON: Expecting value at line 1, column 10."
    ]
    # What was typed comes back as typed, for the editor to show in its code mode.
    assert "{&quot;type&quot;: </textarea>" in response.content.decode()


def test_json_nested_past_the_limit_is_refused_naming_it(client, alice, tool_a):
    client.force_login(alice)
    deep = "[" * 20_000 + "]" * 20_000
    response = client.post(change_url(tool_a), tool_form_data(tool_a, input_schema=deep))
    assert response.status_code == 200
    assert response.context["adminform"].form.errors["input_schema"] == [
        "Invalid JSON: nested deeper than 64 levels."
    ]


@pytest.mark.parametrize(
    ("field", "value", "extra"),
    [
        ("input_schema", '{"type": ', {}),
        ("input_schema", {"type": "object", "properties": {"n": {"type": "strin"}}}, {}),
        ("input_schema", {"type": "array"}, {}),
        ("output_schema", {"type": "nope"}, {}),
        ("annotations", {"readOnly": True}, {}),
        ("handler_config", {"nothing": "here"}, {"handler": "template"}),
        ("icons", [{"src": "http://example.com/a.png"}], {}),
        ("meta", {"modelcontextprotocol.io/x": 1}, {}),
        # AMB-115, AMB-117: nested past the limit (was a 500), NaN, a reference outside the schema.
        ("input_schema", "[" * 20_000 + "]" * 20_000, {}),
        ("handler_config", '{"text": NaN}', {"handler": "template"}),
        ("output_schema", {"type": "object", "properties": {"a": {"$ref": "https://example.com/a"}}}, {}),
    ],
)
def test_the_editors_check_says_exactly_what_the_save_would_say(client, alice, tool_a, field, value, extra):
    client.force_login(alice)
    raw = value if isinstance(value, str) else json.dumps(value)
    saved = client.post(change_url(tool_a), tool_form_data(tool_a, **{field: raw, **extra}))
    expected = saved.context["adminform"].form.errors[field]
    checked = client.post(reverse(CHECK), {"field": field, "value": raw, **extra}).json()
    assert checked["errors"] == expected and expected


def test_a_valid_schema_is_said_to_be_valid_and_blank_means_the_default(client, alice):
    client.force_login(alice)
    schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})
    assert client.post(reverse(CHECK), {"field": "input_schema", "value": schema}).json() == {
        "errors": [],
        "ok": "A valid JSON Schema.",
    }
    assert client.post(reverse(CHECK), {"field": "input_schema", "value": "  "}).json()["errors"] == []


def test_prompt_arguments_are_checked_by_the_prompts_own_rules(client, alice, prompt_a):
    client.force_login(alice)
    url = reverse("admin:mcp_app_prompt_check_json")
    answer = client.post(url, {"field": "arguments", "value": '[{"name": "not an identifier"}]'}).json()
    assert answer["errors"] == [
        "'name' of argument 1 must be letters, digits and '_' (usable in the message template)."
    ]
    page = client.get(reverse("admin:mcp_app_prompt_change", args=[prompt_a.pk])).content.decode()
    assert f'data-field="messages" data-check-url="{url}"' in page
    assert Prompt.objects.get(pk=prompt_a.pk).arguments == prompt_a.arguments


def test_the_check_is_a_post_for_signed_in_admin_users_only(client, alice, bob):
    assert client.post(reverse(CHECK), {"field": "meta", "value": "{}"}).status_code == 302  # to sign in
    client.force_login(bob)  # a viewer may check: nothing is saved, no tenant data is read
    assert client.post(reverse(CHECK), {"field": "meta", "value": "{}"}).json()["errors"] == []
    assert client.get(reverse(CHECK)).status_code == 405


def test_the_tool_list_shows_one_short_line_per_column(client, alice, tool_a):
    tool_a.description = "Say hello to someone by name. " * 10 + "\nSecond line."
    tool_a.save()
    client.force_login(alice)
    page = client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()
    assert (
        '"field-short_description">Say hello to someone by name. Say hello to someone by name.…</td>' in page
    )
    assert "Second line" not in page
    for column in ("column-short_description", "column-kind", "column-runs", "column-enabled"):
        assert column in page, column
    assert (
        "In the server process (quick tools)</td>" not in page
        and '<td class="field-runs">inline</td>' in page
    )


MULTIPLE_CHOICE = {
    "message": "Pick",
    "fields": {
        "type": "object",
        "properties": {
            "plan": {"type": "string", "oneOf": [{"const": "p1", "title": "Starter"}], "default": "p1"},
            "scopes": {"type": "array", "items": {"anyOf": [{"const": "r", "title": "Read"}]}, "maxItems": 1},
        },
    },
}


def test_the_editor_accepts_a_forms_choices_and_says_why_a_default_outside_them_is_refused(
    client, alice, tool_a
):
    """AMB-120: the admin's check as you type is the form kind's own field check."""
    client.force_login(alice)
    ok = client.post(
        reverse(CHECK), {"field": "handler_config", "value": json.dumps(MULTIPLE_CHOICE), "handler": "form"}
    ).json()
    assert ok["errors"] == []
    bad = json.loads(json.dumps(MULTIPLE_CHOICE))
    bad["fields"]["properties"]["plan"]["default"] = "p9"
    refused = client.post(
        reverse(CHECK), {"field": "handler_config", "value": json.dumps(bad), "handler": "form"}
    )
    assert refused.json()["errors"] == ["Field 'plan': 'default' 'p9' is not an answer this field accepts."]
