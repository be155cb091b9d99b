"""An `http` tool acting as the caller (connected account, AMB-215) vs the same tool with a static secret
header: tools/call of `echo` at c=16, both through a member's API key, slices alternating.

Two oauth tenants of one Daphne process, each with an `http` tool named echo posting to the same
local endpoint (a thread of this process that answers the message as the tool's content):
`bench-static` sends a secret `Authorization` header, `bench-connected` the caller's token at provider
`gh` from the vault (a fresh connection: the figure is the vault's read per call, not a refresh).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from load import Timing, fmt_ratio
from loadgen import PhaseResult
from pairs import PAIR_CONCURRENCY, drive_pair
from procs import HOST, PYTHON, Affinity, daphne_server, run_checked, running

GOAL = 0.95  # connected throughput at least 0.95x the static header's

SETUP = """
import time
from django.contrib.auth import get_user_model
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.connected_accounts import provider_http, vault
from mcp_app.models import Provider, Tool
from mcp_app.oauth import api_keys
from tenants.models import ApiKey, Membership, Tenant
User = get_user_model()
person, _ = User.objects.get_or_create(username="bench-person")
keys = {}
for slug in ("bench-static", "bench-connected"):
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults=dict(name=slug, auth_mode="oauth"))
    Membership.objects.get_or_create(user=person, tenant=tenant, defaults=dict(role="viewer"))
    config = {"url": URL}
    secrets = ""
    if slug == "bench-connected":
        config["connection"] = "gh"
        provider, _ = Provider.objects.get_or_create(tenant=tenant, name="gh", defaults=dict(
            display_name="GH", authorize_url="https://gh.example/authorize", token_url="https://gh.example/token",
            client_id="bench"))
        vault.save_connection(provider, person, provider_http.Tokens(
            access_token="connected-token", refresh_token="r", scope="", expires_at=time.time() + 86400))
    else:
        secrets = encrypt_secrets({"Authorization": "Bearer static-token"})
    Tool.objects.update_or_create(tenant=tenant, name="echo", defaults=dict(
        handler="http", handler_config=config, handler_secrets=secrets, description="echo"))
    ApiKey.objects.filter(tenant=tenant).delete()
    keys[slug] = api_keys.create(tenant, person, "bench", "mcp:tools").key
print("KEYS", keys["bench-static"], keys["bench-connected"])
"""


class _Echo(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 - http.server's naming
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
        if self.headers.get("Authorization") not in ("Bearer static-token", "Bearer connected-token"):
            self.send_response(401)
            self.end_headers()
            return
        reply = json.dumps({"content": [{"type": "text", "text": body.get("message", "")}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - keep the output clean
        return


@contextmanager
def echo_endpoint() -> Iterator[str]:
    server = ThreadingHTTPServer((HOST, 0), _Echo)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://{HOST}:{server.server_address[1]}/echo"
    finally:
        server.shutdown()
        server.server_close()


def connected_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    env = {**env, "MCP_HTTP_HANDLER_ALLOW": HOST}
    with echo_endpoint() as url:
        server = daphne_server(env, affinity.server, label="connected")
        out = run_checked(
            [PYTHON, "manage.py", "shell", "-c", f"URL = {url!r}\n" + SETUP], server.env, "connected setup"
        )
        static_key, connected_key = out.split("KEYS ", 1)[1].split()
        targets = {
            "static": ("/t/bench-static/mcp", {"Authorization": f"Bearer {static_key}"}),
            "connected": ("/t/bench-connected/mcp", {"Authorization": f"Bearer {connected_key}"}),
        }
        with running(server):
            return asyncio.run(drive_pair(server, targets, timing, slices))


def print_connected_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(
        f"## Connected account: tools/call of an http echo at c={PAIR_CONCURRENCY}, caller's token vs a secret header"
    )
    print()
    print("one Daphne process serves both oauth tenants (a member's API key each); slices alternate")
    print()
    results = connected_bench(env, affinity, timing, rounds * 2)
    print("| tool's Authorization | req/s | p50 ms | p99 ms | errors |")
    print("|---|---:|---:|---:|---:|")
    for key, label in (("static", "static secret header"), ("connected", "the caller's connection (vault)")):
        r = results[key]
        print(f"| {label} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {sum(r.errors.values())} |")
    ratio = results["connected"].rps / results["static"].rps if results["static"].rps else 0.0
    p99 = fmt_ratio(results["connected"].pct(0.99), results["static"].pct(0.99))
    verdict = "MET" if ratio >= GOAL else "NOT MET"
    print()
    print(f"- connected/static throughput {ratio:.2f}x, p99 {p99} -> {verdict} (goal: throughput >= {GOAL}x)")
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")
