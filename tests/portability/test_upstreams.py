"""Upstream servers in the tenant document: exported with their secrets by name, imported (idempotently),
and the published tools the document brings adopted by the first sync against the real upstream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Approval, Tool, Upstream, UpstreamTool
from mcp_app.portability.document import FORMAT, VERSION, DocumentError, dumps, export_tenant, loads
from mcp_app.portability.importer import import_document
from mcp_app.upstreams import service
from tenants import wall
from tenants.models import Tenant
from tests.upstreams.running import make_upstream, redescribe, running_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = pytest.mark.django_db(transaction=True)
BEARER = "document-upstream-bearer-90ab"
HEADER = {"format": FORMAT, "version": VERSION}


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


@pytest.fixture
def remote(tmp_path) -> Iterator[UpstreamServer]:
    with running_upstream(tmp_path, bearer=BEARER) as server:
        yield server


@pytest.fixture
def federating(tenant_a, remote) -> Tenant:
    upstream = make_upstream(tenant_a, remote.url, mode="legacy", publish_new=False)
    upstream.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    upstream.save()
    with wall.tenant(tenant_a.id):
        service.sync(upstream)
        rows = {r.remote_name: r for r in UpstreamTool.objects.filter(upstream=upstream)}
        service.publish(rows["echo"], description="Our echo.", approval=Approval.ONCE)
        service.publish(rows["slow_count"], fixed={"delay": 0.01}, defaults={"n": 2})
    return Tenant.objects.get(pk=tenant_a.pk)  # choices as stored values, as the document writes them


def test_an_upstream_is_exported_with_its_secrets_by_name_and_its_tools_as_tool_entries(federating) -> None:
    text = dumps(export_tenant(federating), "yaml")
    assert BEARER not in text
    document = loads(text)
    [entry] = document["upstreams"]
    assert {k: v for k, v in entry.items() if k != "pinned"} == {
        "name": "docs", "url": Upstream.objects.get().url, "prefix": "docs_", "mode": "legacy",
        "secrets": ["Authorization"],
    }  # fmt: skip
    assert set(entry["pinned"]) == {"echo", "slow_count"}
    assert entry["pinned"]["echo"]["description"] == "Echo the message back."  # the remote's, not ours
    tools = {t["name"]: t for t in document["tools"]}
    assert tools["docs_echo"]["handler_config"] == {"upstream": "docs", "tool": "echo", "fixed": {}}
    assert tools["docs_echo"]["description"] == "Our echo." and tools["docs_echo"]["approval"] == "once"


def test_importing_sets_the_upstream_up_names_its_missing_secret_and_a_second_import_changes_nothing(
    federating,
) -> None:
    document = loads(dumps(export_tenant(federating), "json"))
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    plan = import_document(copy, document)
    assert plan.missing_upstream_secrets == [("docs", "Authorization")]
    assert "! upstream docs needs the secret 'Authorization', which it does not have" in plan.lines()
    assert Upstream.objects.get(tenant=copy).prefix == "docs_"
    assert set(Tool.objects.filter(tenant=copy).values_list("name", flat=True)) == {
        "docs_echo",
        "docs_slow_count",
    }
    again = import_document(copy, document)
    assert not again.has_changes


def test_the_first_sync_after_an_import_keeps_the_documents_pins_and_holds_a_later_change(
    federating, remote
) -> None:
    document = loads(dumps(export_tenant(federating), "json"))
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    import_document(copy, document)
    upstream = Upstream.objects.get(tenant=copy)
    upstream.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    upstream.save()
    with wall.tenant(copy.id):
        service.sync(upstream)
        rows = {
            r.remote_name: r for r in UpstreamTool.objects.filter(upstream=upstream).select_related("tool")
        }
        assert rows["echo"].tool.name == "docs_echo" and rows["slow_count"].tool.name == "docs_slow_count"
        assert not rows["add"].published
        assert not rows["echo"].pending_review and not rows["slow_count"].pending_review
        redescribe(remote, "echo", "Changed upstream.", BEARER)
        service.sync(upstream)
        echo = UpstreamTool.objects.get(upstream=upstream, remote_name="echo")
        assert echo.pending_review and echo.tool.description == "Our echo."
        assert Tool.objects.filter(tenant=copy).count() == 2  # the sync published nothing more


def test_without_pins_the_first_sync_adopts_the_documents_tools_and_holds_what_differs_for_review(
    federating, remote
) -> None:
    document = loads(dumps(export_tenant(federating), "json"))
    del document["upstreams"][0]["pinned"]  # a hand-written document
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    import_document(copy, document)
    upstream = Upstream.objects.get(tenant=copy)
    upstream.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    upstream.save()
    with wall.tenant(copy.id):
        report = service.sync(upstream)
        rows = {
            r.remote_name: r for r in UpstreamTool.objects.filter(upstream=upstream).select_related("tool")
        }
    assert sorted(report.published) == ["echo", "slow_count"]
    assert not rows["slow_count"].pending_review  # its fields are what the upstream offers
    assert rows["echo"].pending_review and rows["echo"].tool.description == "Our echo."


def test_an_http_sse_upstream_keeps_its_transport_through_export_and_import(tenant_a) -> None:
    make_upstream(tenant_a, "https://old.example.com/sse", transport="sse")
    text = dumps(export_tenant(Tenant.objects.get(pk=tenant_a.pk)), "yaml")
    [entry] = loads(text)["upstreams"]
    assert entry["transport"] == "sse"
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    import_document(copy, loads(text))
    assert Upstream.objects.get(tenant=copy).transport == "sse"
    entry["transport"] = "websocket"
    with pytest.raises(DocumentError) as caught:
        import_document(copy, {**loads(text), "upstreams": [entry]})
    assert "transport" in str(caught.value.problems)


def test_a_document_that_would_pass_the_upstream_cap_is_refused_whole(tenant_a, settings) -> None:
    settings.MCP_UPSTREAMS_PER_TENANT = 2
    make_upstream(tenant_a, "https://kept.example.com/mcp", name="kept", prefix="kept_")
    entries = [{"name": n, "url": f"https://{n}.example.com/mcp", "prefix": f"{n}_"} for n in ("a", "b")]
    with pytest.raises(DocumentError) as caught:
        import_document(tenant_a, {**HEADER, "upstreams": entries})
    assert caught.value.problems == [
        (
            "upstreams",
            "A tenant may have at most 2 upstream servers (MCP_UPSTREAMS_PER_TENANT); remove one first. "
            "This document would give it 3.",
        )
    ]
    assert Upstream.objects.filter(tenant=tenant_a).count() == 1
    import_document(tenant_a, {**HEADER, "upstreams": entries[:1]})  # within the cap
    assert Upstream.objects.filter(tenant=tenant_a).count() == 2


def test_the_prompt_and_resource_switches_travel_and_the_first_sync_after_an_import_pins(federating) -> None:
    upstream = Upstream.objects.get(tenant=federating)
    upstream.publish_prompts = True
    upstream.save()
    document = loads(dumps(export_tenant(federating), "json"))
    [entry] = document["upstreams"]
    assert entry["publish_prompts"] is True and "publish_resources" not in entry  # off: the default
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    import_document(copy, document)
    imported = Upstream.objects.get(tenant=copy)
    assert imported.publish_prompts and not imported.publish_resources and imported.pinned_extras == {}
    imported.secret_headers = encrypt_secrets({"Authorization": f"Bearer {BEARER}"})
    imported.save()
    with wall.tenant(copy.id):
        service.sync(imported)
    assert [p["name"] for p in Upstream.objects.get(pk=imported.pk).pinned_extras["prompts"]] == ["greet"]


def test_oauth_client_credentials_travel_by_id_and_the_import_names_the_missing_secret(tenant_a) -> None:
    upstream = make_upstream(tenant_a, "https://mcp.example.com/mcp")
    upstream.oauth_client_id, upstream.oauth_scope = "front", "mcp:tools"
    upstream.oauth_client_secret = encrypt_secrets({"client_secret": "s3cret-of-front"})
    upstream.save()
    text = dumps(export_tenant(Tenant.objects.get(pk=tenant_a.pk)), "json")
    assert "s3cret-of-front" not in text
    document = loads(text)
    [entry] = document["upstreams"]
    assert entry["oauth_client_id"] == "front" and entry["oauth_scope"] == "mcp:tools"
    assert "oauth_client_secret" not in entry and "oauth_token_url" not in entry
    copy = Tenant.objects.create(slug="copy", name="Copy", auth_mode="public")
    plan = import_document(copy, document)
    assert plan.missing_upstream_secrets == [("docs", "OAuth client secret")]
    assert Upstream.objects.get(tenant=copy).oauth_client_id == "front"
