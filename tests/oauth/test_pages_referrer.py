"""The sign-in and consent pages keep their URL to ourselves without breaking the browser's form posts."""

from __future__ import annotations

import pytest
from django.test import Client


@pytest.mark.django_db
def test_the_sign_in_page_sends_a_same_origin_referrer_policy_header_and_no_no_referrer_meta_tag() -> None:
    # `no-referrer` in a meta tag made browsers post forms with `Origin: null`, refused by the CSRF check.
    response = Client().get("/oauth/login")
    assert response.status_code == 200
    assert response["Referrer-Policy"] == "same-origin"
    assert b'name="referrer"' not in response.content


@pytest.mark.django_db
def test_a_refused_form_gets_a_readable_page_that_leads_back_to_the_authorization_request() -> None:
    nxt = "/oauth/authorize?client_id=abc&state=s1"
    response = Client(enforce_csrf_checks=True).post(
        "/oauth/login", {"username": "u", "password": "p", "next": nxt}
    )
    assert response.status_code == 403
    body = response.content.decode()
    assert "This form has expired" in body and "Nothing was changed" in body
    assert 'href="/oauth/login?next=%2Foauth%2Fauthorize%3Fclient_id%3Dabc%26state%3Ds1"' in body


@pytest.mark.django_db
def test_a_refused_form_never_links_to_another_site() -> None:
    response = Client(enforce_csrf_checks=True).post("/oauth/login", {"next": "https://evil.example/x"})
    assert response.status_code == 403
    assert b"evil.example" not in response.content
