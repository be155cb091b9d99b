"""The demo's own HTTP endpoints: what the `fetch_json` and `stream_count` demo tools post to, so the
http handler kind (and its streamed replies) can be tried end to end without any outside service."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

from django.http import HttpRequest, HttpResponse, JsonResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from lib import nesting

# The http handler sends at most what a tool's arguments hold; anything larger is not a demo call.
MAX_ECHO_BYTES = 64 * 1024
# A public endpoint: one call holds a connection for at most STREAM_MAX_N * STREAM_MAX_DELAY seconds.
STREAM_MAX_N, STREAM_MAX_DELAY = 20, 1.0


@csrf_exempt  # a machine endpoint: no browser session, no cookies, nothing to forge
@require_POST
def echo(request: HttpRequest) -> HttpResponse:
    """Answer `{"echo": <the JSON body>}`; 400 for a body that is not JSON, 413 when too large."""
    if len(request.body) > MAX_ECHO_BYTES:
        return JsonResponse({"error": f"The body is over {MAX_ECHO_BYTES} bytes."}, status=413)
    try:
        received = nesting.loads(request.body or b"null")
    except ValueError:
        return JsonResponse({"error": "The body is not JSON."}, status=400)
    return JsonResponse({"echo": received, "from": "the demo echo endpoint of this platform"})


def _count_arguments(body: bytes) -> tuple[int, float] | None:
    try:
        arguments = nesting.loads(body or b"{}")
    except ValueError:
        return None
    if not isinstance(arguments, dict):
        return None
    n, delay = arguments.get("n", 5), arguments.get("delay", 0.3)
    numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (n, delay))
    if not numbers or n != int(n) or not 1 <= n <= STREAM_MAX_N or not 0 <= delay <= STREAM_MAX_DELAY:
        return None
    return int(n), float(delay)


async def _count_events(n: int, delay: float) -> AsyncIterator[str]:
    def line(**event: Any) -> str:
        return json.dumps(event) + "\n"

    for i in range(1, n + 1):
        await asyncio.sleep(delay)
        yield line(type="progress", progress=i, total=n, message=f"Counted {i} of {n}")
        yield line(type="log", level="info", data=f"count {i} of {n}", logger="demo/stream")
    text = f"Counted to {n}."
    yield line(type="result", content=[{"type": "text", "text": text}], structuredContent={"count": n})


@csrf_exempt  # a machine endpoint, as echo
@require_POST
async def stream(request: HttpRequest) -> HttpResponseBase:
    """Count to `n` (JSON body `{"n", "delay"}`), one event a step: the http kind's streamed reply.

    Each line is a JSON event (handlers/http_stream.py): progress and a log message per step, then
    the result. An async iterator, so that Daphne sends each line as it is made.
    """
    arguments = _count_arguments(request.body)
    if arguments is None:
        message = f'Send {{"n": 1..{STREAM_MAX_N}, "delay": 0..{STREAM_MAX_DELAY:g}}}.'
        return JsonResponse({"error": message}, status=400)
    return StreamingHttpResponse(_count_events(*arguments), content_type="application/x-ndjson")
