"""Drafts in the admin and the API: saved drafts stay invisible to clients until published (AMB-221, AMB-222)."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.catalog import loader
from mcp_app.drafts import service as drafts
from mcp_app.history import service as history
from mcp_app.models import Prompt, Tool
from tests.admin.support import tool_form_data
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

API = "/api/v1/tenants/tenant-a"


def served(tenant) -> dict[str, str]:
    # The catalog's own read of the rows (get_catalog's, without its thread hop, which would close the
    # test's database connection on PostgreSQL).
    return {t.name: t.description for t in loader._load_catalog(tenant.id).tools}


def change_url(tool: Tool) -> str:
    return reverse("admin:mcp_app_tool_change", args=[tool.pk])


def test_save_keeps_a_draft_the_form_shows_and_clients_never_see(client: Client, alice, tool_a, tenant_a):
    client.force_login(alice)
    data = tool_form_data(tool_a, description="Drafted text.")
    del data["_publish"]
    data["_save"] = "Save draft"
    response = client.post(change_url(tool_a), data, follow=True)
    assert "clients still get version 1 until it is published" in response.content.decode()

    assert served(tenant_a)["greet"] == "Say hello."
    form = client.get(change_url(tool_a)).content.decode()
    assert "Drafted text." in form  # the form edits the draft
    assert "Clients get version 1." in form and "Compare with the published version" in form
    assert "1 field changed:\n  description)" in form or "1 field changed: description" in " ".join(form.split())
    assert 'name="_discard"' in form and 'name="_publish"' in form
    listing = client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()
    assert "v1 + draft" in listing
    draft_page = client.get(reverse("admin:mcp_app_tool_draft", args=[tool_a.pk])).content.decode()
    assert '<span class="del">- Say hello.</span>' in draft_page
    assert '<span class="add">+ Drafted text.</span>' in draft_page


def test_save_and_publish_makes_the_next_version_at_once(client: Client, alice, tool_a, tenant_a):
    client.force_login(alice)
    response = client.post(change_url(tool_a), tool_form_data(tool_a, description="Now."), follow=True)
    html = response.content.decode()
    assert "Published greet as version 2" in html and "was changed successfully" in html
    assert served(tenant_a)["greet"] == "Now."
    assert Tool.objects.get(pk=tool_a.pk).version == 2


def test_a_new_tool_saved_as_a_draft_is_unseen_then_discard_deletes_it(client: Client, alice, tool_a, tenant_a):
    client.force_login(alice)
    data = tool_form_data(tool_a, name="brand_new")
    del data["_publish"]
    data["_save"] = "Save draft"
    client.post(reverse("admin:mcp_app_tool_add"), data)
    new = Tool.objects.get(name="brand_new")
    assert new.version == 0 and "brand_new" not in served(tenant_a)
    assert "draft (never published)" in client.get(reverse("admin:mcp_app_tool_changelist")).content.decode()

    response = client.post(reverse("admin:mcp_app_tool_discard", args=[new.pk]))
    assert response.status_code == 302
    assert not Tool.objects.filter(pk=new.pk).exists()


def test_the_drafts_page_publishes_a_tenants_drafts_and_hides_other_tenants(
    client: Client, alice, charlie, tool_a, tenant_a
):
    tool_a.description = "Waiting."
    drafts.stage(tool_a, alice)
    Prompt.objects.create(tenant=tenant_a, name="p1", messages=[{"role": "user", "content": {"type": "text", "text": "x"}}])
    url = reverse("admin:mcp_app_tool_drafts")

    client.force_login(charlie)
    assert "tenant-a" not in client.get(url).content.decode()
    assert client.post(url, {"tenant": tenant_a.pk}).status_code == 404  # like a missing tenant
    assert served(tenant_a)["greet"] == "Say hello."

    client.force_login(alice)
    page = client.get(url).content.decode()
    assert "tenant-a · 1 draft" in page and "Publish all drafts of tenant-a" in page
    response = client.post(url, {"tenant": tenant_a.pk}, follow=True)
    assert "Published greet as version 2" in response.content.decode()
    assert served(tenant_a)["greet"] == "Waiting."


def test_a_viewer_can_neither_discard_nor_publish(client: Client, bob, alice, tool_a, tenant_a):
    tool_a.description = "Waiting."
    drafts.stage(tool_a, alice)
    client.force_login(bob)
    assert client.post(reverse("admin:mcp_app_tool_discard", args=[tool_a.pk])).status_code == 403
    assert client.post(reverse("admin:mcp_app_tool_drafts"), {"tenant": tenant_a.pk}).status_code == 403
    assert Tool.objects.get(pk=tool_a.pk).draft == {"description": "Waiting."}


def test_the_history_page_numbers_versions_and_compares_any_two(client: Client, alice, tool_a):
    for text in ("two", "three"):
        tool_a.description = text
        drafts.stage(tool_a, alice)
        drafts.publish(tool_a, alice)
    client.force_login(alice)
    html = client.get(reverse("admin:mcp_app_tool_history", args=[tool_a.pk])).content.decode()
    assert "Version 3 ·" in html and "Version 1 ·" in html and 'value="Roll back to version 1"' in html
    ids = {v.number: v.history_id for v in history.versions(Tool, tool_a.pk)}
    compare = reverse("admin:mcp_app_tool_compare", args=[tool_a.pk])
    page = client.get(compare, {"from": ids[1], "to": ids[3]}).content.decode()
    assert '<span class="del">- Say hello.</span>' in page and '<span class="add">+ three</span>' in page


# --- the API ------------------------------------------------------------------------------------


def test_the_api_stages_with_draft_true_and_publishes_on_request(alice, tool_a, tenant_a):
    api = ApiClient(alice)
    response = api.call("PATCH", f"{API}/tools/{tool_a.pk}/?draft=true", {"description": "Via API."})
    assert response.status_code == 200, response.content
    assert response.json()["description"] == "Via API."
    assert served(tenant_a)["greet"] == "Say hello."
    plain = api.call("GET", f"{API}/tools/{tool_a.pk}/").json()
    assert (plain["description"], plain["version"], plain["draft"]) == ("Say hello.", 1, {"description": "Via API."})
    assert api.call("GET", f"{API}/tools/{tool_a.pk}/?draft=true").json()["description"] == "Via API."

    created = api.call(
        "POST", f"{API}/tools/?draft=true", {"name": "staged", "handler": "template", "handler_config": {"text": "s"}}
    )
    assert created.status_code == 201 and created.json()["version"] == 0
    assert "staged" not in served(tenant_a)

    published = api.call("POST", f"{API}/publish/")
    assert published.status_code == 200
    assert sorted((p["name"], p["version"]) for p in published.json()["published"]) == [("greet", 2), ("staged", 1)]
    assert served(tenant_a) == {"greet": "Via API.", "staged": ""}
    assert api.call("POST", f"{API}/tools/{tool_a.pk}/publish/").json() == {"published": []}


def test_the_api_discards_and_compares_and_walls_other_tenants(alice, charlie, tool_a):
    api = ApiClient(alice)
    api.call("PATCH", f"{API}/tools/{tool_a.pk}/?draft=true", {"description": "Gone soon."})
    assert api.call("POST", f"{API}/tools/{tool_a.pk}/discard/").json() == {"discarded": True}
    assert Tool.objects.get(pk=tool_a.pk).draft is None
    api.call("PATCH", f"{API}/tools/{tool_a.pk}/", {"description": "v2"})  # no ?draft: published at once
    ids = {v.number: v.history_id for v in history.versions(Tool, tool_a.pk)}
    compare = api.call("GET", f"{API}/tools/{tool_a.pk}/history/compare/?from={ids[1]}&to={ids[2]}")
    assert [c["name"] for c in compare.json()["changes"]] == ["description"]
    assert api.call("GET", f"{API}/tools/{tool_a.pk}/history/compare/?from=x").status_code == 400

    other = ApiClient(charlie)
    for method, path in (
        ("POST", f"{API}/tools/{tool_a.pk}/publish/"),
        ("POST", f"{API}/tools/{tool_a.pk}/discard/"),
        ("POST", f"{API}/publish/"),
        ("GET", f"{API}/tools/{tool_a.pk}/history/compare/?from={ids[1]}&to={ids[2]}"),
    ):
        assert other.call(method, path).status_code == 404, path


@pytest.mark.django_db(transaction=True)
def test_the_api_tries_the_draft_before_it_is_published(alice, bob, charlie, tool_a, tenant_a):
    api = ApiClient(alice)
    api.call("PATCH", f"{API}/tools/{tool_a.pk}/?draft=true", {"handler_config": {"text": "Hi there, {{ name }}!"}})

    tried = api.call("POST", f"{API}/tools/{tool_a.pk}/try/", {"arguments": {"name": "Ada"}, "era": "2025-06-18"})

    assert tried.status_code == 200, tried.content
    body = tried.json()
    assert (body["definition"], body["era"], body["error"]) == ("draft", "2025-06-18", None)
    assert body["result"]["content"] == [{"type": "text", "text": "Hi there, Ada!"}]
    assert Tool.objects.get(pk=tool_a.pk).handler_config == {"text": "Hello, {{ name }}!"}  # still published

    api.call("POST", f"{API}/tools/{tool_a.pk}/discard/")
    published = api.call("POST", f"{API}/tools/{tool_a.pk}/try/", {"arguments": {"name": "Ada"}}).json()
    assert published["definition"] == "published"
    assert published["result"]["content"] == [{"type": "text", "text": "Hello, Ada!"}]
    refused = api.call("POST", f"{API}/tools/{tool_a.pk}/try/", {"arguments": {}}).json()
    assert refused["result"]["isError"] is True  # the tool's own validation, as a client meets it

    assert api.call("POST", f"{API}/tools/{tool_a.pk}/try/", {"era": "1999-01-01"}).status_code == 400
    assert ApiClient(bob).call("POST", f"{API}/tools/{tool_a.pk}/try/", {}).status_code == 403
    assert ApiClient(charlie).call("POST", f"{API}/tools/{tool_a.pk}/try/", {}).status_code == 404
