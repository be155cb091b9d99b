"""A real SDK upstream (tests/upstreams/servers.py) for the tests of publishing, pinning and calling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from asgiref.sync import async_to_sync

from mcp_app import federation
from mcp_app.models import Upstream
from tests.e2e.servers import free_port
from tests.upstreams.servers import UpstreamServer


@contextmanager
def running_upstream(log_dir: Path, **options: bool | str) -> Iterator[UpstreamServer]:
    """An upstream process on a free port, killed at the end."""
    server = UpstreamServer(port=free_port(), log_path=log_dir / "upstream.log", **options)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def make_upstream(tenant, url: str, **fields) -> Upstream:  # noqa: ANN001
    """An Upstream row of `tenant` saved through its checks."""
    upstream = Upstream(tenant=tenant, url=url, **({"name": "docs", "prefix": "docs_"} | fields))
    upstream.full_clean()
    upstream.save()
    return upstream


def redescribe(server: UpstreamServer, tool: str, description: str, bearer: str = "") -> None:
    """Make the upstream change one of its tools' descriptions (its `redescribe` tool, called directly;
    the caller admits 127.0.0.1 through MCP_HTTP_HANDLER_ALLOW)."""
    headers = (("Authorization", f"Bearer {bearer}"),) if bearer else ()
    target = federation.Target(
        tenant_id=0, upstream_id=server.port, url=server.url, headers=headers, mode="legacy"
    )
    result = async_to_sync(federation.call_tool)(
        target, "redescribe", {"tool": tool, "description": description}
    )
    assert result["content"][0]["text"] == "changed"


def redescribe_prompt(server: UpstreamServer, prompt: str, description: str, bearer: str = "") -> None:
    """Make the upstream change one of its prompts' descriptions (its `redescribe_prompt` tool)."""
    headers = (("Authorization", f"Bearer {bearer}"),) if bearer else ()
    target = federation.Target(
        tenant_id=0, upstream_id=server.port, url=server.url, headers=headers, mode="legacy"
    )

    async def call() -> dict:
        try:
            return await federation.call_tool(
                target, "redescribe_prompt", {"prompt": prompt, "description": description}
            )
        finally:
            await federation.close_all()

    assert async_to_sync(call)()["content"][0]["text"] == "changed"


def call_row(row: Upstream, tool: str, arguments: dict) -> dict | federation.UpstreamError:
    """Call ``tool`` on the upstream of ``row`` as its published tools do (keyed by the row), from sync code;
    the result, or the UpstreamError it failed with. The call's connections are closed before it returns."""

    async def call() -> dict | federation.UpstreamError:
        target = federation.Target(
            tenant_id=row.tenant_id, upstream_id=row.pk, url=row.url, timeout_seconds=10.0, mode=row.mode
        )
        try:
            return await federation.call_tool(target, tool, arguments)
        except federation.UpstreamError as exc:
            return exc
        finally:
            await federation.close_all()

    return async_to_sync(call)()


def kill_until_open(server: UpstreamServer, row: Upstream, failures: int) -> None:
    """One successful call, then kill ``server`` and fail ``failures`` times: the row's breaker opens."""
    assert "structuredContent" in call_row(row, "echo", {"message": "alive"})
    server.stop()
    for _ in range(failures):
        assert isinstance(call_row(row, "echo", {"message": "dead"}), federation.UpstreamUnavailable)
