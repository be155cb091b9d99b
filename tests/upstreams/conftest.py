"""Fixtures of real upstream MCP servers (tests/upstreams/servers.py), shared by every test that needs one.

`modern_upstream` (the SDK's stateless server: a client in auto mode speaks 2026-07-28 with it) and
`legacy_upstream` (the SDK's stateful server answering as a pre-2026 server: auto falls back to
`initialize` and a session) and `sse_upstream` (the SDK's 2024-11-05 HTTP+SSE app) live for a test module; `start_upstream` starts one of your own for a test
(it is stopped after), for tests that kill, restart or configure theirs. `ERAS` names the pair a test
parametrizes over with the `era` fixture. Another package's conftest imports these by name.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.e2e.servers import free_port
from tests.upstreams.servers import UpstreamServer

ERAS = ("2026-07-28", "legacy")


def _server(tmp: Path, started: bool = True, **options: object) -> UpstreamServer:
    port = free_port()
    server = UpstreamServer(port=port, log_path=tmp / f"upstream-{port}.log", **options)
    if started:
        server.start()
    return server


@pytest.fixture(scope="module")
def modern_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamServer]:
    server = _server(tmp_path_factory.mktemp("upstream"), stateless=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def legacy_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamServer]:
    server = _server(tmp_path_factory.mktemp("upstream"), stateless=False, legacy_only=True)
    yield server
    server.stop()


@pytest.fixture(scope="module")
def sse_upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[UpstreamServer]:
    server = _server(tmp_path_factory.mktemp("upstream"), sse=True)
    yield server
    server.stop()


@pytest.fixture(params=ERAS)
def era(request: pytest.FixtureRequest) -> str:
    """The era the upstream speaks: "2026-07-28" (stateless SDK server) or "legacy" (a session)."""
    return request.param


@pytest.fixture
def upstream(era: str, request: pytest.FixtureRequest) -> UpstreamServer:
    """The module's upstream of this test's era."""
    return request.getfixturevalue("modern_upstream" if era == "2026-07-28" else "legacy_upstream")


@pytest.fixture
def start_upstream(tmp_path: Path) -> Iterator[Callable[..., UpstreamServer]]:
    """Start an upstream of this test's own (options as UpstreamServer's; `start(False, ...)`: only its port
    and settings, `.start()` it later); every one is stopped after."""
    started: list[UpstreamServer] = []

    def start(started_now: bool = True, **options: object) -> UpstreamServer:
        server = _server(tmp_path, started_now, **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()
