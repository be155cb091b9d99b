"""`/`, the platform's front page (AMB-72): sign in, your tenants and their pages, the admin for staff."""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.urls import reverse

from mcp_app.oauth.resources import canonical_uri
from mcpsite import views
from tenants.models import AuthMode, Tenant

pytestmark = pytest.mark.django_db


def test_an_anonymous_visitor_is_offered_the_sign_in_and_no_tenant(client, tenant_a):
    page = client.get("/")
    assert page.status_code == 200
    text = page.content.decode()
    assert 'href="/oauth/login?next=%2F"' in text and ">Sign in<" in text
    assert tenant_a.slug not in text and "Open the admin" not in text


def test_an_anonymous_visitor_learns_what_the_platform_is_and_is_offered_the_public_demo(client, tenant_a):
    Tenant.objects.create(slug="demo", name="Demo", title="The demo server", auth_mode=AuthMode.PUBLIC)
    text = client.get("/").content.decode()
    assert "This site hosts MCP servers." in text and "Try the demo" in text
    assert 'href="/t/demo/connect"' in text and canonical_uri("demo") in text and "The demo server" in text
    assert 'href="/oauth/login?next=%2F"' in text and tenant_a.slug not in text


@pytest.mark.parametrize("demo", ["missing", "oauth", "inactive"])
def test_without_a_public_demo_the_front_page_says_how_to_connect_and_names_no_tenant(client, demo):
    if demo != "missing":
        Tenant.objects.create(
            slug="demo",
            name="Demo",
            auth_mode=AuthMode.OAUTH if demo == "oauth" else AuthMode.PUBLIC,
            is_active=demo != "inactive",
        )
    text = client.get("/").content.decode()
    assert "This site hosts MCP servers." in text and "Open the MCP URL you were given in your browser" in text
    assert "/t/demo" not in text and "Try the demo" not in text
    assert 'class="button primary" href="/oauth/login?next=%2F"' in text


def test_a_member_of_no_tenant_is_offered_the_public_demo(client, django_user_model):
    Tenant.objects.create(slug="demo", name="Demo", auth_mode=AuthMode.PUBLIC)
    client.force_login(django_user_model.objects.create_user("erin", "erin@example.com", "erin-pw-123"))
    text = client.get("/").content.decode()
    assert "You are not a member of any tenant yet" in text and 'href="/t/demo/connect"' in text


def test_signing_in_from_the_front_page_promises_no_authorization_step_and_comes_back(client, alice):
    page = client.get("/oauth/login?next=%2F").content.decode()
    assert 'name="next" value="/"' in page and "allow the application access" not in page
    answer = client.post("/oauth/login", {"username": "alice", "password": "alice-pw-123", "next": "/"})
    assert answer.status_code == 302 and answer["Location"] == "/"


def test_alice_sees_her_tenant_with_its_mcp_url_and_pages_and_nothing_of_tenant_b(client, alice, tenant_b):
    client.force_login(alice)
    page = client.get("/")
    assert [row["tenant"].slug for row in page.context["tenants"]] == ["tenant-a"]
    text = page.content.decode()
    assert canonical_uri("tenant-a") in text and "tenant-b" not in text
    assert reverse("tenant-connect", kwargs={"slug": "tenant-a"}) in text
    assert reverse("tenant-dashboard", kwargs={"slug": "tenant-a"}) in text
    assert page.context["tenants"][0]["role"] == "owner"


def test_charlie_sees_tenant_b_only(client, charlie, tenant_a):
    client.force_login(charlie)
    page = client.get("/")
    assert [row["tenant"].slug for row in page.context["tenants"]] == ["tenant-b"]
    assert "tenant-a" not in page.content.decode()


def test_staff_get_the_way_into_the_admin_and_other_members_do_not(client, bob, django_user_model, tenant_a):
    client.force_login(bob)  # a viewer, with staff status
    assert f'href="{reverse("admin:index")}"' in client.get("/").content.decode()
    member = django_user_model.objects.create_user("dana", "dana@example.com", "dana-pw-123")
    tenant_a.memberships.create(user=member, role="viewer")
    client.force_login(member)
    page = client.get("/").content.decode()
    assert "Open the admin" not in page and canonical_uri("tenant-a") in page


def test_a_superuser_sees_every_tenant(client, django_user_model, tenant_a, tenant_b):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw-123")
    client.force_login(root)
    slugs = [row["tenant"].slug for row in client.get("/").context["tenants"]]
    assert slugs == ["tenant-a", "tenant-b"]


def test_a_tenant_page_not_wired_yet_is_left_out_instead_of_failing(client, alice, monkeypatch):
    monkeypatch.setattr(views, "TENANT_PAGES", (("no-such-page", "Nowhere"), *views.TENANT_PAGES))
    client.force_login(alice)
    page = client.get("/")
    assert page.status_code == 200 and "Nowhere" not in page.content.decode()


def test_the_admins_view_site_link_is_the_front_page(client, alice):
    assert admin.site.site_url == "/"
    client.force_login(alice)
    assert '<a href="/">View site</a>' in client.get(reverse("admin:index")).content.decode()
