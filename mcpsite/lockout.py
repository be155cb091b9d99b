"""The page a throttled sign-in gets (django-axes' AXES_LOCKOUT_CALLABLE): 429 with Retry-After."""

from __future__ import annotations

from typing import Any

from axes.helpers import get_cool_off
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render


def locked_out(request: HttpRequest, response: Any = None, credentials: Any = None) -> HttpResponse:
    cool_off = get_cool_off(request)
    minutes = max(1, round(cool_off.total_seconds() / 60)) if cool_off else None
    page = render(request, "locked_out.html", {"minutes": minutes}, status=429)
    if cool_off:
        page["Retry-After"] = str(int(cool_off.total_seconds()))
    return page
