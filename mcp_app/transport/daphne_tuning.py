"""Serving-process tuning: Twisted's form parsing switched off, and the startup heap frozen.

Form parsing:

Twisted's `Request.requestReceived` parses the Content-Type of every POST through the `email`
package (`EmailMessage`, ~9% of a tools/call under py-spy) to decide whether to decode a form
body into `request.args`. Daphne never reads `args`: it hands the raw body to the application,
which parses forms itself (Django). So the parse is pure cost, and for multipart bodies it also
holds a second copy of the upload in memory.
"""

from __future__ import annotations

import functools
import gc
from typing import Any

from daphne.http_protocol import WebRequest


def disable_form_parsing() -> bool:
    """Make Daphne's requests skip Twisted's form parsing (idempotent); True once installed."""
    original = WebRequest.__init__
    if getattr(original, "_mcp_no_form_parsing", False):
        return True

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    __init__._mcp_no_form_parsing = True  # type: ignore[attr-defined]
    WebRequest.__init__ = __init__  # type: ignore[method-assign]
    return True


def freeze_startup_heap() -> int:
    """Move every object alive now (Django, the project's modules) out of the collector's sight.

    Measured under load on Daphne (bench/run.py --only-modern --profile): it keeps each finished
    request's application instance until a once-a-second sweep, so enough objects reach the oldest
    generation to start a full collection about once a second, 90-120 ms that scans the whole Django
    heap and frees nothing: all 16 requests in flight wait, which is the p99 tail. Frozen objects are
    never scanned; with them frozen those pauses measured 1-20 ms. Returns how many are frozen.
    """
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
