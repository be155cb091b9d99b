"""API test helpers: clients signed in as a persona (session, CSRF enforced) or holding a token."""

from __future__ import annotations

from typing import Any

import pytest
from django.test import Client

from mcp_app.api.tokens import issue_manage_token
from mcp_app.models import Tool

API = "/api/v1/tenants"


class ApiClient(Client):
    """Django's test client against the API: JSON bodies, and the CSRF token a browser would send."""

    def __init__(self, user: Any = None, token: str | None = None) -> None:
        super().__init__(enforce_csrf_checks=True)
        self.token = token
        if user is not None:
            self.force_login(user)
            self.get("/admin/")  # sets the csrftoken cookie, as the admin's pages do

    def _headers(self, extra: dict[str, Any]) -> dict[str, Any]:
        headers = dict(extra)
        if self.token:
            headers.setdefault("HTTP_AUTHORIZATION", f"Bearer {self.token}")
        if "csrftoken" in self.cookies:
            headers.setdefault("HTTP_X_CSRFTOKEN", self.cookies["csrftoken"].value)
        return headers

    def call(self, method: str, path: str, body: Any = None, **extra: Any) -> Any:
        send = getattr(self, method.lower())
        if method.upper() in ("GET", "DELETE") and body is None:
            return send(path, **self._headers(extra))
        return send(path, body, content_type="application/json", **self._headers(extra))


@pytest.fixture
def as_alice(alice) -> ApiClient:
    return ApiClient(alice)


@pytest.fixture
def as_bob(bob) -> ApiClient:
    return ApiClient(bob)


@pytest.fixture
def as_charlie(charlie) -> ApiClient:
    return ApiClient(charlie)


@pytest.fixture
def alice_token(alice) -> str:
    return issue_manage_token(alice)


@pytest.fixture
def echo_tool(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        description="Echo a message.",
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        handler="template",
        handler_config={"text": "{{ message }}"},
    )


def tool_body(name: str = "greet", **overrides: Any) -> dict[str, Any]:
    body = {
        "name": name,
        "description": "Greet someone.",
        "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}},
        "handler": "template",
        "handler_config": {"text": "Hello {{ who }}"},
    }
    return {**body, **overrides}
