"""Sign-in, its failures and lockouts, and sign-out are recorded with who and from where."""

from __future__ import annotations

import pytest
from django.test import Client

from audit.models import Action, AuditEvent
from tests.audit.conftest import ADDRESS, assert_no_secret, only_event

pytestmark = pytest.mark.django_db


def test_a_successful_sign_in_is_recorded_with_the_user_and_address(alice, committed):
    with committed():
        response = Client(REMOTE_ADDR=ADDRESS).post("/oauth/login", {"username": "alice", "password": "alice-pw-123"})
    assert response.status_code == 302
    event = only_event(Action.SIGN_IN)
    assert (event.actor, event.actor_username, event.source_address) == (alice, "alice", ADDRESS)
    assert event.tenant is None
    assert_no_secret(event, "alice-pw-123")


def test_a_failed_sign_in_is_recorded_with_the_username_tried_never_the_password(alice, committed):
    with committed():
        response = Client(REMOTE_ADDR=ADDRESS).post("/admin/login/", {"username": "alice", "password": "wrong-pw-987"})
    assert response.status_code == 200
    event = only_event(Action.SIGN_IN_FAILED)
    assert (event.actor, event.actor_username, event.source_address) == (None, "alice", ADDRESS)
    assert_no_secret(event, "wrong-pw-987")
    assert not AuditEvent.objects.filter(action=Action.SIGN_IN).exists()


def test_a_lockout_after_repeated_failures_is_recorded_once(alice, committed, settings):
    settings.AXES_FAILURE_LIMIT = 2
    browser = Client(REMOTE_ADDR=ADDRESS)
    with committed():
        for _ in range(2):
            browser.post("/oauth/login", {"username": "alice", "password": "wrong-pw-987"})
    event = only_event(Action.SIGN_IN_LOCKED_OUT)
    assert (event.actor_username, event.source_address) == ("alice", ADDRESS)
    assert AuditEvent.objects.filter(action=Action.SIGN_IN_FAILED).count() == 2
    assert_no_secret(event, "wrong-pw-987")


def test_signing_out_is_recorded(alice, committed):
    browser = Client(REMOTE_ADDR=ADDRESS)
    browser.force_login(alice)
    with committed():
        browser.post("/oauth/logout")
    event = only_event(Action.SIGN_OUT)
    assert (event.actor, event.source_address) == (alice, ADDRESS)
