"""The page an invitation's link opens (AMB-106): see it, then accept it signed in or with a new account.

Accepting is a POST (mail scanners open links). A link that is not ours is a 404 page; an expired,
used or revoked one a 410 page saying which; never a 500.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from django import forms
from django.contrib.auth import get_user_model, login
from django.contrib.auth.forms import BaseUserCreationForm
from django.db import transaction
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods

from tenants import access, invitations
from tenants.models import Invitation, Role

GONE_STATUS = {"invalid": 404, "expired": 410, "revoked": 410, "accepted": 410}
# Both backends would take the new account; django-axes' only counts failures.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


class AccountForm(BaseUserCreationForm):
    """A new account for the invited address: username and password, the e-mail fixed by the invitation."""

    def __init__(self, *args: Any, invitation: Invitation, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.invitation = invitation
        self.instance.email = invitation.email

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        if get_user_model().objects.filter(email__iexact=self.invitation.email).exists():
            raise forms.ValidationError(
                f"An account with the address {self.invitation.email} exists already: sign in with it instead."
            )
        return data


def _context(request: HttpRequest, link: invitations.Link, **extra: Any) -> dict[str, Any]:
    invitation = link.invitation
    user = request.user
    return {
        "status": link.status,
        "invitation": invitation,
        "tenant": invitation.tenant if invitation else None,
        "signed_in": user.is_authenticated,
        "matches": user.is_authenticated and invitation is not None
        and invitations.same_address(user.email, invitation.email),
        "sign_in_url": f"{reverse('oauth-login')}?{urlencode({'next': request.path})}",
        "front_url": reverse("front"),
        **extra,
    }  # fmt: skip


def _accepted_by_this_person(request: HttpRequest, link: invitations.Link) -> bool:
    invitation = link.invitation
    return (
        link.status == Invitation.Status.ACCEPTED
        and invitation is not None
        and request.user.is_authenticated
        and invitation.accepted_by_id == request.user.pk
    )


def _page(request: HttpRequest, link: invitations.Link, status: int = 200, **extra: Any) -> HttpResponse:
    return render(request, "invitations/accept.html", _context(request, link, **extra), status=status)


@never_cache
@require_http_methods(["GET", "POST"])
def invitation_page(request: HttpRequest, token: str) -> HttpResponse:
    link = invitations.resolve(token)
    if _accepted_by_this_person(request, link) and link.invitation is not None:
        # Where the acceptance leads: the person's own view of a used link says what they joined.
        role = access.role_of(request.user, link.invitation.tenant)
        return _page(request, link, joined=True, role=Role(role).label.lower() if role else "")
    if link.status != Invitation.Status.PENDING:
        return _page(request, link, GONE_STATUS[link.status])
    invitation = link.invitation
    assert invitation is not None
    form = AccountForm(invitation=invitation)
    if request.method == "POST":
        try:
            if request.user.is_authenticated:
                invitations.accept(invitation, request.user)
                return redirect(request.path)
            form = AccountForm(request.POST, invitation=invitation)
            if form.is_valid():
                with transaction.atomic():
                    user = form.save()
                    invitations.accept(invitation, user)
                login(request, user, backend=MODEL_BACKEND)
                return redirect(request.path)
        except invitations.WrongAccount as exc:
            return _page(request, link, 403, problem=exc.message)
        except invitations.NotPending:
            return _page(request, invitations.resolve(token), 410)
    return _page(request, link, form=form)
