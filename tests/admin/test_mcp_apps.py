"""MCP Apps' checks and the app preview in the admin (AMB-272, AMB-275)."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from mcp_app.core import ui_apps
from mcp_app.models import Resource, Tool

pytestmark = pytest.mark.django_db

HTML = "<!DOCTYPE html><html><body><p>app</p><script>document.body.dataset.ran = '1';</script></body></html>"


def app(tenant, uri="ui://a/app.html", **extra) -> Resource:
    resource = Resource(tenant=tenant, uri=uri, name="app", mime_type=ui_apps.MIME_TYPE, text=HTML, **extra)
    resource.full_clean()
    resource.save()
    return resource


def tool(tenant, meta, handler="template") -> Tool:
    return Tool(tenant=tenant, name="show", handler=handler, handler_config={"text": "shown"}, meta=meta)


def errors_of(row) -> dict[str, list[str]]:
    with pytest.raises(ValidationError) as caught:
        row.full_clean()
    return caught.value.message_dict


def test_a_ui_resource_needs_the_app_mime_type_and_an_app_type_needs_a_ui_uri(tenant_a):
    wrong_type = Resource(tenant=tenant_a, uri="ui://a/x.html", name="x", mime_type="text/html", text=HTML)
    assert "must be text/html;profile=mcp-app" in " ".join(errors_of(wrong_type)["mime_type"])
    wrong_uri = Resource(tenant=tenant_a, uri="a://x.html", name="x", mime_type=ui_apps.MIME_TYPE, text=HTML)
    assert "lives at a ui:// URI" in " ".join(errors_of(wrong_uri)["uri"])
    empty = Resource(tenant=tenant_a, uri="ui://a/x.html", name="x", mime_type=ui_apps.MIME_TYPE, text="")
    assert "needs its HTML document" in " ".join(errors_of(empty)["text"])
    app(tenant_a)  # the right pair saves
    # The parameter's spacing and case do not matter.
    assert ui_apps.is_app_mime_type("text/html; profile=MCP-APP")


def test_an_apps_csp_domains_are_lists_of_origins(tenant_a):
    bad = Resource(
        tenant=tenant_a, uri="ui://a/x.html", name="x", mime_type=ui_apps.MIME_TYPE, text=HTML,
        meta={"ui": {"csp": {"connectDomains": "https://api.example.com", "scriptDomains": []}}},
    )  # fmt: skip
    problems = " ".join(errors_of(bad)["meta"])
    assert "ui.csp.connectDomains must be a list of origins" in problems
    assert 'no key "scriptDomains"' in problems


def test_a_tool_links_an_app_of_its_own_tenant_in_plain_words(tenant_a, tenant_b):
    app(tenant_b, "ui://b/app.html")
    app(tenant_a)
    Resource.objects.create(tenant=tenant_a, uri="a://notes", name="notes", text="n")
    missing = errors_of(tool(tenant_a, {"ui": {"resourceUri": "ui://a/none.html"}}))["meta"]
    assert missing == ["The app ui://a/none.html is not a resource of this tenant: add the resource first, then link it."]
    # Another tenant's app answers exactly as a missing one.
    other = errors_of(tool(tenant_a, {"ui": {"resourceUri": "ui://b/app.html"}}))["meta"]
    assert other == ["The app ui://b/app.html is not a resource of this tenant: add the resource first, then link it."]
    not_ui = errors_of(tool(tenant_a, {"ui": {"resourceUri": "a://notes"}}))["meta"]
    assert "must name a ui:// resource" in not_ui[0]
    tool(tenant_a, {"ui": {"resourceUri": "ui://a/app.html"}}).full_clean()
    tool(tenant_a, {"ui/resourceUri": "ui://a/app.html"}).full_clean()  # the deprecated flat key is read too
    # An upstream's tool names the upstream's app: not a row of ours.
    assert "meta" not in errors_of(tool(tenant_a, {"ui": {"resourceUri": "ui://up/x.html"}}, handler="upstream"))


@pytest.mark.parametrize(
    ("visibility", "fine"),
    [(["app"], True), (["model", "app"], True), (["model"], True), ([], False), (["user"], False),
     (["app", "app"], False), ("app", False)],
)  # fmt: skip
def test_a_tools_visibility_is_model_and_or_app(tenant_a, visibility, fine):
    app(tenant_a)
    row = tool(tenant_a, {"ui": {"resourceUri": "ui://a/app.html", "visibility": visibility}})
    if fine:
        row.full_clean()
    else:
        assert 'visibility must be a list of "model" and/or "app"' in errors_of(row)["meta"][0]


def test_an_app_only_tool_needs_its_app():
    assert ui_apps.meta_problems({"ui": {"visibility": ["app"]}}) == [
        'A tool only its app calls (ui.visibility ["app"]) needs ui.resourceUri: the app.'
    ]


def test_the_live_check_of_the_tool_meta_field_says_the_same(client, alice):
    client.force_login(alice)
    url = reverse("admin:mcp_app_tool_check_json")
    answer = client.post(url, {"field": "meta", "value": '{"ui": {"resourceUri": "https://x"}}', "handler": "template"})
    assert "must name a ui:// resource" in answer.content.decode()


def test_client_support_needs_the_extension_with_the_app_mime_type():
    assert ui_apps.client_supports({"extensions": {ui_apps.EXTENSION: {"mimeTypes": [ui_apps.MIME_TYPE]}}})
    assert not ui_apps.client_supports({"extensions": {ui_apps.EXTENSION: {}}})
    assert not ui_apps.client_supports({"extensions": {ui_apps.EXTENSION: {"mimeTypes": ["text/html"]}}})
    assert not ui_apps.client_supports({})


def test_the_policy_is_the_extensions_default_plus_what_the_app_declares():
    assert ui_apps.content_security_policy({}) == (
        "default-src 'none'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
        "connect-src 'none'; img-src 'self' data:; font-src 'self'; media-src 'self' data:; "
        "frame-src 'none'; object-src 'none'; base-uri 'self'"
    )
    declared = {"ui": {"csp": {"connectDomains": ["https://api.example.com"], "resourceDomains": ["https://cdn.example.com"]}}}
    policy = ui_apps.content_security_policy(declared)
    assert "connect-src 'self' https://api.example.com" in policy
    assert "script-src 'self' 'unsafe-inline' https://cdn.example.com" in policy


def test_the_preview_serves_the_app_under_its_own_policy_to_members_only(client, alice, charlie, tenant_a):
    resource = app(tenant_a)
    url = reverse("admin:mcp_app_resource_app_preview", args=[resource.pk])
    client.force_login(alice)
    page = client.get(reverse("admin:mcp_app_resource_change", args=[resource.pk])).content.decode()
    assert f'<iframe class="app-preview" sandbox="allow-scripts" src="{url}"' in page
    answer = client.get(url)
    assert answer.status_code == 200 and answer.content.decode() == HTML
    assert answer["Content-Security-Policy"].startswith("default-src 'none'; script-src 'self' 'unsafe-inline'")
    assert answer["Content-Security-Policy"].endswith("frame-ancestors 'self'")
    assert answer["X-Frame-Options"] == "SAMEORIGIN"
    notes = Resource.objects.create(tenant=tenant_a, uri="a://notes", name="notes", text="n")
    assert client.get(reverse("admin:mcp_app_resource_app_preview", args=[notes.pk])).status_code == 404
    client.force_login(charlie)
    assert client.get(url).status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_try_page_plays_a_host_with_apps_so_an_app_only_tool_runs(client, alice, tenant_a):
    app(tenant_a)
    only_app = Tool.objects.create(
        tenant=tenant_a, name="refresh", handler="template", handler_config={"text": "refreshed"},
        meta={"ui": {"resourceUri": "ui://a/app.html", "visibility": ["app"]}},
    )  # fmt: skip
    client.force_login(alice)
    page = client.post(reverse("admin:mcp_app_tool_try", args=[only_app.pk]), {"arguments": "{}"})
    outcome = page.context["outcome"]
    assert not outcome.protocol_error, outcome.body
    assert "refreshed" in outcome.body
