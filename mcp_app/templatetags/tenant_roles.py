"""``{% can_edit_tenant tenant as flag %}``: whether the user owns or edits the tenant (tenants.access)."""

from __future__ import annotations

from typing import Any

from django import template

from tenants import access
from tenants.models import EDIT_ROLES

register = template.Library()


@register.simple_tag(takes_context=True)
def can_edit_tenant(context: dict[str, Any], tenant: Any) -> bool:
    request = context.get("request")
    return bool(request and tenant and tenant.pk and access.role_of(request.user, tenant) in EDIT_ROLES)
