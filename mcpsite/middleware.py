"""The two places where our deployment differs from Django's stock middleware (AMB-110, AMB-111).

`HttpsOnlyWrites` stands before Django's SecurityMiddleware: where SECURE_SSL_REDIRECT sends a
plain-HTTP request to https, a method other than GET or HEAD is refused instead (403, JSON naming the
https URL). A redirected POST arrives as a GET or without its body, and a 307/308 would teach a
client to keep sending its tokens in clear before each redirect.

`CommonMiddleware` is Django's, minus the host check for MCP_CLUSTER_PATHS (the probes and /metrics):
the kubelet sends the pod's IP as Host, which ALLOWED_HOSTS refuses, and those views build no URL
from Host, which is all the check guards.
"""

from __future__ import annotations

import re

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponsePermanentRedirect, JsonResponse
from django.middleware.common import CommonMiddleware as DjangoCommonMiddleware
from django.utils.deprecation import MiddlewareMixin

SAFE_METHODS = frozenset({"GET", "HEAD"})


def _exempt(request: HttpRequest, patterns: list[str]) -> bool:
    path = request.path.lstrip("/")
    return any(re.search(pattern, path) for pattern in patterns)


class HttpsOnlyWrites(MiddlewareMixin):
    """Refuse a plain-HTTP request other than GET/HEAD where Django would redirect it to https."""

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        if (
            not settings.SECURE_SSL_REDIRECT
            or request.method in SAFE_METHODS
            or request.is_secure()
            or _exempt(request, settings.SECURE_REDIRECT_EXEMPT)
        ):
            return None
        url = f"{settings.MCP_PUBLIC_URL}{request.get_full_path()}"
        return JsonResponse(
            {
                "error": "invalid_request",
                "error_description": f"This server accepts {request.method} requests over https only: "
                f"send it to {url} (nothing was done).",
            },
            status=403,
        )


class CommonMiddleware(DjangoCommonMiddleware):
    """Django's CommonMiddleware; the probes and /metrics skip its host check (AMB-111)."""

    def process_request(self, request: HttpRequest) -> HttpResponsePermanentRedirect | None:
        if _exempt(request, settings.MCP_CLUSTER_PATHS):
            return None
        return super().process_request(request)
