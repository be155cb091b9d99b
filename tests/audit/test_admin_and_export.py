"""The trail in the admin: each tenant's events to its owners only, read-only; JSON lines from the admin and the command."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command
from django.test import Client

from audit.models import Action, AuditEvent
from audit.trail import record

pytestmark = pytest.mark.django_db
LIST = "/admin/audit/auditevent/"


@pytest.fixture
def events(alice, tenant_a, tenant_b, committed) -> dict[str, AuditEvent]:
    with committed():
        record(Action.MEMBER_ADDED, actor=alice, tenant=tenant_a, detail={"member": "a-member"})
        record(Action.MEMBER_ADDED, tenant=tenant_b, detail={"member": "b-member"})
        record(Action.SIGN_IN_FAILED, actor_username="nobody-signin")
    return {e.detail.get("member", "none"): e for e in AuditEvent.objects.all()}


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_an_owner_sees_only_her_tenants_events(alice, events):
    page = browser(alice).get(LIST).content.decode()
    assert "tenant-a" in page and "tenant-b" not in page and "nobody-signin" not in page
    assert browser(alice).get(f"{LIST}{events['a-member'].pk}/change/").status_code == 200
    assert browser(alice).get(f"{LIST}{events['b-member'].pk}/change/").status_code in (302, 404)


def test_a_viewer_and_another_tenants_owner_see_none_of_tenant_a(bob, charlie, events):
    assert browser(bob).get(LIST).status_code == 403
    page = browser(charlie).get(LIST).content.decode()
    assert "tenant-b" in page and "tenant-a" not in page
    assert browser(charlie).get(f"{LIST}{events['a-member'].pk}/change/").status_code in (302, 404)
    assert browser(bob).get(f"{LIST}export/").status_code == 403


def test_a_superuser_sees_every_event_but_cannot_add_change_or_delete(admin_user, events):
    client = browser(admin_user)
    page = client.get(LIST).content.decode()
    assert all(text in page for text in ("tenant-a", "tenant-b", "nobody-signin"))
    assert "Export as JSON lines" in page
    assert client.get(f"{LIST}add/").status_code == 403
    pk = events["a-member"].pk
    assert client.post(f"{LIST}{pk}/delete/", {"post": "yes"}).status_code == 403
    assert client.post(f"{LIST}{pk}/change/", {"action": "sign_in"}).status_code == 403
    assert AuditEvent.objects.count() == 3


def lines(response) -> list[dict]:
    return [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]


def test_the_export_button_downloads_the_listed_events_as_json_lines(alice, admin_user, events):
    response = browser(alice).get(f"{LIST}export/")
    assert response["Content-Type"] == "application/jsonl"
    assert [(e["tenant"], e["actor"], e["action"]) for e in lines(response)] == [("tenant-a", "alice", "member_added")]
    filtered = browser(admin_user).get(f"{LIST}export/?action__exact=sign_in_failed")
    assert [e["actor"] for e in lines(filtered)] == ["nobody-signin"]
    assert browser(admin_user).get(f"{LIST}export/?nosuchfield=1").status_code == 400


def test_the_export_action_downloads_the_selected_events(admin_user, events):
    chosen = [events["b-member"].pk]
    response = browser(admin_user).post(LIST, {"action": "export_selected", "_selected_action": chosen})
    assert [e["id"] for e in lines(response)] == chosen


def test_the_command_exports_json_lines_by_tenant_and_time(events, tmp_path, capsys):
    out = tmp_path / "audit.jsonl"
    call_command("export_audit", "--tenant", "tenant-b", "-o", str(out))
    assert [json.loads(line)["detail"] for line in out.read_text().splitlines()] == [{"member": "b-member"}]
    call_command("export_audit", "--since", "2000-01-01")
    assert len(capsys.readouterr().out.splitlines()) == 3
    call_command("export_audit", "--since", "2999-01-01T00:00:00+00:00")
    assert capsys.readouterr().out == ""
    with pytest.raises(CommandError, match="ISO 8601"):
        call_command("export_audit", "--since", "yesterday")
