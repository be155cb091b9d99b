"""Publishing many remote tools at once from the admin (AMB-292): the ones an owner ticks, or every one an
upstream offers and clients do not get yet.

Each tool goes through `upstreams.service.publish`, the one publish of a remote tool (its checks, its
history and audit), all inside one transaction: the catalog's version moves once and clients get one
`tools/list_changed` (signals/definitions.py announces a transaction's changes together), however many
were published. A tool that cannot be published (a name the tenant already uses, a definition our
checks refuse) is rolled back alone, to its savepoint, and said why; the others are published.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.contrib import messages
from django.db import transaction
from django.db.models import QuerySet
from django.http import HttpRequest

from mcp_app.models import UpstreamTool
from mcp_app.upstreams import service

# How many names a message lists before it says how many more: a publish of 2,000 tools stays readable.
NAMES_SHOWN = 10


@dataclass
class Outcome:
    """What one publish of many did: (remote name, published name) pairs, and why the others were not."""

    published: list[tuple[str, str]] = field(default_factory=list)
    not_published: dict[str, str] = field(default_factory=dict)


def publishable(rows: QuerySet[UpstreamTool]) -> QuerySet[UpstreamTool]:
    """The rows among `rows` that a publish would publish: offered now and not published."""
    return rows.filter(tool__isnull=True, gone_at__isnull=True)


def publish_many(rows: QuerySet[UpstreamTool], user: Any = None) -> Outcome:
    """Publish every publishable row of `rows` under its default name (prefix + remote name), as one change."""
    outcome = Outcome()
    with transaction.atomic():
        # Locked, so two owners publishing at once publish each tool once (the second finds it done).
        locked = publishable(rows).select_for_update().select_related("upstream")
        for row in locked.order_by("upstream__name", "remote_name"):
            try:
                with transaction.atomic():
                    tool = service.publish(row, user=user)
            except service.UpstreamProblem as exc:
                outcome.not_published[row.remote_name] = str(exc)
            else:
                outcome.published.append((row.remote_name, tool.name))
    return outcome


def _listed(items: list[str]) -> str:
    shown = ", ".join(items[:NAMES_SHOWN])
    more = len(items) - NAMES_SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def tell(request: HttpRequest, outcome: Outcome, nothing: str) -> None:
    """The owner's messages about `outcome`; `nothing` when there was nothing to publish."""
    if not outcome.published and not outcome.not_published:
        messages.info(request, nothing)
        return
    if outcome.published:
        count = len(outcome.published)
        pairs = [name if name == remote else f"{remote} as {name}" for remote, name in outcome.published]
        messages.success(
            request,
            f"Published {count} remote tool{'s' if count != 1 else ''} in one change: {_listed(pairs)}.",
        )
    failed = list(outcome.not_published.items())
    for remote, why in failed[:NAMES_SHOWN]:
        messages.warning(request, f"{remote} was not published: {why}")
    if len(failed) > NAMES_SHOWN:
        rest = [remote for remote, _why in failed[NAMES_SHOWN:]]
        messages.warning(request, f"Not published either, for the same kinds of reasons: {_listed(rest)}.")
