"""Security headers on every HTML page (django-csp, Django's security middleware)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from django.conf import settings

from mcp_app.models import ToolRun

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("path", ["/", "/oauth/login", "/admin/login/"])
def test_pages_forbid_framing_and_scripts_from_elsewhere_and_keep_the_referrer_same_origin(client, path):
    response = client.get(path)
    assert response.status_code == 200
    policy = response["Content-Security-Policy"]
    directives = dict(part.strip().split(" ", 1) for part in policy.split(";"))
    assert directives["frame-ancestors"] == "'none'"
    assert directives["script-src"].startswith("'self'") and "unsafe-inline" not in directives["script-src"]
    assert directives["object-src"] == "'none'"
    assert "form-action" not in directives  # the consent form's redirect to the client must be followed
    assert response["X-Frame-Options"] == "DENY"
    assert response["Referrer-Policy"] == "same-origin"


def test_an_inline_script_runs_only_with_the_responses_nonce(admin_client, tenant_a):
    run = ToolRun.objects.create(
        job_id="csp", tenant=tenant_a, tool_name="slow", status=ToolRun.Status.RUNNING
    )
    page = admin_client.get(f"/admin/mcp_app/toolrun/{run.pk}/change/")
    nonce = page["Content-Security-Policy"].split("'nonce-", 1)[1].split("'", 1)[0]
    assert f'<script nonce="{nonce}">' in page.content.decode()


def settings_under(**env: str) -> str:
    code = (
        "import django; django.setup(); from django.conf import settings as s; "
        "print(s.SESSION_COOKIE_SECURE, s.CSRF_COOKIE_SECURE, s.SECURE_HSTS_SECONDS)"
    )
    run_env = {**os.environ, "DJANGO_SETTINGS_MODULE": "mcpsite.settings", **env}
    return subprocess.run(
        [sys.executable, "-c", code],
        env=run_env,
        capture_output=True,
        text=True,
        check=True,
        cwd=settings.BASE_DIR,
    ).stdout.strip()


def test_an_https_public_url_makes_cookies_secure_and_sends_hsts():
    assert settings_under(MCP_PUBLIC_URL="https://mcp.example.com") == "True True 31536000"
    assert settings_under(MCP_PUBLIC_URL="http://127.0.0.1:8000") == "False False 0"
