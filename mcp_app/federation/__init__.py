"""Client of upstream MCP servers: discover what one offers, call its tools (the official SDK's client).

Sits beside infra/: imports core, infra, the `mcp` SDK and httpx2; never models, catalog, handlers,
protocol, transport or admin. The `upstream` handler kind and the upstreams service build on it.

Connections are kept per event loop (docs/decisions/federation.md, AMB-156). A serving process's loop
lives as long as the process (Daphne's drain closes them); code that runs on a loop of its own for a
moment (`async_to_sync` in a management command) awaits `close_all()` before that loop ends.
"""

from mcp_app.federation.client import call_tool, complete, discover, get_prompt, read_resource
from mcp_app.federation.errors import UpstreamBusy, UpstreamError, UpstreamUnavailable
from mcp_app.federation.pool import close_all
from mcp_app.federation.questions import Asking, Round
from mcp_app.federation.target import SSE, STREAMABLE_HTTP, ClientCredentials, Offering, Target

__all__ = [
    "Asking",
    "ClientCredentials",
    "Offering",
    "Round",
    "SSE",
    "STREAMABLE_HTTP",
    "Target",
    "UpstreamBusy",
    "UpstreamError",
    "UpstreamUnavailable",
    "call_tool",
    "close_all",
    "complete",
    "discover",
    "get_prompt",
    "read_resource",
]
