"""`record`: the one way to write an audit event, and the request it belongs to.

An event is written after the surrounding transaction commits (`transaction.on_commit`, robust): an
action rolled back leaves no event, and a failure to write one is logged and never breaks the action.
Model signals give no request, so `RequestMiddleware` keeps the current one in a context variable for
them: its user is the actor (DRF sets the API's token user on it too) and its REMOTE_ADDR the address.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import HttpRequest, HttpResponse

from audit.models import AuditEvent
from tenants import wall
from tenants.models import Tenant

logger = logging.getLogger("audit")

_current_request: ContextVar[HttpRequest | None] = ContextVar("audit_request", default=None)

# Keys never kept in an event's detail, whatever a caller passes (AMB-76).
SECRET_KEYS = frozenset(
    {"password", "secret", "client_secret", "token", "access_token", "refresh_token", "code", "values"}
)
MAX_TEXT = 500


class RequestMiddleware:
    """Keeps the request being served where signal receivers can find it (`current_request`)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _current_request.set(request)
        try:
            return self.get_response(request)
        finally:
            _current_request.reset(token)


def current_request() -> HttpRequest | None:
    return _current_request.get()


def _address(request: HttpRequest | None) -> str | None:
    raw = (request.META.get("REMOTE_ADDR") or "") if request is not None else ""
    try:
        return str(ipaddress.ip_address(raw.strip()))
    except ValueError:
        return None


def _clean(value: Any) -> Any:
    """JSON-safe detail without secret-bearing keys, long texts cut."""
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items() if str(k).lower() not in SECRET_KEYS}
    if isinstance(value, list | tuple | set | frozenset):
        items = sorted(value, key=str) if isinstance(value, set | frozenset) else value
        return [_clean(v) for v in items]
    if value is None or isinstance(value, bool | int | float):
        return value
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def record(
    action: str,
    *,
    request: HttpRequest | None = None,
    actor: Any = None,
    tenant: Tenant | None = None,
    client_id: str = "",
    detail: dict[str, Any] | None = None,
    actor_username: str = "",
) -> None:
    """Record one event once the surrounding transaction commits; never raises.

    request: defaults to the request being served (none in a command or a worker: no address);
    actor: defaults to the request's signed-in user; actor_username: a name without a user (a failed
    sign-in's attempted username).
    """
    try:
        request = request if request is not None else current_request()
        if actor is None and request is not None:
            user = getattr(request, "user", None)
            actor = user if user is not None and user.is_authenticated else None
        fields = {
            "action": action,
            "actor_id": actor.pk if actor is not None else None,
            "actor_username": (actor.get_username() if actor is not None else actor_username)[:150],
            "tenant_id": tenant.pk if tenant is not None else None,
            "tenant_slug": tenant.slug if tenant is not None else "",
            "client_id": (client_id or "")[:2048],
            "source_address": _address(request),
            "detail": _clean(detail or {}),
        }
    except Exception:
        logger.exception("audit event %s not recorded", action)
        return
    transaction.on_commit(lambda: _write(fields), robust=True)


def _write(fields: dict[str, Any]) -> None:
    try:
        # The user or tenant may be gone by commit time (deleted in the same transaction): keep the text.
        if fields["tenant_id"] and not Tenant.objects.filter(pk=fields["tenant_id"]).exists():
            fields["tenant_id"] = None
        if fields["actor_id"] and not get_user_model().objects.filter(pk=fields["actor_id"]).exists():
            fields["actor_id"] = None
        # Written from any request or job, about any tenant: the trail is appended to across the wall.
        with wall.bypass("audit trail append"):
            AuditEvent.objects.create(**fields)
    except Exception:
        logger.exception("audit event %s not recorded", fields.get("action"))
