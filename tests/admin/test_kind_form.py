"""The tool form per kind, as the server renders it (AMB-260, AMB-261): examples, help, errors once."""

from __future__ import annotations

import base64
import json
import re

import pytest
from django.urls import reverse

from mcp_app.admin import kind_examples
from mcp_app.admin.forms import PromptAdminForm, ResourceAdminForm, ResourceTemplateAdminForm, ToolAdminForm
from mcp_app.models import Resource, ResourceTemplate, Tool
from tests.admin.support import tool_form_data
from tests.handlers.support import PNG

pytestmark = pytest.mark.django_db


def test_a_new_tool_starts_as_the_template_example_and_carries_every_kinds_example(client, alice):
    client.force_login(alice)
    html = client.get(reverse("admin:mcp_app_tool_add")).content.decode()
    form = client.get(reverse("admin:mcp_app_tool_add")).context["adminform"].form
    example = kind_examples.examples()["template"]
    assert form.initial["handler"] == "template"
    assert form.initial["handler_config"] == example.handler_config
    assert form.initial["input_schema"] == example.input_schema
    examples = re.search(r'data-kind-examples="([^"]*)"', html)
    assert examples is not None
    carried = json.loads(
        examples.group(1).replace("&quot;", '"').replace("&#x27;", "'").replace("&amp;", "&")
    )
    assert set(carried) == {"template", "http", "form", "llm", "python"}
    assert 'data-structured="schema"' in html and 'data-structured="form_fields"' in html


def test_an_existing_tool_keeps_its_settings_and_gets_no_examples(client, alice, tool_a):
    client.force_login(alice)
    html = client.get(reverse("admin:mcp_app_tool_change", args=[tool_a.pk])).content.decode()
    assert "data-kind-examples" not in html and "data-kind-rows" in html


@pytest.mark.parametrize(
    "form_class", [ToolAdminForm, PromptAdminForm, ResourceAdminForm, ResourceTemplateAdminForm]
)
def test_every_field_explains_itself_in_one_line(form_class):
    form = form_class()
    for name, field in form.fields.items():
        text = str(field.help_text)
        assert text.strip(), f"{form_class.__name__}.{name} has no help"
        assert "\n" not in text, f"{form_class.__name__}.{name}: more than a line"


def test_the_python_select_is_the_whole_configuration_whatever_the_settings_box_held(client, alice, tenant_a):
    client.force_login(alice)
    tool = Tool(tenant=tenant_a, name="py", handler="python", handler_config={"text": "left over"})
    data = tool_form_data(tool, python_callable="add")
    response = client.post(reverse("admin:mcp_app_tool_add"), data)
    assert response.status_code == 302, response.content[:3000]
    assert Tool.objects.get(tenant=tenant_a, name="py").handler_config == {"callable": "add"}
    data = tool_form_data(Tool(tenant=tenant_a, name="py2", handler="python", handler_config={}))
    response = client.post(reverse("admin:mcp_app_tool_add"), data)
    assert "Choose the registered callable this tool runs." in response.content.decode()


def test_every_problem_is_shown_once_next_to_its_own_field(client, alice, tool_a):
    client.force_login(alice)
    data = tool_form_data(
        tool_a,
        input_schema=json.dumps({"type": "object", "properties": {"a": {"type": "strin"}}}),
        output_schema=json.dumps({"type": 5}),
        handler="http",
        handler_config=json.dumps({"url": "ftp://x", "method": "FETCH", "headers": {"Host": "a"}}),
        icons=json.dumps([{"src": "http://insecure"}]),
    )
    response = client.post(reverse("admin:mcp_app_tool_change", args=[tool_a.pk]), data)
    assert response.status_code == 200
    form = response.context["adminform"].form
    html = response.content.decode()
    assert set(form.errors) == {"input_schema", "output_schema", "handler_config", "icons"}, form.errors
    for field, messages in form.errors.items():
        row = re.search(
            rf'<div class="form-row[^"]*field-{field}.*?</fieldset>|<div class="form-row[^"]*field-{field}.*',
            html,
            re.S,
        )
        assert row is not None, field
        for message in messages:
            escaped = (
                message.replace("&", "&amp;")
                .replace("'", "&#x27;")
                .replace('"', "&quot;")
                .replace("<", "&lt;")
                .replace(">", "&gt;")
            )
            assert html.count(escaped) == 1, (field, message)
            assert escaped in row.group(0), (field, message)
    assert len(form.errors["handler_config"]) >= 3  # all of them: the scheme, the method, the header


def test_a_resource_page_previews_its_text_and_renders_its_image(client, alice, tenant_a):
    client.force_login(alice)
    text = Resource.objects.create(tenant=tenant_a, uri="docs://readme", name="readme", text="# <Hello>")
    image = Resource.objects.create(
        tenant=tenant_a, uri="docs://logo", name="logo", mime_type="image/png", text="", blob=PNG
    )
    page = client.get(reverse("admin:mcp_app_resource_change", args=[text.pk])).content.decode()
    assert '<div class="resource-preview"><pre># &lt;Hello&gt;</pre></div>' in page
    page = client.get(reverse("admin:mcp_app_resource_change", args=[image.pk])).content.decode()
    encoded = base64.b64encode(PNG).decode()
    assert f'<img src="data:image/png;base64,{encoded}" alt="logo">' in page


def test_a_resource_template_page_previews_one_uri_read_as_a_client_reads_it(client, alice, tenant_a):
    client.force_login(alice)
    template = ResourceTemplate.objects.create(
        tenant=tenant_a,
        uri_template="users://{id}/profile",
        name="profile",
        handler="template",
        handler_config={"text": "Profile of <{{ id }}>"},
        completions={"id": ["42", "7"]},
    )
    page = client.get(reverse("admin:mcp_app_resourcetemplate_change", args=[template.pk])).content.decode()
    assert "<p><code>users://42/profile</code></p><pre>Profile of &lt;42&gt;</pre>" in page
    template.handler, template.handler_config = "python", {"callable": "user_profile"}
    template.save()
    page = client.get(reverse("admin:mcp_app_resourcetemplate_change", args=[template.pk])).content.decode()
    assert "read them from a client" in page
