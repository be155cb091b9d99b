"""``{% tenant_home %}``: the admin home's "Your MCP servers" block (mcp_app/admin/home.py, AMB-270)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from mcp_app.admin import home

register = template.Library()


@register.inclusion_tag("admin/tenant_home.html", takes_context=True)
def tenant_home(context: dict[str, Any]) -> dict[str, Any]:
    homes, more = home.tenant_homes(context["request"])
    return {"homes": homes, "more": more, "tenants_url": reverse("admin:tenants_tenant_changelist")}
