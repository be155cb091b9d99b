"""`manage.py check --deploy` on the documented production settings reports only the warnings that
docs/operations.md accepts one by one, each with its reason (AMB-112)."""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys

from django.conf import settings

OPERATIONS = (settings.BASE_DIR / "docs" / "operations.md").read_text()
# The documented production settings ("Production settings and `check --deploy`").
PRODUCTION = {
    "DEBUG": "0",
    "SECRET_KEY": secrets.token_urlsafe(50),
    "MCP_PUBLIC_URL": "https://mcp.example.com",
    "MCP_PROXY_SSL_HEADER": "X-Forwarded-Proto",
}


def accepted_warnings() -> dict[str, str]:
    """The table of accepted warnings in docs/operations.md: id → reason."""
    section = OPERATIONS.split("### Production settings and `check --deploy`", 1)[1].split("\n#", 1)[0]
    rows = re.findall(r"^\| `([a-z0-9_]+\.[WE]\d+)` \| (.+) \|$", section, re.M)
    return dict(rows)


def check_deploy(**env: str) -> set[str]:
    """The ids of what `check --deploy` reports under these environment variables."""
    run_env = {
        key: value for key, value in os.environ.items() if not key.startswith(("MCP_", "PYTEST_"))
    }
    run_env.update(DJANGO_SETTINGS_MODULE="mcpsite.settings", **env)
    proc = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "CRITICAL"],
        env=run_env,
        capture_output=True,
        text=True,
        cwd=settings.BASE_DIR,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return set(re.findall(r"^\S*: \(([a-z0-9_]+\.[WE]\d+)\)", proc.stdout + proc.stderr, re.M))


def test_check_deploy_reports_only_the_warnings_the_docs_accept_with_a_reason() -> None:
    accepted = accepted_warnings()
    assert accepted, "docs/operations.md lists no accepted warnings: the parser or the page changed"
    assert all(len(reason) > 40 for reason in accepted.values()), accepted
    reported = check_deploy(**PRODUCTION)
    assert reported - set(accepted) == set(), "warnings the docs do not accept"
    assert set(accepted) - reported == set(), "accepted in the docs but no longer reported: drop them"


def test_without_the_proxys_header_check_deploy_says_the_redirect_to_https_is_off() -> None:
    reported = check_deploy(**{**PRODUCTION, "MCP_PROXY_SSL_HEADER": ""})
    assert "security.W008" in reported
