"""Single sign-on with the platform's OpenID Connect provider (AMB-212..214), on mozilla-django-oidc.

On only when MCP_OIDC_ISSUER, MCP_OIDC_CLIENT_ID and MCP_OIDC_CLIENT_SECRET are set. The provider's
endpoints come from its discovery document, read once per process on first need and kept. The library
does the code flow with state, nonce and PKCE and checks the id_token's RS256 signature against the
provider's JWKS; we add what it leaves out (audience, issuer), take the person's claims from that
signed id_token, match or create the account (AMB-212) and hand the memberships to tenants/sso_memberships.py
(AMB-213). Every refusal is a page saying why (AMB-214), never a 500.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

import jwt
import requests
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import SuspiciousOperation
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.generic import View
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.utils import import_from_settings
from mozilla_django_oidc.views import OIDCAuthenticationCallbackView, OIDCAuthenticationRequestView

from tenants import sso_memberships
from tenants.sso_rules import email_domain

logger = logging.getLogger(__name__)

# The library's setting names, and the key of the discovery document each is read from.
DISCOVERED = {
    "OIDC_OP_AUTHORIZATION_ENDPOINT": "authorization_endpoint",
    "OIDC_OP_TOKEN_ENDPOINT": "token_endpoint",
    "OIDC_OP_USER_ENDPOINT": "userinfo_endpoint",
    "OIDC_OP_JWKS_ENDPOINT": "jwks_uri",
}
USERNAME_UNSAFE = re.compile(r"[^\w.+-]")
DISCOVERY_SECONDS = 10

_discovery: dict[str, Any] = {}
_discovery_lock = threading.Lock()


class SignInRefused(Exception):
    """A single sign-on refused, with the words the person is shown."""

    def __init__(self, reason: str, status: int = 403) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


def enabled() -> bool:
    return bool(getattr(settings, "MCP_OIDC_ENABLED", False))


def discovery() -> dict[str, Any]:
    """The provider's discovery document, fetched once per process (a failure is tried again next time)."""
    if _discovery:
        return _discovery
    with _discovery_lock:
        if not _discovery:
            issuer = settings.MCP_OIDC_ISSUER
            url = f"{issuer}/.well-known/openid-configuration"
            try:
                response = requests.get(url, timeout=DISCOVERY_SECONDS)
                response.raise_for_status()
                document = response.json()
            except (requests.RequestException, ValueError) as exc:
                raise SignInRefused(
                    f"The sign-in provider could not be reached ({type(exc).__name__}); try again later.", 502
                ) from exc
            if not isinstance(document, dict) or document.get("issuer") != issuer:
                raise SignInRefused("The sign-in provider's discovery document names another issuer.", 502)
            missing = [
                key for key in ("authorization_endpoint", "token_endpoint", "jwks_uri") if key not in document
            ]
            if missing:
                raise SignInRefused(
                    f"The sign-in provider's discovery document lacks {', '.join(missing)}.", 502
                )
            _discovery.update(document)
    return _discovery


def provider_setting(attr: str, *default: Any) -> Any:
    """mozilla-django-oidc's settings, with the provider's endpoints taken from its discovery."""
    if attr in DISCOVERED:
        return discovery().get(DISCOVERED[attr], *default)
    return import_from_settings(attr, *default)


def context(request: HttpRequest) -> dict[str, Any]:
    """Template context: the sign-in pages offer "Sign in with <provider>" when single sign-on is on."""
    return {"sso_name": settings.MCP_OIDC_PROVIDER_NAME} if enabled() else {}


def free_username(email: str) -> str:
    """A username for a new account from the address's local part, never one that exists (AMB-212)."""
    users = get_user_model().objects
    base = USERNAME_UNSAFE.sub("-", email.partition("@")[0]).strip(".-")[:140] or "user"
    name, n = base, 1
    while users.filter(username__iexact=name).exists():
        n += 1
        name = f"{base}-{n}"
    return name


class SsoBackend(OIDCAuthenticationBackend):
    """The library's backend with audience and issuer checked, claims from the id_token, our user rules."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        # Nothing is read from the provider here: Django makes a backend for every sign-in and session.
        self.UserModel = get_user_model()

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return provider_setting(attr, *args)

    def configure(self) -> None:
        """The provider's endpoints (its discovery) and our client, read when a sign-in comes back."""
        self.OIDC_OP_TOKEN_ENDPOINT = provider_setting("OIDC_OP_TOKEN_ENDPOINT")
        self.OIDC_OP_USER_ENDPOINT = provider_setting("OIDC_OP_USER_ENDPOINT", None)
        self.OIDC_OP_JWKS_ENDPOINT = provider_setting("OIDC_OP_JWKS_ENDPOINT")
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        self.OIDC_RP_CLIENT_SECRET = settings.OIDC_RP_CLIENT_SECRET
        # Only a signature by the provider's published RSA keys counts (never HS256 with our secret).
        self.OIDC_RP_SIGN_ALGO = "RS256"
        self.OIDC_RP_IDP_SIGN_KEY = None

    def authenticate(self, request: HttpRequest | None, **kwargs: Any) -> Any:
        if request is None or "nonce" not in kwargs or not enabled():
            return None  # a password sign-in: not ours
        self.configure()
        try:
            return super().authenticate(request, **kwargs)
        except requests.HTTPError as exc:
            status = exc.response.status_code if exc.response is not None else "no response"
            logger.warning("single sign-on: the token request failed: %s", status)
            raise SignInRefused(
                "The sign-in provider refused to finish the sign-in; start again.", 400
            ) from exc
        except requests.RequestException as exc:
            raise SignInRefused(
                f"The sign-in provider could not be reached ({type(exc).__name__}); try again later.", 502
            ) from exc
        except (SuspiciousOperation, jwt.InvalidTokenError) as exc:
            # The library raises the first for what it checks; PyJWT's own (expired, not yet valid) pass through.
            raise SignInRefused(f"The sign-in could not be verified: {exc}", 400) from exc
        except (KeyError, TypeError, ValueError) as exc:
            # A token answer or key set of the wrong shape (no JSON, no `keys`, a key without `kid`).
            logger.warning("single sign-on: the provider's answer could not be read: %r", exc)
            raise SignInRefused("The sign-in provider's answer could not be read; start again.", 502) from exc

    def get_user(self, user_id: Any) -> Any:
        # Django's own: a session of an account disabled since ends (the library's would keep it).
        return ModelBackend.get_user(self, user_id)

    def verify_token(self, token: Any, **kwargs: Any) -> dict[str, Any]:
        if not isinstance(token, str) or not token:
            raise SignInRefused("The sign-in provider sent no identity token.", 400)
        payload = super().verify_token(token, **kwargs)
        audience = payload.get("aud")
        audiences = audience if isinstance(audience, list) else [audience]
        if self.OIDC_RP_CLIENT_ID not in audiences:
            raise SignInRefused("The identity token was made for another application (audience).", 400)
        if payload.get("iss") != settings.MCP_OIDC_ISSUER:
            raise SignInRefused("The identity token comes from another issuer.", 400)
        return payload

    def get_userinfo(self, access_token: str, id_token: str, payload: dict[str, Any]) -> dict[str, Any]:
        # The signed id_token is the one source of claims: what it says was checked above.
        return payload

    def get_or_create_user(self, access_token: str, id_token: str, payload: dict[str, Any]) -> Any:
        claims = self.get_userinfo(access_token, id_token, payload)
        email = claims.get("email")
        if not isinstance(email, str) or not email_domain(email):
            raise SignInRefused("The sign-in provider gave no e-mail address; ask it to share one.")
        said = claims.get("email_verified")
        if said is not None and said is not True:
            raise SignInRefused(f"Your e-mail address {email} is not verified at the sign-in provider.")
        allowed = settings.MCP_OIDC_ALLOWED_DOMAINS
        if allowed and email_domain(email) not in allowed:
            raise SignInRefused(f"Addresses of {email_domain(email)} may not sign in here.")
        users = list(get_user_model().objects.filter(email__iexact=email)[:2])
        if len(users) > 1:
            raise SignInRefused(f"More than one account has the address {email}; ask an administrator.")
        if users and said is not True:
            # Linking to an existing account needs the provider's word that the address is the person's.
            raise SignInRefused(
                f"An account with {email} exists; the sign-in provider did not verify that address."
            )
        if users:
            user = users[0]
        else:
            user = get_user_model().objects.create_user(free_username(email), email=email)
            user.set_unusable_password()
            user.save(update_fields=["password"])
        if not user.is_active:
            raise SignInRefused("This account is disabled.")
        groups = claims.get(settings.MCP_OIDC_GROUPS_CLAIM)
        identity = sso_memberships.Identity(
            email=email,
            # A claim other than true was refused above: here it is true or absent, and absent counts.
            email_verified=said is None or said is True,
            groups=frozenset(g for g in groups if isinstance(g, str))
            if isinstance(groups, list)
            else frozenset(),
        )
        sso_memberships.sync_memberships(user, identity)
        return user


def _refused(request: HttpRequest, reason: str, status: int) -> HttpResponse:
    return render(request, "sso_failed.html", {"reason": reason}, status=status)


class SsoStart(OIDCAuthenticationRequestView):
    """Sends the person to the provider, remembering where they were going (`next`)."""

    def __init__(self, **kwargs: Any) -> None:
        # The library reads the provider's endpoint here; ours is found per request, where a failure is a page.
        View.__init__(self, **kwargs)

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return provider_setting(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("Single sign-on is not configured.")
        try:
            self.OIDC_OP_AUTH_ENDPOINT = provider_setting("OIDC_OP_AUTHORIZATION_ENDPOINT")
        except SignInRefused as refused:
            return _refused(request, refused.reason, refused.status)
        self.OIDC_RP_CLIENT_ID = settings.OIDC_RP_CLIENT_ID
        return super().get(request)


class SsoCallback(OIDCAuthenticationCallbackView):
    """The provider's redirect back: the library's checks, and a page saying why when it fails."""

    @staticmethod
    def get_settings(attr: str, *args: Any) -> Any:
        return provider_setting(attr, *args)

    def get(self, request: HttpRequest) -> HttpResponse:
        if not enabled():
            raise Http404("Single sign-on is not configured.")
        if request.GET.get("error"):
            super().get(request)  # forgets the state
            said = str(request.GET.get("error_description") or request.GET["error"])[:200]
            return _refused(request, f"The sign-in provider said: {said}", 400)
        try:
            return super().get(request)
        except SignInRefused as refused:
            return _refused(request, refused.reason, refused.status)
        except SuspiciousOperation:
            return _refused(request, "This sign-in link was already used or is not yours; start again.", 400)

    def login_failure(self) -> HttpResponse:
        return _refused(
            self.request, "The sign-in did not finish (expired, or started in another browser).", 400
        )
