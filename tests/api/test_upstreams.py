"""Upstreams through the API against a real SDK upstream: secret headers write-only, Test connection,
sync, publish, unpublish, diff and accept; viewers change nothing, another tenant's upstream is a 404."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcp_app.api.errors import NOT_FOUND
from mcp_app.api.upstreams import REFUSED, UNREACHABLE
from mcp_app.handlers.secrets import decrypt_secrets, encrypt_secrets
from mcp_app.models import Approval, Tool, Upstream, UpstreamTool
from tests.api.conftest import API
from tests.upstreams.running import make_upstream, redescribe, running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = pytest.mark.django_db
BEARER = "api-upstream-bearer-7f3a"
UPSTREAMS = f"{API}/tenant-a/upstreams/"
REMOTE = f"{API}/tenant-a/remote-tools/"


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


@pytest.fixture
def remote(tmp_path) -> Iterator[UpstreamServer]:
    with running_upstream(tmp_path, bearer=BEARER) as server:
        yield server


@pytest.fixture
def upstream_a(tenant_a, remote) -> Upstream:
    row = make_upstream(tenant_a, remote.url)
    row.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    row.save()
    return row


def synced(as_alice, upstream: Upstream) -> dict[str, int]:
    """Sync the upstream through the API; its remote tools' ids by remote name."""
    response = as_alice.call("POST", f"{UPSTREAMS}{upstream.pk}/sync/")
    assert response.status_code == 200, response.json()
    listed = as_alice.call("GET", f"{REMOTE}?upstream={upstream.pk}").json()["results"]
    return {row["remote_name"]: row["id"] for row in listed}


def test_an_upstream_created_with_secret_headers_stores_them_encrypted_and_only_names_them(
    as_alice, tenant_a, remote
) -> None:
    body = {
        "name": "docs",
        "url": remote.url,
        "prefix": "docs_",
        "secrets": {"Authorization": f"Bearer {BEARER}"},
    }
    created = as_alice.call("POST", UPSTREAMS, body)
    assert created.status_code == 201, created.json()
    assert BEARER not in created.content.decode()
    assert created.json()["secret_names"] == ["Authorization"]
    row = Upstream.objects.get(tenant=tenant_a)
    assert decrypt_secrets(row.secret_headers) == {"Authorization": f"Bearer {BEARER}"}
    fetched = as_alice.call("GET", f"{UPSTREAMS}{row.pk}/")
    assert BEARER not in fetched.content.decode() and fetched.json()["secret_names"] == ["Authorization"]
    # What a read returns can be sent back: absent secrets keep the stored ones.
    put = as_alice.call("PUT", f"{UPSTREAMS}{row.pk}/", {**fetched.json(), "timeout_seconds": 12})
    assert put.status_code == 200, put.json()
    row.refresh_from_db()
    assert row.timeout_seconds == 12 and decrypt_secrets(row.secret_headers)
    cleared = as_alice.call("PATCH", f"{UPSTREAMS}{row.pk}/", {"secrets": {}})
    assert cleared.json()["secret_names"] == []


def test_an_upstream_is_validated_by_its_model_field_by_field(as_alice, tenant_a, upstream_a) -> None:
    response = as_alice.call(
        "POST", UPSTREAMS, {"name": "docs", "url": "not a url", "prefix": "gh:", "timeout_seconds": 0}
    )
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert {"url", "prefix", "timeout_seconds"} <= set(fields)
    assert "colons" in " ".join(fields["prefix"])
    duplicate = as_alice.call("POST", UPSTREAMS, {"name": "docs", "url": "https://mcp.example.com/mcp"})
    assert duplicate.status_code == 400 and duplicate.json()["error"]["code"] == "invalid"
    bad_secrets = as_alice.call(
        "POST",
        UPSTREAMS,
        {"name": "other", "url": "https://mcp.example.com/mcp", "secrets": {"Bad Header": "x"}},
    )
    assert bad_secrets.status_code == 400 and "secrets" in bad_secrets.json()["error"]["fields"]
    bad_connection = as_alice.call(
        "POST", UPSTREAMS, {"name": "other", "url": "https://mcp.example.com/mcp", "connection": "Git Hub"}
    )
    assert bad_connection.status_code == 400
    assert "Name one of this tenant's providers." in bad_connection.json()["error"]["fields"]["connection"]
    assert Upstream.objects.filter(tenant=tenant_a).count() == 1
    acting = as_alice.call(
        "POST", UPSTREAMS, {"name": "as-you", "url": "https://mcp.example.com/mcp", "connection": "github"}
    )
    assert acting.status_code == 201 and acting.json()["connection"] == "github"


def test_test_connection_shows_what_the_upstream_offers_without_publishing(
    as_alice, tenant_a, upstream_a
) -> None:
    response = as_alice.call("POST", f"{UPSTREAMS}{upstream_a.pk}/test/")
    assert response.status_code == 200, response.json()
    offering = response.json()
    assert offering["server_info"]["name"] == "upstream"
    assert {"echo", "add", "slow_count"} <= {tool["name"] for tool in offering["tools"]}
    assert offering["protocol_version"]
    assert not Tool.objects.filter(tenant=tenant_a).exists()
    assert (
        as_alice.call("GET", f"{UPSTREAMS}{upstream_a.pk}/").json()["last_server_info"]["name"] == "upstream"
    )


def test_an_upstream_refusing_its_credentials_answers_502_with_the_reason(as_alice, upstream_a) -> None:
    as_alice.call("PATCH", f"{UPSTREAMS}{upstream_a.pk}/", {"secrets": {"Authorization": "Bearer wrong"}})
    for action in ("test", "sync"):
        response = as_alice.call("POST", f"{UPSTREAMS}{upstream_a.pk}/{action}/")
        assert response.status_code == 502
        error = response.json()["error"]
        assert error["code"] == UNREACHABLE and error["message"]
        assert "wrong" not in response.content.decode()
    upstream_a.refresh_from_db()
    assert upstream_a.last_error


def test_publish_with_a_name_an_approval_and_fixed_arguments_then_unpublish(
    as_alice, tenant_a, upstream_a
) -> None:
    ids = synced(as_alice, upstream_a)
    assert {"echo", "add", "slow_count"} <= set(ids)
    body = {"name": "count", "approval": Approval.EVERY_TIME, "fixed": {"delay": 0.01}}
    published = as_alice.call("POST", f"{REMOTE}{ids['slow_count']}/publish/", body)
    assert published.status_code == 201, published.json()
    assert published.json()["published"] and published.json()["tool_name"] == "count"
    tool = Tool.objects.get(tenant=tenant_a, name="count")
    assert tool.approval == Approval.EVERY_TIME and tool.handler_config["fixed"] == {"delay": 0.01}
    assert "delay" not in tool.input_schema["properties"]
    again = as_alice.call("POST", f"{REMOTE}{ids['slow_count']}/publish/", body)
    assert again.status_code == 409 and again.json()["error"]["code"] == REFUSED
    by_default = as_alice.call("POST", f"{REMOTE}{ids['echo']}/publish/", {})
    assert by_default.status_code == 201 and by_default.json()["tool_name"] == "docs_echo"
    clash = as_alice.call("POST", f"{REMOTE}{ids['add']}/publish/", {"name": "count"})
    assert clash.status_code == 409 and "count" in clash.json()["error"]["message"]
    bad = as_alice.call(
        "POST", f"{REMOTE}{ids['add']}/publish/", {"fixed": ["a"], "approval": "sometimes", "name": "a b"}
    )
    assert bad.status_code == 400 and {"fixed", "approval", "name"} <= set(bad.json()["error"]["fields"])
    unpublished = as_alice.call("POST", f"{REMOTE}{ids['slow_count']}/unpublish/")
    assert unpublished.status_code == 200 and not unpublished.json()["published"]
    assert not Tool.objects.filter(tenant=tenant_a, name="count").exists()


def test_a_changed_remote_definition_waits_as_a_diff_until_accepted(
    as_alice, tenant_a, upstream_a, remote
) -> None:
    ids = synced(as_alice, upstream_a)
    as_alice.call("POST", f"{REMOTE}{ids['echo']}/publish/", {})
    assert as_alice.call("GET", f"{REMOTE}{ids['echo']}/diff/").json() == []
    redescribe(remote, "echo", "Echo, but louder.", bearer=BEARER)
    report = as_alice.call("POST", f"{UPSTREAMS}{upstream_a.pk}/sync/").json()
    assert report["changed"] == ["echo"]
    tool = Tool.objects.get(tenant=tenant_a, name="docs_echo")
    assert tool.description != "Echo, but louder."
    assert as_alice.call("GET", f"{REMOTE}{ids['echo']}/").json()["pending_review"]
    diff = as_alice.call("GET", f"{REMOTE}{ids['echo']}/diff/").json()
    assert [field["name"] for field in diff] == ["description"]
    assert diff[0]["offered"] == "Echo, but louder." and ["+", "Echo, but louder."] in diff[0]["lines"]
    accepted = as_alice.call("POST", f"{REMOTE}{ids['echo']}/accept/")
    assert accepted.status_code == 200 and not accepted.json()["pending_review"]
    tool.refresh_from_db()
    assert tool.description == "Echo, but louder."
    not_published = as_alice.call("POST", f"{REMOTE}{ids['add']}/accept/")
    assert not_published.status_code == 409 and not_published.json()["error"]["code"] == REFUSED


def test_a_viewer_reads_upstreams_but_changes_nothing(as_alice, as_bob, tenant_a, upstream_a) -> None:
    ids = synced(as_alice, upstream_a)
    assert as_bob.call("GET", UPSTREAMS).status_code == 200
    assert as_bob.call("GET", f"{REMOTE}{ids['echo']}/diff/").status_code == 200
    refused = [
        as_bob.call("POST", UPSTREAMS, {"name": "other", "url": "https://mcp.example.com/mcp"}),
        as_bob.call("PATCH", f"{UPSTREAMS}{upstream_a.pk}/", {"enabled": False}),
        as_bob.call("DELETE", f"{UPSTREAMS}{upstream_a.pk}/"),
        as_bob.call("POST", f"{UPSTREAMS}{upstream_a.pk}/test/"),
        as_bob.call("POST", f"{UPSTREAMS}{upstream_a.pk}/sync/"),
        as_bob.call("POST", f"{REMOTE}{ids['echo']}/publish/", {}),
        as_bob.call("POST", f"{REMOTE}{ids['echo']}/accept/"),
    ]
    assert [r.status_code for r in refused] == [403] * len(refused)
    assert all("viewer" in r.json()["error"]["message"] for r in refused)
    assert not Tool.objects.filter(tenant=tenant_a).exists() and Upstream.objects.get().enabled


def test_another_tenants_upstream_answers_exactly_like_a_missing_one(
    as_alice, as_charlie, upstream_a
) -> None:
    ids = synced(as_alice, upstream_a)
    missing = max(Upstream.objects.values_list("pk", flat=True)) + 1
    missing_tool = max(UpstreamTool.objects.values_list("pk", flat=True)) + 1
    charlies = f"{API}/tenant-b"
    pairs = [
        (f"{charlies}/upstreams/{upstream_a.pk}/", f"{charlies}/upstreams/{missing}/"),
        (f"{charlies}/upstreams/{upstream_a.pk}/test/", f"{charlies}/upstreams/{missing}/test/"),
        (
            f"{charlies}/remote-tools/{ids['echo']}/publish/",
            f"{charlies}/remote-tools/{missing_tool}/publish/",
        ),
        (f"{charlies}/remote-tools/{ids['echo']}/diff/", f"{charlies}/remote-tools/{missing_tool}/diff/"),
    ]
    for theirs, nothing in pairs:
        method = "GET" if theirs.endswith(("diff/", f"{upstream_a.pk}/")) else "POST"
        hidden, absent = as_charlie.call(method, theirs, {}), as_charlie.call(method, nothing, {})
        assert hidden.status_code == absent.status_code == 404
        assert hidden.json() == absent.json() == {"error": {"code": "not_found", "message": NOT_FOUND}}
    assert as_charlie.call("GET", f"{charlies}/upstreams/").json()["results"] == []
    assert as_charlie.call("GET", f"{charlies}/remote-tools/").json()["results"] == []
    assert not Tool.objects.exists()


def test_an_http_sse_upstream_is_created_tested_and_a_made_up_transport_refused(
    as_alice, tenant_a, tmp_path
) -> None:
    with running_upstream(tmp_path, sse=True) as sse:
        created = as_alice.call("POST", UPSTREAMS, {"name": "old", "url": sse.url, "transport": "sse"})
        assert created.status_code == 201, created.json()
        assert created.json()["transport"] == "sse"
        tested = as_alice.call("POST", f"{UPSTREAMS}{created.json()['id']}/test/")
    assert tested.status_code == 200, tested.json()
    assert "echo" in {tool["name"] for tool in tested.json()["tools"]}
    refused = as_alice.call("POST", UPSTREAMS, {"name": "odd", "url": sse.url, "transport": "websocket"})
    assert refused.status_code == 400 and "transport" in refused.json()["error"]["fields"]


def test_a_tenant_at_its_upstream_cap_is_told_so_and_gets_no_more(as_alice, tenant_a, settings) -> None:
    # Each upstream has a message budget and a breaker of its own (AMB-188): their number is bounded.
    settings.MCP_UPSTREAMS_PER_TENANT = 2
    for name in ("one", "two"):
        made = as_alice.call("POST", UPSTREAMS, {"name": name, "url": f"https://{name}.example.com/mcp"})
        assert made.status_code == 201, made.json()
    refused = as_alice.call("POST", UPSTREAMS, {"name": "three", "url": "https://three.example.com/mcp"})
    assert refused.status_code == 400
    assert refused.json()["error"] == {
        "code": "invalid",
        "message": "A tenant may have at most 2 upstream servers (MCP_UPSTREAMS_PER_TENANT); remove one first.",
    }
    first = Upstream.objects.get(tenant=tenant_a, name="one")
    edited = as_alice.call("PATCH", f"{UPSTREAMS}{first.pk}/", {"timeout_seconds": 9})
    assert edited.status_code == 200, edited.json()  # an upstream it has can still be changed
    assert Upstream.objects.filter(tenant=tenant_a).count() == 2


def test_oauth_client_credentials_are_write_only_and_found_missing_metadata_is_said(
    as_alice, tenant_a, remote
) -> None:
    """AMB-198: the client secret is stored encrypted and never returned; an upstream with no protected
    resource metadata (the SDK's server publishes none) cannot be given a token, and Test connection says
    why instead of calling it without one."""
    body = {
        "name": "docs",
        "url": remote.url,
        "oauth_client_id": "front",
        "oauth_client_secret": "s3cret-of-front",
    }
    created = as_alice.call("POST", UPSTREAMS, body)
    assert created.status_code == 201, created.json()
    assert "s3cret-of-front" not in created.content.decode()
    assert created.json()["oauth_client_secret_set"] is True and created.json()["oauth_client_id"] == "front"
    row = Upstream.objects.get(tenant=tenant_a)
    assert decrypt_secrets(row.oauth_client_secret) == {"client_secret": "s3cret-of-front"}
    tested = as_alice.call("POST", f"{UPSTREAMS}{row.pk}/test/")
    assert tested.status_code == 502 and tested.json()["error"]["code"] == UNREACHABLE, tested.json()
    assert (
        "no OAuth token: its protected resource metadata (RFC 9728) was not found"
        in tested.json()["error"]["message"]
    )
    assert remote.stats()["federated"] == {}  # no MCP request went without a token
    # What a read returns can be sent back: the stored secret is kept.
    fetched = as_alice.call("GET", f"{UPSTREAMS}{row.pk}/").json()
    assert as_alice.call("PUT", f"{UPSTREAMS}{row.pk}/", fetched).status_code == 200
    row.refresh_from_db()
    assert row.oauth_client_secret
    # No client, no secret kept.
    cleared = as_alice.call("PATCH", f"{UPSTREAMS}{row.pk}/", {"oauth_client_id": ""})
    assert cleared.json()["oauth_client_secret_set"] is False
