"""The `secure` demo tenant (OAuth mode) and its member, seeded by `seed_demo`.

A new user connects any OAuth-capable MCP client to /t/secure/mcp and signs in as `secure-user`.
One tool needs an extra scope (`secure:vault`), to show per-tool scopes and step-up authorization.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model

from mcp_app.demo.upsert import Counts, upsert
from mcp_app.models import Resource, Tool
from tenants.models import AuthMode, Membership, Role, Tenant

SECURE_SLUG = "secure"
SECURE_USERNAME = "secure-user"
VAULT_SCOPE = "secure:vault"

README = """# Secure MCP server

This tenant is in OAuth mode: a client needs a token issued to one of its members.
Sign in as `secure-user` (the password is printed by `seed_demo`).

- `say_hello` needs the `mcp:tools` scope;
- `read_vault` also needs `secure:vault`: a client that lacks it gets 403 `insufficient_scope`
  and may ask the user again for it.
"""


def secure_definitions() -> dict[str, list[dict[str, Any]]]:
    """The secure tenant's rows as field dicts."""
    tools = [
        {
            "name": "say_hello",
            "title": "Say hello",
            "description": "Greet someone from the secure server.",
            "input_schema": {
                "type": "object",
                "properties": {"name": {"type": "string", "description": "Who to greet."}},
                "required": ["name"],
                "additionalProperties": False,
            },
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "template",
            "handler_config": {"text": "Hello from the secure server, {{ name }}!"},
            "required_scope": "",
        },
        {
            "name": "read_vault",
            "title": "Read the vault",
            "description": f"Return the vault's note (needs the {VAULT_SCOPE} scope).",
            "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
            "annotations": {"readOnlyHint": True, "openWorldHint": False},
            "handler": "template",
            "handler_config": {"text": "The vault says: keep your tokens audience-bound."},
            "required_scope": VAULT_SCOPE,
        },
    ]
    resources = [
        {
            "uri": "secure://readme",
            "name": "readme",
            "title": "Read me",
            "mime_type": "text/markdown",
            "text": README,
            "blob": None,
        }
    ]
    return {"tools": tools, "resources": resources}


def seed_secure_tenant(reset: bool) -> dict[str, int]:
    """Create the missing secure tenant rows (reset: restore edited ones); count by outcome."""
    counts = Counts()
    count = counts.add

    tenant, state = upsert(
        Tenant,
        {"slug": SECURE_SLUG},
        {
            "name": "secure",
            "title": "Secure MCP server",
            "description": "A demonstration tenant behind OAuth: sign in as a member to connect.",
            "instructions": "Use say_hello to check the connection; read_vault needs the secure:vault scope.",
            "is_active": True,
            "auth_mode": AuthMode.OAUTH,
        },
        reset,
    )
    count(state)
    definitions = secure_definitions()
    for values in definitions["tools"]:
        values = {
            "icons": [],
            "meta": {},
            "timeout_seconds": 30,
            "enabled": True,
            "output_schema": None,
            **values,
        }
        count(upsert(Tool, {"tenant": tenant, "name": values.pop("name")}, values, reset)[1])
    for values in definitions["resources"]:
        values = {"description": "", "annotations": {}, "icons": [], "meta": {}, "enabled": True, **values}
        count(upsert(Resource, {"tenant": tenant, "uri": values.pop("uri")}, values, reset)[1])
    return counts.by_state


def seed_secure_user(print_login: bool) -> str | None:
    """Ensure `secure-user` is a member of the secure tenant; return its password when it should be printed.

    The password comes from MCP_SECURE_USER_PASSWORD, else it is generated when the account is created
    (or when print_login asks for a known one: a stored password cannot be read back).
    """
    tenant = Tenant.objects.get(slug=SECURE_SLUG)
    env_password = os.environ.get("MCP_SECURE_USER_PASSWORD") or None
    user_model = get_user_model()
    user = user_model.objects.filter(username=SECURE_USERNAME).first()
    password = None
    if user is None:
        password = env_password or secrets.token_urlsafe(12)
        user = user_model.objects.create_user(SECURE_USERNAME, "secure-user@example.com", password)
    elif env_password and not user.check_password(env_password):
        password = env_password
    elif print_login:
        password = env_password or secrets.token_urlsafe(12)
    if password and not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    Membership.objects.get_or_create(user=user, tenant=tenant, defaults={"role": Role.VIEWER})
    return password or (env_password if print_login else None)
