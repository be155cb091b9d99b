"""What the federation tests share: a Target for a test upstream, and a wait for the upstream to see something."""

from __future__ import annotations

import anyio

from mcp_app.federation import Target
from tests.upstreams.servers import UpstreamServer

SEE_SECONDS = 10.0


def target_for(server: UpstreamServer, **options: object) -> Target:
    """A Target for ``server`` (the upstream id is its port: each server its own upstream)."""
    values: dict[str, object] = {"timeout_seconds": 10.0, **options}
    return Target(tenant_id=1, upstream_id=server.port, url=server.url, **values)


async def upstream_sees(server: UpstreamServer, key: str, value: object) -> None:
    """Wait (bounded) until the upstream's /_stats list ``key`` holds ``value``."""
    with anyio.fail_after(SEE_SECONDS):
        while value not in server.stats()[key]:
            await anyio.sleep(0.05)
