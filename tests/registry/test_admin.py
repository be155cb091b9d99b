"""The admin's "Add an upstream from a registry" (AMB-373) against the platform itself as the registry
(live_server) and the hostile one: search, "Use this" fills the add form from the entry read again,
saving adds the upstream with nothing published; errors are messages on the page, never a 500."""

from __future__ import annotations

import html
from urllib.parse import urlencode

import pytest
from django.urls import reverse

from mcp_app.models import Tool, Upstream
from mcp_app.registry import names

pytestmark = pytest.mark.django_db(transaction=True)
PAGE = "/admin/mcp_app/upstream/from-registry/"


def test_an_owner_searches_uses_an_entry_and_saves_the_filled_form(client, alice, tenant_a, platform_registry):
    client.force_login(alice)
    changelist = client.get(reverse("admin:mcp_app_upstream_changelist")).content.decode()
    assert 'id="from-registry"' in changelist
    page = client.get(PAGE + "?" + urlencode({"registry": platform_registry, "search": "notes"}))
    text = page.content.decode()
    assert page.status_code == 200 and f"{names.namespace()}/weather-notes" in text
    assert "weather-secret" not in text
    use = html.unescape(text.split('class="use-remote" href="')[1].split('"')[0])
    form = client.get(use)
    filled = form.content.decode()
    assert form.status_code == 200 and "Filled from" in filled
    assert f'value="{platform_registry}/t/weather-notes/mcp"' in filled and 'value="weather-notes"' in filled
    data = {"tenant": tenant_a.pk, "name": "weather-notes", "url": f"{platform_registry}/t/weather-notes/mcp",
            "transport": "streamable-http", "prefix": "weather_notes_", "mode": "auto", "timeout_seconds": 30}  # fmt: skip
    assert client.post(reverse("admin:mcp_app_upstream_add"), data).status_code == 302
    assert Upstream.objects.get(tenant=tenant_a).url.endswith("/t/weather-notes/mcp")
    assert not Tool.objects.filter(tenant=tenant_a).exists()


def test_errors_and_refusals_are_said_on_the_page(client, alice, tenant_a, evil, bob):
    client.force_login(alice)
    for path, says in (("/malformed", "not JSON"), ("/huge", "larger than"), ("/redirect", "HTTP 302")):
        page = client.get(PAGE + "?" + urlencode({"registry": evil + path, "search": ""}))
        assert page.status_code == 200 and says in page.content.decode()
    internal = client.get(PAGE + "?" + urlencode({"registry": evil + "/internal", "search": ""})).content.decode()
    assert internal.count("refused") >= 3 and 'class="use-remote"' not in internal
    # A hand-made "Use this" link to an internal entry fills nothing.
    query = {"registry": evil + "/internal", "registry_server": "io.evil/private-net", "registry_remote": "0"}
    form = client.get(reverse("admin:mcp_app_upstream_add") + "?" + urlencode(query)).content.decode()
    assert "private address; refused" in form and "10.0.0.5" not in form.split('id="id_url"')[1][:300]
    mixed = {"registry": evil + "/mixed", "registry_server": "io.good/remote", "registry_remote": "1"}
    needs = client.get(reverse("admin:mcp_app_upstream_add") + "?" + urlencode(mixed)).content.decode()
    assert "It needs these headers" in needs and "Authorization (required)" in needs
    client.force_login(bob)  # a viewer adds nothing
    assert client.get(PAGE).status_code == 403
