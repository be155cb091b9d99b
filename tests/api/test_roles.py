"""What each persona may do through the API: alice owns tenant_a, bob views it, charlie sees nothing of it."""

from __future__ import annotations

import pytest
from django.contrib.auth import get_user_model
from oauth2_provider.models import get_access_token_model

from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool, ToolRun
from tenants.models import Membership, Role
from tests.api.conftest import API, ApiClient, tool_body
from tests.oauth.rs_support import issue_token, make_application

pytestmark = pytest.mark.django_db


@pytest.fixture
def tenant_a_rows(tenant_a, echo_tool, alice):
    """One row of every kind in tenant_a, and a client holding a token for its endpoint."""
    prompt = Prompt.objects.create(
        tenant=tenant_a, name="hello", messages=[{"role": "user", "content": {"type": "text", "text": "Hi"}}]
    )
    resource = Resource.objects.create(tenant=tenant_a, uri="docs://readme", name="readme", text="Read me")
    template = ResourceTemplate.objects.create(
        tenant=tenant_a, uri_template="docs://{page}", name="page", handler_config={"text": "{{ page }}"}
    )
    run = ToolRun.objects.create(tenant=tenant_a, job_id="job-1", tool=echo_tool, tool_name="echo")
    application = make_application("Alice's client")
    issue_token(alice, tenant_a, application)
    member = Membership.objects.get(user=alice, tenant=tenant_a)
    return {
        "tools": echo_tool.pk,
        "prompts": prompt.pk,
        "resources": resource.pk,
        "resource-templates": template.pk,
        "runs": run.pk,
        "clients": application.pk,
        "members": member.pk,
    }


def test_the_tenant_list_shows_only_the_callers_tenants_with_their_role(as_alice, as_bob, as_charlie, tenant_b):
    def listed(client: ApiClient) -> list[tuple[str, str]]:
        return [(t["slug"], t["role"]) for t in client.call("GET", "/api/v1/tenants/").json()["results"]]

    assert listed(as_alice) == [("tenant-a", "owner")]
    assert listed(as_bob) == [("tenant-a", "viewer")]
    assert listed(as_charlie) == [("tenant-b", "owner")]


def test_a_superuser_sees_every_tenant_as_owner(tenant_a, tenant_b):
    root = get_user_model().objects.create_superuser("root", "root@example.com", "root-pw-123")
    rows = ApiClient(root).call("GET", "/api/v1/tenants/").json()["results"]
    assert [(t["slug"], t["role"]) for t in rows] == [("tenant-a", "owner"), ("tenant-b", "owner")]


@pytest.mark.parametrize(
    "kind", ["tools", "prompts", "resources", "resource-templates", "runs", "clients", "members"]
)
def test_every_member_reads_every_kind_and_charlie_gets_404_everywhere(
    kind, as_alice, as_bob, as_charlie, tenant_a_rows
):
    pk = tenant_a_rows[kind]
    for client in (as_alice, as_bob):
        assert client.call("GET", f"{API}/tenant-a/{kind}/").json()["count"] >= 1
        assert client.call("GET", f"{API}/tenant-a/{kind}/{pk}/").status_code == 200
    missing = as_charlie.call("GET", f"{API}/tenant-a/{kind}/999999/")
    for method in ("GET", "PATCH", "PUT", "DELETE"):
        hidden = as_charlie.call(method, f"{API}/tenant-a/{kind}/{pk}/", {} if method in ("PATCH", "PUT") else None)
        assert (hidden.status_code, hidden.json()) == (404, missing.json())
    assert as_charlie.call("GET", f"{API}/tenant-a/{kind}/").status_code == 404
    assert as_charlie.call("POST", f"{API}/tenant-a/{kind}/", {}).status_code == 404
    # Charlie's own tenant lists none of tenant_a's rows.
    assert pk not in [row["id"] for row in as_charlie.call("GET", f"{API}/tenant-b/{kind}/").json()["results"]]


def test_an_unknown_tenant_and_a_hidden_one_answer_the_same(as_charlie, tenant_a):
    hidden = as_charlie.call("GET", f"{API}/tenant-a/")
    missing = as_charlie.call("GET", f"{API}/no-such-tenant/")
    assert (hidden.status_code, hidden.json()) == (404, missing.json())
    assert as_charlie.call("PATCH", f"{API}/tenant-a/", {"name": "Mine"}).status_code == 404


def test_charlie_cannot_cancel_a_run_of_tenant_a(as_charlie, tenant_a_rows):
    response = as_charlie.call("POST", f"{API}/tenant-a/runs/{tenant_a_rows['runs']}/cancel/")
    assert response.status_code == 404
    assert ToolRun.objects.get(pk=tenant_a_rows["runs"]).status == ToolRun.Status.QUEUED


def test_a_viewers_writes_get_403_with_a_readable_reason(as_bob, tenant_a_rows, tenant_a):
    for kind in ("tools", "prompts", "resources", "resource-templates", "members", "clients"):
        response = as_bob.call("DELETE", f"{API}/tenant-a/{kind}/{tenant_a_rows[kind]}/")
        assert response.status_code == 403, kind
        assert response.json()["error"]["message"].startswith("Your role in this tenant is viewer")
    assert as_bob.call("POST", f"{API}/tenant-a/tools/", tool_body()).status_code == 403
    assert as_bob.call("PATCH", f"{API}/tenant-a/", {"name": "Bob's"}).status_code == 403
    assert as_bob.call("POST", f"{API}/tenant-a/runs/{tenant_a_rows['runs']}/cancel/").status_code == 403
    assert Tool.objects.filter(tenant=tenant_a).count() == 1
    assert get_access_token_model().objects.count() == 1


def test_an_editor_changes_definitions_but_not_members_or_settings(bob, tenant_a, echo_tool):
    Membership.objects.filter(user=bob).update(role=Role.EDITOR)
    client = ApiClient(bob)
    assert client.call("PATCH", f"{API}/tenant-a/tools/{echo_tool.pk}/", {"title": "Echo"}).status_code == 200
    assert client.call("PATCH", f"{API}/tenant-a/", {"name": "Bob's"}).status_code == 403
    assert client.call("POST", f"{API}/tenant-a/members/", {"username": "bob", "role": "owner"}).status_code == 403


def test_the_owner_changes_settings_but_never_the_slug(as_alice, tenant_a):
    response = as_alice.call("PATCH", f"{API}/tenant-a/", {"name": "Renamed", "slug": "elsewhere"})
    assert response.status_code == 200
    tenant_a.refresh_from_db()
    assert (tenant_a.name, tenant_a.slug) == ("Renamed", "tenant-a")


def test_the_owner_turns_polling_on_and_a_value_past_its_bound_is_a_400_naming_the_field(as_alice, tenant_a):
    turned_on = as_alice.call("PATCH", f"{API}/tenant-a/", {"stream_poll_seconds": 30, "stream_poll_retry_ms": 2000})
    assert turned_on.status_code == 200
    assert (turned_on.json()["stream_poll_seconds"], turned_on.json()["stream_poll_retry_ms"]) == (30, 2000)
    too_long = as_alice.call("PATCH", f"{API}/tenant-a/", {"stream_poll_seconds": 3601, "stream_poll_retry_ms": -1})
    assert too_long.status_code == 400
    assert set(too_long.json()["error"]["fields"]) == {"stream_poll_seconds", "stream_poll_retry_ms"}
    tenant_a.refresh_from_db()
    assert (tenant_a.stream_poll_seconds, tenant_a.stream_poll_retry_ms) == (30, 2000)


def test_the_owner_manages_members_but_never_removes_the_last_owner(as_alice, alice, bob, tenant_a):
    bobs = Membership.objects.get(user=bob)
    assert as_alice.call("PATCH", f"{API}/tenant-a/members/{bobs.pk}/", {"role": "editor"}).json()["role"] == "editor"
    own = Membership.objects.get(user=alice)
    demoted = as_alice.call("PATCH", f"{API}/tenant-a/members/{own.pk}/", {"role": "viewer"})
    assert demoted.status_code == 400
    assert "at least one owner" in demoted.json()["error"]["fields"]["role"][0]
    assert as_alice.call("DELETE", f"{API}/tenant-a/members/{own.pk}/").status_code == 400
    assert as_alice.call("DELETE", f"{API}/tenant-a/members/{bobs.pk}/").status_code == 204
    # Adding someone back is an invitation to their address (tests/api/test_invitations.py).
    invited = as_alice.call("POST", f"{API}/tenant-a/members/", {"email": "bob@example.com", "role": "viewer"})
    assert (invited.status_code, invited.json()["status"]) == (202, "pending")
    assert not Membership.objects.filter(user=bob).exists()


def test_revoking_a_client_removes_its_tokens_for_this_tenant_only(as_alice, alice, tenant_a, tenant_b):
    application = make_application()
    issue_token(alice, tenant_a, application)
    Membership.objects.create(user=alice, tenant=tenant_b, role=Role.VIEWER)
    issue_token(alice, tenant_b, application)
    listed = as_alice.call("GET", f"{API}/tenant-a/clients/").json()["results"]
    assert [(c["client_id"], c["live_tokens"]) for c in listed] == [(application.client_id, 1)]
    assert as_alice.call("DELETE", f"{API}/tenant-a/clients/{application.pk}/").status_code == 204
    assert get_access_token_model().objects.filter(application=application).count() == 1
    assert as_alice.call("GET", f"{API}/tenant-a/clients/").json()["count"] == 0


def test_a_finished_run_cannot_be_cancelled(as_alice, tenant_a_rows):
    ToolRun.objects.filter(pk=tenant_a_rows["runs"]).update(status=ToolRun.Status.DONE)
    response = as_alice.call("POST", f"{API}/tenant-a/runs/{tenant_a_rows['runs']}/cancel/")
    assert response.status_code == 409
    assert response.json()["error"]["code"] == "conflict"
