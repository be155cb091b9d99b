"""Daphne forgets a finished request at once, not at its once-a-second sweep (daphne_tuning,
`reap_finished_requests_at_once`): what it kept meanwhile was promoted through the collector's
generations and set off a full collection about once a second, the p99.9 of one client's calls.

Run in a process of its own: importing daphne.server installs Twisted's reactor in the importer.
"""

from __future__ import annotations

import subprocess
import sys

from tests.e2e.servers import ROOT

SCRIPT = r"""
import asyncio, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
import django
django.setup()
import daphne.server
from mcp_app.transport import daphne_tuning

reaps = sys.argv[1] == "reap"
if reaps:
    assert daphne_tuning.reap_finished_requests_at_once()

async def app(scope, receive, send):
    await receive()

async def failing(scope, receive, send):
    raise RuntimeError("left to the sweep, which logs it")

async def main():
    server = daphne.server.Server.__new__(daphne.server.Server)  # its __init__ wants endpoints to listen on
    server.connections = {}
    for application, protocol in ((app, "clean"), (failing, "failed")):
        server.application = application
        server.protocol_connected(protocol)
        queue = server.create_application(protocol, {"type": "http"})
        queue.put_nowait({"type": "http.request"})
        await asyncio.sleep(0.01)
        server.protocol_disconnected(protocol)
    print(sorted(server.connections))

asyncio.run(main())
"""


def run(mode: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def test_a_finished_request_is_forgotten_at_once_and_a_failed_one_is_left_to_the_sweep():
    assert run("reap") == "['failed']"
    assert run("plain") == "['clean', 'failed']"  # without it, both wait for the sweep
