"""Members, tool secrets and tenant settings changed through the API or the admin: recorded once, names only."""

from __future__ import annotations

import pytest

from audit.models import Action, AuditEvent
from mcp_app.models import Tool
from tenants.models import Membership, Role
from tests.api.conftest import API, ApiClient, tool_body
from tests.audit.conftest import ADDRESS, assert_no_secret, only_event

pytestmark = pytest.mark.django_db


def test_membership_added_role_changed_and_removed_through_the_api_are_each_recorded(tenant_a, django_user_model, committed):
    django_user_model.objects.create_user("erin", "erin@example.com", "erin-pw-123")
    # Only a superuser attaches an account by username; owners invite (tests/tenants/test_invitations.py).
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw-123")
    api = ApiClient(root)
    with committed():
        added = api.call("POST", f"{API}/tenant-a/members/", {"username": "erin", "role": "viewer"}, REMOTE_ADDR=ADDRESS)
    member = added.json()["id"]
    with committed():
        api.call("PATCH", f"{API}/tenant-a/members/{member}/", {"role": "editor"}, REMOTE_ADDR=ADDRESS)
    with committed():
        api.call("DELETE", f"{API}/tenant-a/members/{member}/", REMOTE_ADDR=ADDRESS)
    expected = {
        Action.MEMBER_ADDED: {"member": "erin", "role": "viewer"},
        Action.MEMBER_ROLE_CHANGED: {"member": "erin", "role": "editor", "old_role": "viewer"},
        Action.MEMBER_REMOVED: {"member": "erin", "role": "editor"},
    }
    for action, detail in expected.items():
        event = only_event(action)
        assert (event.actor, event.tenant, event.source_address, event.detail) == (root, tenant_a, ADDRESS, detail)


def test_a_role_changed_outside_a_request_is_recorded_without_actor_or_address(bob, tenant_a, committed):
    membership = Membership.objects.get(user=bob, tenant=tenant_a)
    with committed():
        membership.save()  # no change: nothing recorded
    assert not AuditEvent.objects.exists()
    membership.role = Role.EDITOR
    with committed():
        membership.save()
    event = only_event(Action.MEMBER_ROLE_CHANGED)
    assert (event.actor, event.tenant, event.source_address, event.detail["old_role"]) == (None, tenant_a, None, "viewer")


def test_secrets_set_changed_and_removed_are_recorded_by_name_never_by_value(alice, tenant_a, committed):
    api = ApiClient(alice)
    body = tool_body(handler="http", handler_config={"url": "https://example.com/hook"},
                     secrets={"Authorization": "Bearer sk-first-111"})  # fmt: skip
    with committed():
        created = api.call("POST", f"{API}/tenant-a/tools/", body, REMOTE_ADDR=ADDRESS)
    assert created.status_code == 201, created.json()
    url = f"{API}/tenant-a/tools/{created.json()['id']}/"
    with committed():
        api.call("PATCH", url, {"description": "no secret touched"})
    with committed():
        api.call("PATCH", url, {"secrets": {"Authorization": "Bearer sk-second-222", "X-Key": "k-333"}})
    with committed():
        api.call("PATCH", url, {"secrets": {}})
    events = list(AuditEvent.objects.filter(action=Action.SECRETS_CHANGED).order_by("id"))
    assert [(e.detail["added"], e.detail["changed"], e.detail["removed"]) for e in events] == [
        (["Authorization"], [], []),
        (["X-Key"], ["Authorization"], []),
        ([], [], ["Authorization", "X-Key"]),
    ]
    assert {(e.actor, e.tenant) for e in events} == {(alice, tenant_a)}
    assert events[0].source_address == ADDRESS
    for event in events:
        assert_no_secret(event, "sk-first-111", "sk-second-222", "k-333", Tool.objects.get().handler_secrets or "§")


def test_tenant_settings_changed_through_the_api_are_recorded_with_old_and_new_values(alice, tenant_a, committed):
    with committed():
        response = ApiClient(alice).call(
            "PATCH", f"{API}/tenant-a/",
            {"auth_mode": "oauth", "allowed_origins": "https://app.example.com", "task_ttl_seconds": 60},
            REMOTE_ADDR=ADDRESS,
        )  # fmt: skip
    assert response.status_code == 200, response.json()
    event = only_event(Action.TENANT_SETTINGS_CHANGED)
    assert (event.actor, event.tenant, event.source_address) == (alice, tenant_a, ADDRESS)
    assert event.detail["changed"] == {
        "auth_mode": ["public", "oauth"],
        "allowed_origins": ["", "https://app.example.com"],
        "task_ttl_seconds": [3600, 60],
    }
