"""Adding an upstream from a registry through the API (AMB-373), against real registries: the platform
itself serving v0.1 (live_server), and a hostile one (tests/registry/hostile.py) answering huge, slow,
malformed, redirecting, or listing remotes at internal addresses. Each gives a clear error, never a 500."""

from __future__ import annotations

import time

import pytest

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Tool, Upstream, UpstreamTool
from mcp_app.registry import names
from tests.api.conftest import API, ApiClient
from tests.registry import hostile

pytestmark = pytest.mark.django_db(transaction=True)
SEARCH = f"{API}/tenant-a/upstreams/registry-search/"
ADD = f"{API}/tenant-a/upstreams/from-registry/"


def test_an_editor_finds_a_listed_server_and_adds_it_as_an_upstream_with_nothing_published(
    platform_registry, alice, tenant_a, settings
):
    api = ApiClient(alice)
    found = api.call("POST", SEARCH, {"registry": platform_registry, "search": "weather"})
    assert found.status_code == 200, found.json()
    body = found.json()
    ns = names.namespace()
    assert [s["server_name"] for s in body["servers"]] == [f"{ns}/weather", f"{ns}/weather-notes"]
    weather = body["servers"][0]
    assert weather["remotes"] == [
        {"url": f"{platform_registry}/t/weather/mcp", "transport": "streamable-http", "headers": [], "refused": ""}
    ]
    assert (weather["upstream_name"], weather["prefix"], body["skipped"], body["next_cursor"]) == (
        "weather", "weather_", 0, "",
    )  # fmt: skip
    paged = api.call("POST", SEARCH, {"registry": platform_registry, "search": "weather", "limit": 1}).json()
    assert paged["next_cursor"] == f"{ns}/weather"

    # The official registry is the default: here, the operator points MCP_REGISTRY_URL at ours.
    settings.MCP_REGISTRY_URL = platform_registry
    added = api.call("POST", ADD, {"server_name": f"{ns}/weather-notes", "secrets": {"X-Team": "blue"}})
    assert added.status_code == 201, added.json()
    row = Upstream.objects.get(tenant=tenant_a)
    assert (row.name, row.url, row.transport, row.prefix) == (
        "weather-notes", f"{platform_registry}/t/weather-notes/mcp", "streamable-http", "weather_notes_",
    )  # fmt: skip
    assert decrypt_secrets(row.secret_headers) == {"X-Team": "blue"}
    assert added.json()["secret_names"] == ["X-Team"] and "blue" not in added.content.decode()
    # Nothing reaches clients: its tools wait for a sync and the pinned review.
    assert not Tool.objects.filter(tenant=tenant_a).exists() and not UpstreamTool.objects.exists()

    again = api.call("POST", ADD, {"server_name": f"{ns}/weather-notes"})
    assert again.status_code == 400
    assert again.json()["error"]["message"] == "Upstream with this Tenant and Name already exists."
    for name in (f"{ns}/weather-secret", f"{ns}/nowhere", "io.other/weather"):
        missing = api.call("POST", ADD, {"server_name": name})
        assert missing.status_code == 502
        assert missing.json()["error"]["message"] == "The registry answered HTTP 404."


def test_a_viewer_may_not_and_another_tenants_member_meets_a_missing_tenant(platform_registry, bob, charlie):
    body = {"registry": platform_registry, "search": "weather"}
    assert ApiClient(bob).call("POST", SEARCH, body).status_code == 403
    theirs = ApiClient(charlie).call("POST", SEARCH, body)
    missing = ApiClient(charlie).call("POST", f"{API}/no-such-tenant/upstreams/registry-search/", body)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()


@pytest.mark.parametrize(
    "path, says",
    [
        ("/huge", "The registry's answer is larger than 1048576 bytes; refused."),
        ("/huge-chunked", "The registry's answer is larger than 1048576 bytes; refused."),
        ("/malformed", "The registry's answer is not JSON: is this the base URL of an MCP registry?"),
        ("/not-a-list", 'The registry\'s answer is not a list of servers (no "servers" array).'),
        ("/redirect", "The registry answered HTTP 302 (a redirect, not followed)."),
    ],
)
def test_a_hostile_registry_answer_is_a_clear_502(evil, alice, tenant_a, path, says):
    answer = ApiClient(alice).call("POST", SEARCH, {"registry": evil + path})
    assert answer.status_code == 502
    assert answer.json()["error"] == {"code": "registry_unreachable", "message": says}


def test_a_slow_registry_is_abandoned_at_the_timeout(evil, alice, tenant_a, settings):
    settings.MCP_REGISTRY_FETCH_SECONDS = 1
    started = time.monotonic()
    answer = ApiClient(alice).call("POST", SEARCH, {"registry": evil + "/slow"})
    assert time.monotonic() - started < hostile.SLOW_SECONDS - 1
    assert answer.status_code == 502
    assert "did not answer within 1 seconds" in answer.json()["error"]["message"]


def test_the_ssrf_guard_refuses_an_internal_registry_and_bad_urls_are_400(evil, alice, tenant_a, settings):
    api = ApiClient(alice)
    settings.MCP_HTTP_HANDLER_ALLOW = []
    refused = api.call("POST", SEARCH, {"registry": evil + "/mixed"})
    assert refused.status_code == 502
    assert "refused" in refused.json()["error"]["message"] and "loopback" in refused.json()["error"]["message"]
    for bad in ("ftp://registry.example", "https://registry.example/?x=1", "not a url", "https://user:pw@r.example"):
        answer = api.call("POST", SEARCH, {"registry": bad})
        assert answer.status_code == 400 and "registry" in answer.json()["error"]["fields"], bad
    for body in ({"search": "x" * 201}, {"limit": 0}, {"limit": "many"}):
        assert api.call("POST", SEARCH, body).status_code == 400


def test_entries_pointing_inside_are_refused_when_chosen_and_when_used(evil, alice, tenant_a):
    api = ApiClient(alice)
    found = api.call("POST", SEARCH, {"registry": evil + "/internal"}).json()
    reasons = {s["server_name"]: s["remotes"][0]["refused"] for s in found["servers"]}
    assert reasons == {
        "io.evil/private-net": "Its URL points to a private address; refused.",
        "io.evil/metadata": "Its URL points to a cloud metadata address; refused.",
        "io.evil/mapped": "Its URL points to an IPv6 form of a private address; refused.",
    }
    for name in reasons:
        added = api.call("POST", ADD, {"registry": evil + "/internal", "server_name": name})
        assert added.status_code == 400 and "refused" in added.json()["error"]["fields"]["remote"][0]
    assert not Upstream.objects.exists()
    # Typed in by hand instead, the guard still refuses it the moment it is used.
    row = api.call("POST", f"{API}/tenant-a/upstreams/", {"name": "inside", "url": "http://10.0.0.5/mcp"})
    assert row.status_code == 201
    tested = api.call("POST", f"{API}/tenant-a/upstreams/{row.json()['id']}/test/")
    assert tested.status_code == 502 and "private address" in tested.json()["error"]["message"]


def test_broken_entries_are_skipped_and_a_required_header_must_be_entered(evil, alice, tenant_a):
    api = ApiClient(alice)
    found = api.call("POST", SEARCH, {"registry": evil + "/mixed"}).json()
    assert found["skipped"] == 3 and found["next_cursor"] == ""
    remote, packages_only = found["servers"]
    assert packages_only["server_name"] == "io.good/packages-only" and packages_only["remotes"] == []
    templated, usable = remote["remotes"]
    assert "variables" in templated["refused"]
    assert usable == {
        "url": "https://mcp.good.example/mcp", "transport": "streamable-http", "refused": "",
        "headers": [{"name": "Authorization", "description": "A token", "is_required": True}],
    }  # fmt: skip
    body = {"registry": evil + "/mixed", "server_name": "io.good/remote", "remote": 1}
    unset = api.call("POST", ADD, body)
    assert unset.status_code == 400
    assert unset.json()["error"]["fields"]["secrets"] == ["The server needs these headers: Authorization."]
    assert api.call("POST", ADD, {**body, "remote": 0}).status_code == 400
    assert api.call("POST", ADD, {**body, "remote": 5}).status_code == 400
    added = api.call("POST", ADD, {**body, "secrets": {"Authorization": "Bearer t0ken"}, "name": "good"})
    assert added.status_code == 201, added.json()
    assert decrypt_secrets(Upstream.objects.get(name="good").secret_headers) == {"Authorization": "Bearer t0ken"}
