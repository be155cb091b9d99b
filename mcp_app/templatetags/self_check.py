"""``{% self_check_links as links %}``: (slug, URL) of the "Check this tenant" page of each tenant the
user owns or edits (tenants.access), for the tools' list (mcp_app/admin/self_check.py)."""

from __future__ import annotations

from typing import Any

from django import template
from django.urls import reverse

from tenants import access
from tenants.models import Tenant

register = template.Library()
# A superuser sees every tenant: the list offers at most this many links (the tenant's page has one too).
MAX_LINKS = 10


@register.simple_tag(takes_context=True)
def self_check_links(context: dict[str, Any]) -> list[tuple[str, str]]:
    request = context.get("request")
    if request is None or not request.user.is_authenticated:
        return []
    ids = access.tenant_ids_for(request.user, edit=True)
    tenants = Tenant.objects.all() if ids is None else Tenant.objects.filter(id__in=ids)
    # The list filtered to one tenant offers that one's check only.
    chosen = request.GET.get("tenant__id__exact")
    if chosen and chosen.isdigit():
        tenants = tenants.filter(id=int(chosen))
    return [
        (t.slug, reverse("admin-self-check:check", args=[t.pk])) for t in tenants.order_by("slug")[:MAX_LINKS]
    ]
