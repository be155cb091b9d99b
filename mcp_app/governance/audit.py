"""Governance events (AMB-355): each use a policy denied, a guardrail blocked, redacted or audited, or a
quota throttled. `record` appends to this process's memory and nothing else: the usage flush
(usage/flush.py) writes what gathered in one batch every MCP_USAGE_FLUSH_SECONDS, so a flood of
denials costs the request path a lock and an append, never a database write. At most MAX_PENDING wait
between two flushes; past that an event is counted as dropped (the flush logs the count) rather than
kept without bound. An event names the rule, the target and the caller, never an argument or the text
a guardrail found. A tenant may keep only a share of a kind (its `audit_sampling`, AMB-360): a kept
event of a sampled kind says so (`detail.sampled_percent`), so a count can be scaled back."""

from __future__ import annotations

import hashlib
import random
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from mcp_app.core.context import RequestContext

MAX_PENDING = 10_000


def identity_key(ctx: RequestContext) -> str:
    """Who a caller is for a tenant's quotas and its governance events: never its session, so that a
    re-initialize or a sessionless 2026-07-28 request is the same caller. An API key is itself (its
    user's other keys apart), then an identity provider's subject, the user, the OAuth client, and last
    the address (callers behind one proxy share it)."""
    if ctx.client_id and ctx.client_id.startswith("api-key:"):
        key = f"key:{ctx.client_id.removeprefix('api-key:')}"
    elif ctx.subject:
        key = f"subject:{ctx.subject}"
    elif ctx.user_id is not None:
        key = f"user:{ctx.user_id}"
    elif ctx.client_id:
        key = f"client:{ctx.client_id}"
    else:
        key = f"address:{ctx.client_address or 'unknown'}"
    # A subject or client id is the caller's own text: a bounded key whatever it sent.
    return key if len(key) <= 100 else "sha256:" + hashlib.sha256(key.encode()).hexdigest()


@dataclass(frozen=True, slots=True)
class Event:
    at: float
    tenant_id: int
    kind: str  # one of tenants.audit_sampling.EVENT_KINDS
    rule: str  # the policy, guardrail or quota; "" when no allow policy held
    target: str  # the tool, prompt or resource (its name or URI)
    method: str
    caller: str  # identity_key
    detail: dict[str, Any] = field(default_factory=dict)


_pending: deque[Event] = deque()
_lock = threading.Lock()
_dropped = 0


def record(
    ctx: RequestContext, kind: str, rule: str, target: str, method: str, detail: dict[str, Any] | None = None
) -> None:
    global _dropped
    for sampled, percent in ctx.tenant.audit_sampling:
        if sampled == kind:
            if random.random() * 100 >= percent:
                return
            detail = {**(detail or {}), "sampled_percent": percent}
            break
    event = Event(time.time(), ctx.tenant.id, kind, rule[:64], target[:300], method[:40], identity_key(ctx),
                  detail or {})  # fmt: skip
    with _lock:
        if len(_pending) >= MAX_PENDING:
            _dropped += 1
            return
        _pending.append(event)


def take() -> tuple[list[Event], int]:
    """What gathered since the last take, and how many were dropped meanwhile."""
    global _dropped
    with _lock:
        events, dropped = list(_pending), _dropped
        _pending.clear()
        _dropped = 0
    return events, dropped


def give_back(events: list[Event]) -> None:
    """A flush that failed: its events wait for the next one, as far as there is room."""
    with _lock:
        room = MAX_PENDING - len(_pending)
        _pending.extendleft(reversed(events[:room]))
