"""The demo's own HTTP endpoint: what the `fetch_json` demo tool posts to, so the http handler kind can
be tried end to end without any outside service."""

from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

# The http handler sends at most what a tool's arguments hold; anything larger is not a demo call.
MAX_ECHO_BYTES = 64 * 1024


@csrf_exempt  # a machine endpoint: no browser session, no cookies, nothing to forge
@require_POST
def echo(request: HttpRequest) -> HttpResponse:
    """Answer `{"echo": <the JSON body>}`; 400 for a body that is not JSON, 413 when too large."""
    if len(request.body) > MAX_ECHO_BYTES:
        return JsonResponse({"error": f"The body is over {MAX_ECHO_BYTES} bytes."}, status=413)
    try:
        received = json.loads(request.body or b"null")
    except ValueError:
        return JsonResponse({"error": "The body is not JSON."}, status=400)
    return JsonResponse({"echo": received, "from": "the demo echo endpoint of this platform"})
