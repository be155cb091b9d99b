"""The trail is append-only from the application, survives deletions, and never breaks what it records."""

from __future__ import annotations

import pytest
from django.db import transaction

from audit.models import Action, AppendOnlyError, AuditEvent
from audit.trail import record
from tests.audit.conftest import only_event

pytestmark = pytest.mark.django_db


@pytest.fixture
def event(alice, tenant_a, committed) -> AuditEvent:
    with committed():
        record(Action.TENANT_SETTINGS_CHANGED, actor=alice, tenant=tenant_a, detail={"changed": {"x": [1, 2]}})
    return only_event(Action.TENANT_SETTINGS_CHANGED)


def test_an_event_cannot_be_changed_or_deleted(event):
    event.action = Action.SIGN_IN
    with pytest.raises(AppendOnlyError):
        event.save()
    with pytest.raises(AppendOnlyError):
        event.delete()
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.filter(pk=event.pk).update(action=Action.SIGN_IN)
    with pytest.raises(AppendOnlyError):
        AuditEvent.objects.all().delete()
    assert AuditEvent.objects.get(pk=event.pk).action == Action.TENANT_SETTINGS_CHANGED


def test_deleting_the_user_and_tenant_keeps_the_event_with_their_names(event, alice, tenant_a, committed):
    with committed():
        alice.delete()
        tenant_a.delete()
    kept = AuditEvent.objects.get(pk=event.pk)
    assert (kept.actor_id, kept.actor_username, kept.tenant_id, kept.tenant_slug) == (None, "alice", None, "tenant-a")
    # The deletion itself is in the trail, its cascaded membership too, pointing at nothing.
    assert only_event(Action.TENANT_DELETED).tenant_slug == "tenant-a"
    assert only_event(Action.MEMBER_REMOVED).tenant_id is None


def test_an_action_rolled_back_leaves_no_event(tenant_a, committed):
    with committed(), pytest.raises(RuntimeError), transaction.atomic():
        record(Action.TENANT_SETTINGS_CHANGED, tenant=tenant_a)
        raise RuntimeError("the action failed")
    assert not AuditEvent.objects.exists()


def test_a_failure_to_record_never_breaks_the_action(tenant_a, committed, caplog):
    class Broken:
        pk = 1

        def get_username(self) -> str:
            raise ValueError("broken actor")

    with committed():
        record(Action.SIGN_IN, actor=Broken())  # no exception
        record(Action.SIGN_IN, actor_username="x" * 10, detail={"n": 1}, client_id="c" * 5000, tenant=tenant_a)
    assert "audit event sign_in not recorded" in caplog.text
    assert only_event(Action.SIGN_IN).client_id == "c" * 2048


def test_secret_keys_are_dropped_from_the_detail_whatever_the_caller_passes(committed):
    with committed():
        record(Action.SIGN_IN, detail={"password": "pw-1", "nested": {"token": "tk-2", "ok": "yes"}})
    assert only_event(Action.SIGN_IN).detail == {"nested": {"ok": "yes"}}
