"""The `secure` demo tenant's member `secure-user`, seeded by `seed_demo` beside the tenant's document.

A new user connects any OAuth-capable MCP client to /t/secure/mcp and signs in as `secure-user`. The
tenant itself is `tenants/secure.yaml` (seed.py); an account is no part of a tenant document, so it is here.
"""

from __future__ import annotations

import os
import secrets

from django.contrib.auth import get_user_model

from mcp_app.demo.seed import SECURE_SLUG
from tenants.models import Membership, Role, Tenant

SECURE_USERNAME = "secure-user"


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
