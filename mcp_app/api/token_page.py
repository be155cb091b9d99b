"""`/api-tokens`: a signed-in person makes and revokes their own `manage` tokens for /api/v1/.

The same tokens `manage.py api_token` issues (api/tokens.py): the value is shown once, right after it
is made (with a copy button), and only its hash is kept. Each has a name, its expiry and its last use
(AMB-237). A token acts with its owner's roles. Revoking deletes it at once (the resource server's
cache follows the deletion). Both are in the audit trail.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseBadRequest
from django.shortcuts import redirect, render
from django.urls import reverse, reverse_lazy
from django.utils import timezone
from oauth2_provider.models import get_access_token_model

from audit.models import Action
from audit.trail import record
from mcp_app.api.tokens import NAME_LENGTH, api_client, issue_manage_token

DAYS = (7, 30, 90, 365)


def _mine(user: Any) -> Any:
    return (
        get_access_token_model()
        .objects.filter(user=user, application=api_client(), expires__gt=timezone.now())
        .select_related("api_token")
    )


@login_required(login_url=reverse_lazy("oauth-login"))
def api_tokens(request: HttpRequest) -> HttpResponse:
    made = None
    if request.method == "POST":
        action = request.POST.get("action")
        if action == "create":
            try:
                days = int(request.POST.get("days", "30"))
            except ValueError:
                days = 0
            if days not in DAYS:
                return HttpResponseBadRequest(
                    f"Choose how long the token lasts: {', '.join(map(str, DAYS))} days."
                )
            name = request.POST.get("name", "").strip()[:NAME_LENGTH]
            made = issue_manage_token(request.user, days, name)
            record(
                Action.TOKEN_ISSUED,
                request=request,
                client_id=api_client().client_id,
                detail={"days": days, "name": name},
            )
        elif action == "revoke":
            token = _mine(request.user).filter(pk=request.POST.get("token", "").strip() or 0).first()
            if token is None:
                raise Http404("No such token of yours.")
            token.delete()
            record(
                Action.TOKEN_REVOKED,
                request=request,
                client_id=api_client().client_id,
                detail={"token": token.pk},
            )
            return redirect(reverse("api-tokens"))
        else:
            return HttpResponseBadRequest("Unknown action: create or revoke a token.")
    tokens = _mine(request.user).order_by("-created")
    context = {"tokens": tokens, "made": made, "days": DAYS, "docs_url": reverse("api:docs")}
    return render(request, "api_tokens.html", context)
