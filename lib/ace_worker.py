"""The JSON editor's syntax worker, served from our own origin so the Content-Security-Policy allows it.

JSONEditor (django-json-widget's build) hands Ace its JSON worker as a `data:` URL; Ace starts a blob
worker that `importScripts` it, and our `script-src 'self' 'nonce-…'` (inherited by the blob worker)
blocks a `data:` script: a console error on every page with an editor in code mode, and no syntax
marks. Allowing `data:` scripts would let any injected markup run code, so the worker is served here
instead, read once from the installed build (no copy to keep in step with the package), and
json_editor.js points Ace at this URL (AMB-233).
"""

from __future__ import annotations

import base64
import re
from functools import cache

from django.contrib.staticfiles import finders
from django.http import Http404, HttpRequest, HttpResponse
from django.views.decorators.cache import cache_control
from django.views.decorators.http import require_safe

BUILD = "dist/jsoneditor.min.js"
# The one data: URL in the build: Ace's JSON worker (`ace.config.setModuleUrl("ace/mode/json_worker", …)`).
WORKER = re.compile(r'"data:application/javascript;base64,([A-Za-z0-9+/=]+)"')


@cache
def worker_source() -> bytes | None:
    """The worker's JavaScript, decoded from the build; None when the build has no such worker."""
    path = finders.find(BUILD)
    if not path:
        return None
    with open(path, encoding="utf-8") as build:
        found = WORKER.search(build.read())
    return base64.b64decode(found.group(1)) if found else None


@require_safe
@cache_control(max_age=86_400, public=True)
def json_worker(request: HttpRequest) -> HttpResponse:
    source = worker_source()
    if source is None:
        raise Http404("The JSON editor's worker is not in this build.")
    return HttpResponse(source, content_type="application/javascript; charset=utf-8")
