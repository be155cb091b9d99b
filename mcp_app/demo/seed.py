"""Seed the demo tenants from their tenant documents (`tenants/*.yaml` here) through the one importer.

The documents say everything a tenant document can (AMB-153). Only this is code, because a document
cannot say it: the platform's public URL, which depends on the deployment (``${MCP_PUBLIC_URL}``, filled
in here), and the seed's rule for a tenant that exists (create what is missing, keep what a person
edited, unless reset: a restart must not undo the admin's edits, nor bump a version).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction

from mcp_app.portability.document import loads
from mcp_app.portability.importer import import_document
from tenants.models import Tenant

DEMO_SLUG = "demo"
SECURE_SLUG = "secure"
DOCUMENTS = Path(__file__).with_name("tenants")
# The one substitution, in any string of a demo document: the demo's http tools post to the
# platform's own /demo/echo and /demo/stream, at whatever URL it is served.
PUBLIC_URL = "${MCP_PUBLIC_URL}"
# The importer's actions as seed_demo has always reported them, in the order it says them.
STATES = {"create": "created", "change": "updated", "unchanged": "unchanged", "keep": "kept"}
# How seed_demo's line names each list of a tenant document (AMB-294): singular, plural.
KIND_WORDS = {
    "upstreams": ("upstream server", "upstream servers"),
    "providers": ("account provider", "account providers"),
    "tools": ("tool", "tools"),
    "prompts": ("prompt", "prompts"),
    "resources": ("resource", "resources"),
    "resource_templates": ("resource template", "resource templates"),
    "policies": ("policy", "policies"),
    "quotas": ("quota", "quotas"),
    "guardrails": ("guardrail", "guardrails"),
}


def document_path(slug: str) -> Path:
    return DOCUMENTS / f"{slug}.yaml"


def fill(value: Any, public_url: str) -> Any:
    """The value with ``${MCP_PUBLIC_URL}`` replaced in every string (parsed first: no YAML to break)."""
    if isinstance(value, str):
        return value.replace(PUBLIC_URL, public_url)
    if isinstance(value, list):
        return [fill(item, public_url) for item in value]
    if isinstance(value, dict):
        return {key: fill(item, public_url) for key, item in value.items()}
    return value


def load(slug: str) -> dict[str, Any]:
    """The demo tenant's document as this platform seeds it (its public URL filled in)."""
    return fill(loads(document_path(slug).read_bytes()), settings.MCP_PUBLIC_URL)


@dataclass
class Seeded:
    """What seeding one demo tenant did: to the tenant itself, and to its rows by outcome and kind."""

    tenant: str  # created, kept (its settings left as they are), updated or unchanged
    rows: dict[str, Counter[str]] = field(default_factory=dict)  # outcome -> document kind -> count

    def summary(self) -> str:
        """In words, what of what: "tenant created; 13 tools, 4 prompts and 3 resources created"."""
        parts = [f"tenant {self.tenant}"]
        for state in STATES.values():
            counted = self.rows.get(state)
            if not counted:
                continue
            named = [
                f"{n} {KIND_WORDS.get(kind, (kind, kind))[n != 1]}" for kind, n in counted.items() if n
            ]
            listed = named[0] if len(named) == 1 else f"{', '.join(named[:-1])} and {named[-1]}"
            parts.append(f"{listed} {state}")
        return "; ".join(parts)


def seed_tenant(slug: str, reset: bool) -> Seeded:
    """Create the missing rows of a demo tenant (reset: restore edited ones); what it did, by outcome."""
    document = load(slug)
    with transaction.atomic():
        tenant = Tenant.objects.filter(slug=slug).first()
        tenant_state = "kept"
        if tenant is None:
            # Made with its settings, so its history starts with them (then the import finds them equal).
            tenant = Tenant(slug=slug, **document["settings"])
            tenant.full_clean()
            tenant.save()
            tenant_state = "created"
        elif not reset:
            del document["settings"]  # settings left out stay as they are
        elif not tenant.is_active:
            # is_active is no setting of a document (an export must not switch a tenant on or off).
            tenant.is_active = True
            tenant.save(update_fields=["is_active", "updated_at"])
            tenant_state = "updated"
        plan = import_document(tenant, document, keep_existing=not reset)
    if reset and tenant_state == "kept":
        tenant_state = "updated" if plan.settings_changed else "unchanged"
    seeded = Seeded(tenant_state)
    for change in plan.changes:
        seeded.rows.setdefault(STATES[change.action], Counter())[change.kind] += 1
    return seeded
