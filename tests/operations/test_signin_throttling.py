"""Sign-in throttling (django-axes): a username guessed at from one address is paused there, not elsewhere."""

from __future__ import annotations

import pytest
from django.test import Client

pytestmark = pytest.mark.django_db

PASSWORD = "correct horse battery staple"


@pytest.fixture
def person(django_user_model):
    return django_user_model.objects.create_user("dora", password=PASSWORD, is_staff=True)


def sign_in(client: Client, url: str, password: str, address: str = "203.0.113.7"):
    return client.post(url, {"username": "dora", "password": password}, REMOTE_ADDR=address)


@pytest.mark.parametrize("url", ["/oauth/login", "/admin/login/"])
def test_wrong_passwords_up_to_the_limit_pause_that_username_from_that_address(person, settings, url):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        assert sign_in(Client(), url, "wrong").status_code == 200  # the form again, with its error
    locked = sign_in(Client(), url, "wrong")
    assert locked.status_code == 429
    assert int(locked["Retry-After"]) == settings.AXES_COOLOFF_TIME.total_seconds()
    assert "Too many sign-in attempts" in locked.content.decode()
    # Even the right password waits out the pause from there...
    assert sign_in(Client(), url, PASSWORD).status_code == 429
    # ...while the same person signs in from another address.
    assert sign_in(Client(), url, PASSWORD, address="198.51.100.9").status_code == 302


def test_a_successful_sign_in_clears_the_count(person, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        sign_in(Client(), "/oauth/login", "wrong")
    assert sign_in(Client(), "/oauth/login", PASSWORD).status_code == 302
    for _ in range(2):
        assert sign_in(Client(), "/oauth/login", "wrong").status_code == 200
    assert sign_in(Client(), "/oauth/login", PASSWORD).status_code == 302
