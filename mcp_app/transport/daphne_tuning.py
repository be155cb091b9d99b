"""Serving-process tuning: Twisted's form parsing switched off, the startup heap frozen, finished requests
forgotten at once (AMB-196), a graceful drain before Daphne's shutdown (streams/drain.py), secrets kept
out of Daphne's access log, and the upstream watcher started with the reactor (upstreams/watcher.py;
Daphne sends no ASGI lifespan).

Form parsing:

Twisted's `Request.requestReceived` parses the Content-Type of every POST through the `email`
package (`EmailMessage`, ~9% of a tools/call under py-spy) to decide whether to decode a form
body into `request.args`. Daphne never reads `args`: it hands the raw body to the application,
which parses forms itself (Django). So the parse is pure cost, and for multipart bodies it also
holds a second copy of the upload in memory.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import sys
from typing import Any

from daphne.access import AccessLogGenerator
from daphne.http_protocol import WebRequest
from django.conf import settings
from twisted.internet import defer, tcp

from mcp_app import federation
from mcp_app.infra.redaction import redact_path
from mcp_app.streams import drain
from mcp_app.upstreams import watcher

# The Daphne these patches were written against (pyproject.toml pins it), and the source of each function
# they wrap or mirror (`_reap` does what application_checker does), SHA-256 of its `def` as the installed
# file has it: tests/transport/test_daphne_pin.py fails when an upgrade changes any of them (AMB-330).
DAPHNE_VERSION = "4.2.3"
PATCHED_SOURCES = {
    "daphne.http_protocol:WebRequest.__init__": "3df71546c31d6d835c00ad352ec90aa3ee96d395c66370a4fda6d7e00d7bc5d2",
    "daphne.access:AccessLogGenerator.__call__": "cdd3711d038d24bc2b9aeac8bf529d07d1fcd408efae9ecc484402adc13809b0",
    "daphne.server:Server.kill_all_applications": "e1553fe607cdb1941b6b18f988e7a05f7177199d5d50474064859af7fba5961b",
    "daphne.server:Server.create_application": "e440a9663047ea8568dbb2e68ec6dae0a110d4f82e70a16712e84d7acccbeffa",
    "daphne.server:Server.protocol_disconnected": "7c05736186760b4008a708cd151eaf7ffc0d33985d8c5035bee6b2b20b3435c6",
    "daphne.server:Server.application_checker": "1721c6d6833e7f86ce1dd4c29d8b0ff49860233534f3f306e130ea2d6360331c",
}


def disable_form_parsing() -> bool:
    """Make Daphne's requests skip Twisted's form parsing (idempotent); True once installed."""
    original = WebRequest.__init__
    if getattr(original, "_mcp_no_form_parsing", False):
        return True

    @functools.wraps(original)
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("parsePOSTFormSubmission", False)
        original(self, *args, **kwargs)

    vars(__init__)["_mcp_no_form_parsing"] = True  # the wrapper's mark (a function takes attributes)
    WebRequest.__init__ = __init__
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


async def _drain_then_close_upstreams() -> None:
    # First, and quick: the leases are released, so another process listens to these upstreams now.
    await watcher.stop()
    await drain.drain(settings.MCP_SHUTDOWN_GRACE_SECONDS)
    # The calls are done: end this process's upstream sessions (DELETE) rather than drop them (AMB-156).
    await federation.close_all()


def drain_before_shutdown() -> bool:
    """Make Daphne drain (stop listening, let calls finish, end streams, close upstream sessions) before it
    cancels what is left.

    Only where Daphne serves (its server module is loaded, with the reactor it installed): importing it
    elsewhere (uvicorn) would install a Twisted reactor in a process that has none. False then.
    """
    daphne_server = sys.modules.get("daphne.server")
    if daphne_server is None:
        return False
    server = daphne_server.Server
    original = server.kill_all_applications
    if getattr(original, "_mcp_drains", False):
        return True

    @functools.wraps(original)
    def kill_all_applications(self: Any) -> Any:
        reactor = sys.modules["twisted.internet.reactor"]
        for reader in list(reactor.getReaders()):
            if isinstance(reader, tcp.Port):
                reader.stopListening()  # new connections go to another process
        waited = defer.Deferred.fromFuture(asyncio.ensure_future(_drain_then_close_upstreams()))
        waited.addBoth(lambda _: original(self))
        return waited

    vars(kill_all_applications)["_mcp_drains"] = True
    server.kill_all_applications = kill_all_applications
    return True


def reap_finished_requests_at_once() -> bool:
    """Make Daphne forget a request as soon as its application has finished and its response is written,
    not at its once-a-second sweep (`Server.application_checker`); False where Daphne does not serve.

    Each request's protocol object, application task, queue and consumer used to live until the sweep,
    so every collection of the young generations meanwhile promoted them, and a full collection ran
    about once a second, scanning every long-lived object for 10-20 ms (measured with a gc callback
    under one client on the 2026-07-28 wire: 7 full and 81 middle collections over 6,000 calls, the
    full ones the p99.9 and the middle ones, 1.1-1.8 ms each, the p99). An application that ended in
    an exception, or one still running, is left to the sweep, which logs the one and times out the
    other as before.
    """
    daphne_server = sys.modules.get("daphne.server")
    if daphne_server is None:
        return False
    server = daphne_server.Server
    create, disconnected = server.create_application, server.protocol_disconnected
    if getattr(create, "_mcp_reaps", False):
        return True

    @functools.wraps(create)
    def create_application(self: Any, protocol: Any, scope: Any) -> Any:
        queue = create(self, protocol, scope)
        instance = self.connections.get(protocol, {}).get("application_instance")
        if instance is not None:
            instance.add_done_callback(lambda _done: _reap(self, protocol))
        return queue

    @functools.wraps(disconnected)
    def protocol_disconnected(self: Any, protocol: Any) -> None:
        disconnected(self, protocol)
        _reap(self, protocol)

    vars(create_application)["_mcp_reaps"] = True
    server.create_application = create_application
    server.protocol_disconnected = protocol_disconnected
    return True


def _reap(server: Any, protocol: Any) -> None:
    """What the sweep does for a request whose application finished cleanly, done now."""
    details = server.connections.get(protocol)
    if details is None:
        return
    instance = details.get("application_instance")
    if instance is not None:
        if not instance.done() or (not instance.cancelled() and instance.exception() is not None):
            return
        del details["application_instance"]
    if "disconnected" in details:
        del server.connections[protocol]


def watch_upstreams_when_serving() -> bool:
    """Start this process's upstream watcher once Daphne's loop runs (AMB-180); False where Daphne does
    not serve (uvicorn starts it from the ASGI lifespan instead: transport/lifespan.py)."""
    daphne_server = sys.modules.get("daphne.server")
    if daphne_server is None:
        return False
    # Runs when the reactor starts the loop, inside it: the watcher's tasks belong to the serving loop.
    daphne_server.twisted_loop.call_soon(watcher.start)
    return True


def redact_access_log() -> bool:
    """Make Daphne's access log keep no query value (infra/redaction.py: a token a client put in the
    URL, a legacy session id); idempotent, True once installed."""
    original = AccessLogGenerator.__call__
    if getattr(original, "_mcp_redacts", False):
        return True

    @functools.wraps(original)
    def __call__(self: Any, protocol: Any, action: Any, details: dict[str, Any]) -> Any:
        if isinstance(details.get("path"), str):
            details = {**details, "path": redact_path(details["path"])}
        return original(self, protocol, action, details)

    vars(__call__)["_mcp_redacts"] = True
    AccessLogGenerator.__call__ = __call__
    return True
