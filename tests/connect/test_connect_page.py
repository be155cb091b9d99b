"""The connect page per role, its client configurations, and its lists against the real endpoint."""

from __future__ import annotations

import ast
import importlib
import json

import pytest
from asgiref.sync import async_to_sync
from django.urls import reverse

from mcp_app.models import Prompt, Resource, Tool
from tenants.models import AuthMode, Tenant
from tests.transport.support import BOTH, Client, call

# Rendering the page runs the dispatcher through async_to_sync, whose database_sync_to_async closes the
# thread's connection (as in the admin's Try page tests): each test commits for real.
pytestmark = pytest.mark.django_db(transaction=True)

URL = "https://mcp.example.com/t/tenant-a/mcp"
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientCapabilities": {},
}


@pytest.fixture(autouse=True)
def _public_host(settings) -> None:
    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "mcp.example.com"]


def page(client, slug: str = "tenant-a"):
    return client.get(reverse("tenant-connect", args=[slug]), HTTP_HOST="mcp.example.com", secure=True)


@pytest.fixture
def served_a(tenant_a) -> None:
    """Tenant A serves a tool for every era, a 2026-07-28-only tool, a disabled one, a prompt, a resource."""
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config={"text": "hi"})
    Tool.objects.create(
        tenant=tenant_a,
        name="modern_only",
        handler="template",
        handler_config={"text": "[]"},
        output_schema={"type": "array"},
    )
    Tool.objects.create(tenant=tenant_a, name="off", handler="template", handler_config={}, enabled=False)
    Prompt.objects.create(
        tenant=tenant_a, name="review", messages=[{"role": "user", "content": {"type": "text", "text": "Hi"}}]
    )
    Resource.objects.create(tenant=tenant_a, uri="a://readme", name="readme", text="hello")


SIGN_IN = "/oauth/login?next=/t/{slug}/connect"


def test_an_anonymous_visitor_sees_a_public_tenants_page_as_an_anonymous_client_does(client, served_a):
    response = page(client)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<pre class="url" id="mcp-url" tabindex="0">{URL}</pre>' in html
    assert "<strong>Public.</strong>" in html and "your role" not in html
    assert response.context["role"] is None
    eras = {era.label: era for era in response.context["eras"]}
    assert eras["legacy"].listings[0].names == ["greet"]
    assert eras["modern"].listings[0].names == ["greet", "modern_only"]


def private(tenant: Tenant, how: str) -> None:
    changes = {"oauth": {"auth_mode": AuthMode.OAUTH}, "inactive": {"is_active": False}}[how]
    Tenant.objects.filter(pk=tenant.pk).update(**changes)


@pytest.mark.parametrize("how", ["oauth", "inactive"])
def test_an_anonymous_visitor_of_a_private_tenant_is_answered_as_for_a_missing_one(client, tenant_a, how):
    private(tenant_a, how)
    answers = {slug: page(client, slug) for slug in ("tenant-a", "no-such-tenant")}
    for slug, response in answers.items():
        # The site's own sign-in page (not the admin's), then back to the page.
        assert response.status_code == 302 and response.url == SIGN_IN.format(slug=slug)
    shown = [sorted((k, v.replace("tenant-a", "X").replace("no-such-tenant", "X")) for k, v in r.items()) for r in answers.values()]
    assert shown[0] == shown[1] and answers["tenant-a"].content == answers["no-such-tenant"].content


@pytest.mark.parametrize("how", ["oauth", "inactive"])
def test_a_member_signs_in_and_comes_back_to_a_private_tenants_page(client, alice, tenant_a, how):
    private(tenant_a, how)
    sign_in = page(client).url
    assert sign_in == SIGN_IN.format(slug="tenant-a")
    answer = client.post(sign_in, {"username": "alice", "password": "alice-pw-123", "next": "/t/tenant-a/connect"})
    assert answer.status_code == 302 and answer["Location"] == "/t/tenant-a/connect"
    assert page(client).status_code == 200


def test_a_signed_in_stranger_sees_a_public_tenant_and_nothing_of_a_private_one(client, charlie, tenant_a):
    client.force_login(charlie)
    response = page(client)
    assert response.status_code == 200 and response.context["role"] is None
    # charlie is staff, but tenant A's admin page is not his: no link to it.
    assert reverse("admin:tenants_tenant_change", args=[tenant_a.pk]) not in response.content.decode()
    for how in ("oauth", "inactive"):
        Tenant.objects.filter(pk=tenant_a.pk).update(auth_mode=AuthMode.PUBLIC, is_active=True)
        private(tenant_a, how)
        assert page(client).status_code == 404
        assert page(client).content == page(client, "no-such-tenant").content


@pytest.mark.parametrize("persona", ["alice", "bob"])
def test_members_of_any_role_see_the_connect_page(client, request, served_a, persona):
    client.force_login(request.getfixturevalue(persona))
    response = page(client)
    assert response.status_code == 200
    html = response.content.decode()
    assert f'<pre class="url" id="mcp-url" tabindex="0">{URL}</pre>' in html
    assert 'data-copy="mcp-url"' in html and "/static/connect/copy.js" in html


def test_charlie_gets_the_404_of_a_missing_tenant(client, charlie, tenant_a):
    Tenant.objects.filter(pk=tenant_a.pk).update(auth_mode=AuthMode.OAUTH)
    client.force_login(charlie)
    assert page(client).status_code == 404
    assert page(client, "no-such-tenant").status_code == 404
    assert page(client, "tenant-b").status_code == 200


def test_a_superuser_sees_every_tenants_page(client, django_user_model, tenant_a):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw-123")
    client.force_login(root)
    assert page(client).status_code == 200


def test_the_tenants_admin_page_links_to_its_connect_page(client, alice, tenant_a):
    client.force_login(alice)
    html = client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).content.decode()
    assert f'href="{reverse("tenant-connect", args=["tenant-a"])}"' in html


def test_every_client_configuration_names_the_absolute_url_from_the_request(client, alice, tenant_a):
    client.force_login(alice)
    configs = {c.key: c for c in page(client).context["configs"]}
    assert set(configs) == {
        "claude-code",
        "claude-desktop",
        "claude-desktop-bridge",
        "vscode",
        "cursor",
        "inspector",
        "inspector-cli",
        "python",
    }
    assert configs["claude-code"].text == f"claude mcp add --transport http tenant-a {URL}"
    assert configs["claude-desktop"].text == URL
    assert json.loads(configs["vscode"].text) == {"servers": {"tenant-a": {"type": "http", "url": URL}}}
    assert json.loads(configs["cursor"].text) == {"mcpServers": {"tenant-a": {"url": URL}}}
    bridge = json.loads(configs["claude-desktop-bridge"].text)
    assert bridge == {"mcpServers": {"tenant-a": {"command": "npx", "args": ["-y", "mcp-remote", URL]}}}
    assert configs["inspector-cli"].text == (
        f"npx @modelcontextprotocol/inspector --cli {URL} --transport http --method tools/list"
    )
    assert f'URL = "{URL}"' in configs["python"].text


def sdk_names_of(script: str) -> list[str]:
    """Import every name the script imports from the SDK (and httpx2): fails if one does not exist."""
    found = []
    for node in ast.walk(ast.parse(script)):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.module.split(".")[0] in {"mcp", "httpx2"}
        ):
            module = importlib.import_module(node.module)
            for alias in node.names:
                found.append(f"{node.module}.{alias.name}")
                getattr(module, alias.name)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                importlib.import_module(alias.name)
    return found


def test_a_tenant_with_its_own_identity_provider_says_where_to_sign_in(client, alice, tenant_a):
    identity = {"issuer": "https://idp.example.com", "jwks_uri": "https://idp.example.com/jwks", "audience": "api://mcp"}
    Tenant.objects.filter(pk=tenant_a.pk).update(auth_mode=AuthMode.OAUTH, identity=identity)
    client.force_login(alice)
    response = page(client)
    said = response.content.decode()
    assert "<strong>OAuth, your identity provider.</strong>" in said and "<code>https://idp.example.com</code>" in said
    assert "press <em>Allow</em>" not in said
    assert all("here and press Allow" not in c.text for c in response.context["configs"])
    assert any("sign in at your identity provider (https://idp.example.com)" in c.note for c in response.context["configs"])


@pytest.mark.parametrize("mode", [AuthMode.PUBLIC, AuthMode.OAUTH])
def test_the_auth_mode_is_explained_and_the_python_script_uses_the_installed_sdk(
    client, alice, tenant_a, mode
):
    Tenant.objects.filter(pk=tenant_a.pk).update(auth_mode=mode)
    client.force_login(alice)
    response = page(client)
    said = response.content.decode()
    script = next(c for c in response.context["configs"] if c.key == "python").text
    names = sdk_names_of(script)
    if mode == AuthMode.OAUTH:
        assert "<strong>OAuth.</strong>" in said and "press <em>Allow</em>" in said
        assert "mcp.client.auth.OAuthClientProvider" in names
        assert "mcp.client.streamable_http.streamable_http_client" in names
        headless = next(c for c in response.context["configs"] if c.key == "api-key")
        assert "manage.py mcp_key tenant-a" in headless.where and f'URL = "{URL}"' in headless.text
        assert sdk_names_of(headless.text) == [
            "mcp.Client", "mcp.client.streamable_http.streamable_http_client"
        ]  # fmt: skip
    else:
        assert "<strong>Public.</strong>" in said
        assert names == ["mcp.Client"]
        assert "api-key" not in {c.key for c in response.context["configs"]}


def test_an_inactive_tenant_says_its_endpoint_serves_nothing(client, alice, tenant_a):
    Tenant.objects.filter(pk=tenant_a.pk).update(is_active=False)
    client.force_login(alice)
    response = page(client)
    assert response.context["eras"] is None
    assert "This tenant is inactive" in response.content.decode()


async def legacy_lists(methods: list[str]) -> dict[str, dict]:
    mcp = Client("tenant-a")
    await mcp.initialize(version="2025-11-25")
    return {m: (await mcp.request(m)).json()["result"] for m in methods}


async def modern_lists(methods: list[str]) -> dict[str, dict]:
    results = {}
    for method in methods:
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"_meta": MODERN_META}})
        headers = {
            "accept": BOTH,
            "content-type": "application/json",
            "mcp-protocol-version": "2026-07-28",
            "mcp-method": method,
        }
        response = await call("POST", "/t/tenant-a/mcp", body.encode(), headers)
        assert response.status == 200, response.body
        results[method] = response.json()["result"]
    return results


def test_the_lists_are_exactly_what_the_endpoint_answers_in_both_eras(client, alice, served_a):
    client.force_login(alice)
    eras = {era.label: era for era in page(client).context["eras"]}
    methods = [listing.method for listing in eras["legacy"].listings]
    assert methods == ["tools/list", "prompts/list", "resources/list", "resources/templates/list"]
    endpoint = {
        "legacy": async_to_sync(legacy_lists)(methods),
        "modern": async_to_sync(modern_lists)(methods),
    }
    for label, era in eras.items():
        for listing in era.listings:
            assert listing.pages == [endpoint[label][listing.method]], (label, listing.method)
    tools = {label: [listing.names for listing in era.listings][0] for label, era in eras.items()}
    assert tools == {"legacy": ["greet"], "modern": ["greet", "modern_only"]}
    assert eras["modern"].listings[0].pages[0]["resultType"] == "complete"


def test_every_page_of_a_long_list_is_followed(client, alice, tenant_a, settings):
    settings.MCP_PAGE_SIZE = 2
    for i in range(5):
        Tool.objects.create(tenant=tenant_a, name=f"t{i}", handler="template", handler_config={"text": "x"})
    client.force_login(alice)
    eras = page(client).context["eras"]
    for era in eras:
        tools = era.listings[0]
        assert len(tools.pages) == 3 and tools.names == ["t0", "t1", "t2", "t3", "t4"]
        assert "nextCursor" not in tools.pages[-1]
