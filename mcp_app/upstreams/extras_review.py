"""An upstream's prompts, resources and resource templates: what a sync saw, the review, the accept (AMB-190).

The Upstream row keeps both: `offered_extras` (what the last sync saw, written by an update: status,
no version bump) and `pinned_extras` (what clients are served, one list per published kind). A sync
never touches a pin but the first one of a kind published before anything was offered: a changed
description, a new prompt, a resource gone all wait as a review until an owner accepts everything the
upstream offers now. Pins change only by a save of the row (history, audit, the tenant's version
bumped, `list_changed` to clients: signals/definitions.py). Also the line diff every review shows.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from typing import Any

from mcp_app import federation
from mcp_app.catalog import published_extras
from mcp_app.models import Prompt, Resource, ResourceTemplate, Upstream
from mcp_app.models.upstreams import comparable_extra, extras_by_key

# How the admin names each list.
KIND_LABELS = {"prompts": "prompt", "resources": "resource", "resourceTemplates": "resource template"}


@dataclass(frozen=True)
class ExtraDiff:
    """One prompt, resource or template the upstream offers otherwise than it is pinned."""

    kind: str
    key: str  # the upstream's name, URI or URI template
    change: str  # "added", "removed" or "changed"
    # (kind, text) as lines() gives them.
    lines: list[tuple[str, str]]

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)


def lines(old: Any, new: Any) -> list[tuple[str, str]]:
    """A line diff of two values (JSON, or text as it is) for a review."""
    before = (
        json.dumps(old, indent=2, sort_keys=True, ensure_ascii=False) if not isinstance(old, str) else old
    )
    after = json.dumps(new, indent=2, sort_keys=True, ensure_ascii=False) if not isinstance(new, str) else new
    if "\n" not in before and "\n" not in after:
        return [(kind, text) for kind, text in (("-", before), ("+", after)) if text]
    out = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=3):
        if not line.startswith(("---", "+++")):
            out.append(("@", line) if line.startswith("@@") else (line[:1] or " ", line[1:]))
    return out


def save(upstream: Upstream, reason: str, user: Any = None) -> None:
    """Save the row's pins as an edit: history, audit, the version bump and list_changed follow."""
    # Read by django-simple-history (never columns).
    vars(upstream)["_change_reason"] = reason[:100]
    vars(upstream)["_history_user"] = user if user is not None and user.is_authenticated else None
    upstream.save(update_fields=["pinned_extras", "updated_at"])


def record_offered(upstream: Upstream, offering: federation.Offering) -> None:
    """Keep what the upstream offers now; pin it only for a kind published before anything was offered."""
    offered = {
        "prompts": offering.prompts,
        "resources": offering.resources,
        "resourceTemplates": offering.resource_templates,
    }
    upstream.offered_extras = offered
    Upstream.objects.filter(pk=upstream.pk).update(offered_extras=offered)
    if upstream.pin_published():
        save(upstream, "Pinned the prompts and resources it offers")


def published(upstream: Upstream) -> published_extras.Published:
    """What clients get of the upstream's pinned extras, the tenant's own definitions winning as in the catalog."""
    mine = {"tenant_id": upstream.tenant_id}
    taken = published_extras.Taken(
        set(Prompt.objects.filter(**mine).values_list("name", flat=True)),
        set(Resource.objects.filter(**mine).values_list("uri", flat=True)),
        set(ResourceTemplate.objects.filter(**mine).values_list("uri_template", flat=True)),
    )
    return published_extras.published(upstream, taken)


def diff(upstream: Upstream) -> list[ExtraDiff]:
    """Item by item, how what the upstream offers differs from what is pinned (empty: nothing to review)."""
    out = []
    offered = upstream.offered_extras or {}
    for kind, keys in upstream.extras_pending().items():
        old = extras_by_key(kind, (upstream.pinned_extras or {}).get(kind))
        new = extras_by_key(kind, offered.get(kind))
        for key in keys:
            before, after = comparable_extra(old.get(key)), comparable_extra(new.get(key))
            change = "added" if before is None else "removed" if after is None else "changed"
            out.append(ExtraDiff(kind, key, change, lines(before or "", after or "")))
    return out


def accept(upstream: Upstream, user: Any = None) -> bool:
    """Pin what the upstream offers now of every published kind; False when there was nothing to accept."""
    if not upstream.extras_pending():
        return False
    offered = upstream.offered_extras or {}
    upstream.pinned_extras = {
        kind: offered[kind] if isinstance(offered.get(kind), list) else items
        for kind, items in (upstream.pinned_extras or {}).items()
    }
    save(upstream, "Accepted the upstream's prompts and resources", user)
    return True
