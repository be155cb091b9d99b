"""Site-wide pages that are no app's own."""

from __future__ import annotations

from urllib.parse import urlencode

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils.http import url_has_allowed_host_and_scheme


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """Django's CSRF_FAILURE_VIEW: say in words why the form was refused and how to go on."""
    # The page the form came from, reloaded, gives a fresh token; a `next` carried by the form keeps the
    # authorization request the person was in the middle of.
    nxt = request.POST.get("next", "") if request.method == "POST" else ""
    if nxt and url_has_allowed_host_and_scheme(nxt, allowed_hosts={request.get_host()}):
        again = f"{request.path}?{urlencode({'next': nxt})}" if request.path.endswith("/login") else nxt
    else:
        again = request.get_full_path()
    return render(request, "csrf_failure.html", {"again": again, "reason": reason}, status=403)
