"""The admin home (AMB-270) and the infrastructure models kept for superusers (AMB-271)."""

from __future__ import annotations

import time

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse
from django.utils import timezone

from mcp_app.admin import home
from mcp_app.drafts import service as drafts
from mcp_app.models import McpSession, Tool, Upstream, UsageBucket
from mcp_app.oauth.resources import canonical_uri

pytestmark = pytest.mark.django_db

INFRASTRUCTURE_PAGES = (
    "axes_accessattempt",
    "axes_accessfailurelog",
    "axes_accesslog",
    "oauth2_provider_accesstoken",
    "oauth2_provider_grant",
    "oauth2_provider_idtoken",
    "oauth2_provider_refreshtoken",
    "oauth2_provider_application",
    "mcp_app_mcpsession",
)
OWNER_PAGES = (
    "mcp_app_tool",
    "mcp_app_prompt",
    "mcp_app_resource",
    "mcp_app_resourcetemplate",
    "mcp_app_upstream",
    "mcp_app_toolrun",
    "mcp_app_approvaldecision",
    "audit_auditevent",
    "tenants_membership",
    "tenants_apikey",
    "tenants_serviceclient",
    "mcp_app_provider",
)


def test_an_owner_lands_on_her_tenant_with_its_url_counts_usage_and_links(client, alice, tenant_a, tenant_b):
    Tool.objects.create(tenant=tenant_a, name="a_tool", handler="template", handler_config={"text": "a"})
    Tool.objects.create(tenant=tenant_b, name="b_tool", handler="template", handler_config={"text": "b"})
    minute = int(time.time() // 60)
    UsageBucket.objects.create(
        tenant=tenant_a, minute=minute, method="tools/call", tool="a_tool", calls=7, errors=2
    )
    UsageBucket.objects.create(tenant=tenant_b, minute=minute, method="tools/call", tool="b_tool", calls=99)
    client.force_login(alice)
    page = client.get(reverse("admin:index"))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Your MCP servers" in text and canonical_uri("tenant-a") in text
    assert 'data-copy="mcp-url-' in text and "connect/copy.js" in text
    assert "tenant-b" not in text and canonical_uri("tenant-b") not in text
    assert ">1 tool</a>" in text
    assert "7 calls" in text and "2 errors" in text and "99 calls" not in text
    for link in (
        reverse("tenant-connect", kwargs={"slug": "tenant-a"}),
        reverse("tenant-dashboard", kwargs={"slug": "tenant-a"}),
        reverse("admin-portability:export", args=[tenant_a.pk]),
        reverse("admin-portability:import", args=[tenant_a.pk]),
        reverse("api-tokens"),
        f"{reverse('admin:mcp_app_tool_changelist')}?tenant__id__exact={tenant_a.pk}",
    ):
        assert f'href="{link}"' in text, link


def test_a_viewer_gets_no_export_or_import_link(client, bob, tenant_a):
    client.force_login(bob)
    text = client.get(reverse("admin:index")).content.decode()
    assert canonical_uri("tenant-a") in text
    assert reverse("admin-portability:export", args=[tenant_a.pk]) not in text


def test_upstream_health_is_told_in_words(client, alice, tenant_a):
    Upstream.objects.create(tenant=tenant_a, name="docs", url="https://docs.example.com/mcp", prefix="docs_")
    Upstream.objects.create(
        tenant=tenant_a, name="old", url="https://old.example.com/mcp", prefix="old_", enabled=False
    )
    client.force_login(alice)
    homes, more = home.tenant_homes(client.get(reverse("admin:index")).wsgi_request)
    assert more == 0
    states = {u.name: (u.state, u.words) for u in homes[0].upstreams}
    assert states == {"docs": ("idle", "no calls in the last hour"), "old": ("disabled", "disabled")}


def test_draft_counts_count_pending_drafts_and_never_published_rows(tenant_a, alice):
    tool = Tool.objects.create(tenant=tenant_a, name="a_tool", handler="template", handler_config={"text": "a"})
    assert home.draft_counts(tenant_a) == {"tools": 0, "prompts": 0, "resources": 0, "templates": 0}
    tool.description = "drafted"
    drafts.stage(tool, alice)
    drafts.stage(Tool(tenant=tenant_a, name="new_one", handler="template", handler_config={"text": "n"}), alice)
    assert home.draft_counts(tenant_a) == {"tools": 2, "prompts": 0, "resources": 0, "templates": 0}


def test_a_superuser_sees_every_tenant_and_the_full_app_list(client, admin_user, tenant_a, tenant_b):
    client.force_login(admin_user)
    text = client.get(reverse("admin:index")).content.decode()
    assert canonical_uri("tenant-a") in text and canonical_uri("tenant-b") in text
    assert "Everything in the admin" in text
    for model in INFRASTRUCTURE_PAGES:
        assert reverse(f"admin:{model}_changelist") in text, model


@pytest.mark.parametrize("model", INFRASTRUCTURE_PAGES)
def test_an_owner_cannot_open_infrastructure_models_and_a_superuser_can(client, alice, admin_user, model):
    url = reverse(f"admin:{model}_changelist")
    client.force_login(alice)
    assert client.get(url).status_code in (403, 404)
    assert url not in client.get(reverse("admin:index")).content.decode()
    client.force_login(admin_user)
    assert client.get(url).status_code == 200


def test_django_permissions_do_not_open_infrastructure_to_a_non_superuser(client, alice, tenant_a):
    alice.user_permissions.add(
        *Permission.objects.filter(content_type__app_label__in=("axes", "oauth2_provider"))
    )
    McpSession.objects.create(id="sess-a", tenant=tenant_a, last_seen_at=timezone.now())
    client.force_login(alice)
    for model in INFRASTRUCTURE_PAGES:
        assert client.get(reverse(f"admin:{model}_changelist")).status_code == 403, model


@pytest.mark.parametrize("model", OWNER_PAGES)
def test_an_owner_keeps_what_she_needs(client, alice, model):
    client.force_login(alice)
    assert client.get(reverse(f"admin:{model}_changelist")).status_code == 200
