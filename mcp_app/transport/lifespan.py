"""The ASGI lifespan of a server that sends one (uvicorn): the upstream watcher starts with the process
and stops before it exits, with the process's upstream connections (AMB-180). Daphne sends no lifespan;
there daphne_tuning starts the watcher with the reactor and its drain stops it."""

from __future__ import annotations

from typing import Any

from mcp_app import federation
from mcp_app.upstreams import watcher


async def lifespan(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            watcher.start()
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await watcher.stop()
            await federation.close_all()
            await send({"type": "lifespan.shutdown.complete"})
            return
