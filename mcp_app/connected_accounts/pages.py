"""The person's pages of connected accounts: start, the provider's callback, done, "My connections" (AMB-209, AMB-211).

The start page takes the signed link the vault made (vault.start_link) and needs the browser signed
in as the user the link was made for: anyone else sees whom it is for and a sign-in link, never a
way to connect their account to another user. Pressing Connect puts a flow in the browser's session
(a random `state`, the PKCE verifier, the user, the tenant, the provider, the elicitation id) and
sends the browser to the provider. The callback takes that flow out of the session by its state,
once: a replayed state, another browser's, or one of another user finds nothing and is refused.
A tenant, provider or connection the person may not see answers exactly as a missing one: 404.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

from asgiref.sync import async_to_sync
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_deny
from django.views.decorators.http import require_http_methods, require_POST

from mcp_app.connected_accounts import provider_http, vault
from mcp_app.handlers import url_forms
from mcp_app.handlers.secrets import SecretsError
from mcp_app.models.connections import Connection, Provider
from tenants.models import Membership, Tenant

FLOWS = "mcp_connection_flows"
# Flows a session keeps at once (a person who starts many and finishes none drops the oldest).
MAX_FLOWS = 8


def _member(request: HttpRequest) -> User:
    """The signed-in person (these views are login_required: never anonymous)."""
    if isinstance(request.user, AnonymousUser):
        raise PermissionDenied
    return request.user


def _find(slug: str, name: str) -> Provider | None:
    return (
        Provider.objects.select_related("tenant")
        .filter(tenant__slug=slug, tenant__is_active=True, name=name)
        .first()
    )


def _provider(slug: str, name: str) -> Provider:
    provider = _find(slug, name)
    if provider is None:
        raise Http404("No such provider.")
    return provider


def _intended(tenant: Tenant, mark: str) -> str:
    """The username of the member the link was made for (the link holds only an HMAC of the id)."""
    for user_id, username in Membership.objects.filter(tenant=tenant).values_list(
        "user_id", "user__username"
    ):
        if url_forms.user_mark(user_id) == mark:
            return str(username)
    return ""


@never_cache
@xframe_options_deny
@require_http_methods(["GET", "POST"])
def start(request: HttpRequest, slug: str, provider_name: str) -> HttpResponse:
    link = vault.read_link(request.GET.get("link", ""))
    provider = _find(slug, provider_name)
    # A missing provider, another tenant's and a bad link look alike.
    if (
        provider is None
        or link is None
        or link.get("t") != provider.tenant_id
        or link.get("p") != provider.name
    ):
        return render(request, "connections/start.html", {"gone": True}, status=404)
    context: dict[str, Any] = {"provider": provider, "tenant": provider.tenant}
    signed_in = request.user.is_authenticated
    if not signed_in or request.user.pk is None or url_forms.user_mark(request.user.pk) != link.get("u"):
        context.update(
            intended=_intended(provider.tenant, str(link.get("u"))),
            login_url=f"{reverse('oauth-login')}?{urlencode({'next': request.get_full_path()})}",
            other=signed_in,
        )
        return render(request, "connections/start.html", context, status=403 if signed_in else 200)
    if request.method == "GET":
        return render(request, "connections/start.html", context)
    try:
        client = vault.client_of(provider)
        state = secrets.token_urlsafe(32)
        verifier = secrets.token_urlsafe(64)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        target = async_to_sync(provider_http.authorize_url)(
            client, redirect_uri=provider.callback_url(), state=state, challenge=challenge
        )
    except (provider_http.ProviderRefused, SecretsError) as exc:
        problem = getattr(exc, "message", f"{provider}: its client secret must be entered again by an owner.")
        return render(request, "connections/start.html", {**context, "problem": problem}, status=502)
    flows = dict(request.session.get(FLOWS, {}))
    while len(flows) >= MAX_FLOWS:
        flows.pop(next(iter(flows)))
    flows[state] = {
        "verifier": verifier,
        "user": request.user.pk,
        "tenant": provider.tenant_id,
        "provider": provider.pk,
        "elicitation": link.get("e"),
    }
    request.session[FLOWS] = flows
    return redirect(target)


@never_cache
@xframe_options_deny
def callback(request: HttpRequest, slug: str, provider_name: str) -> HttpResponse:
    provider = _provider(slug, provider_name)
    context: dict[str, Any] = {"provider": provider, "tenant": provider.tenant}
    flows = dict(request.session.get(FLOWS, {}))
    flow = flows.pop(request.GET.get("state", ""), None)
    request.session[FLOWS] = flows  # taken out whatever follows: a state is good once
    if (
        flow is None
        or not request.user.is_authenticated
        or flow["user"] != request.user.pk
        or flow["provider"] != provider.pk
    ):
        return render(request, "connections/done.html", {**context, "refused": True}, status=400)
    if request.GET.get("error") or not request.GET.get("code"):
        return render(request, "connections/done.html", {**context, "declined": True}, status=400)
    try:
        client = vault.client_of(provider)
        # A mix-up defense (RFC 9207): the code must come from the server we sent the person to.
        found = async_to_sync(provider_http.endpoints)(client)
        if why := found.iss_problem(request.GET.get("iss")):
            raise provider_http.ProviderRefused(f"{provider}: {why}.")
        tokens = async_to_sync(provider_http.exchange_code)(
            client,
            code=request.GET["code"],
            redirect_uri=provider.callback_url(),
            verifier=flow["verifier"],
        )
    except (provider_http.ProviderRefused, SecretsError) as exc:
        problem = getattr(exc, "message", f"{provider}: its client secret must be entered again by an owner.")
        return render(request, "connections/done.html", {**context, "problem": problem}, status=502)
    vault.save_connection(provider, request.user, tokens)
    if flow.get("elicitation"):
        vault.note_connected(flow["elicitation"], provider.name)
    return redirect("connection-done", slug=slug, provider_name=provider.name)


@never_cache
@login_required(login_url="oauth-login")
def done(request: HttpRequest, slug: str, provider_name: str) -> HttpResponse:
    provider = _provider(slug, provider_name)
    if not Connection.objects.filter(provider=provider, user=_member(request)).exists():
        raise Http404("No such connection.")
    return render(
        request, "connections/done.html", {"provider": provider, "tenant": provider.tenant, "ok": True}
    )


@never_cache
@login_required(login_url="oauth-login")
def mine(request: HttpRequest) -> HttpResponse:
    """The signed-in person's connections in every tenant they may see (the tenant wall scopes the query)."""
    rows = (
        Connection.objects.filter(user=_member(request))
        .select_related("provider", "tenant")
        .order_by("tenant__slug", "provider__name")
    )
    return render(request, "connections/mine.html", {"connections": rows, "gone": request.GET.get("gone")})


@never_cache
@login_required(login_url="oauth-login")
@require_POST
def disconnect(request: HttpRequest, connection_id: int) -> HttpResponse:
    connection = (
        Connection.objects.select_related("provider", "tenant", "user")
        .filter(pk=connection_id, user=_member(request))
        .first()
    )
    if connection is None:
        raise Http404("No such connection.")
    name = str(connection.provider)
    async_to_sync(vault.disconnect)(connection)
    return redirect(f"{reverse('my-connections')}?gone={name}")
