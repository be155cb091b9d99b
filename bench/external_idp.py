"""tools/call of echo at c=16 with a token of a tenant's own identity provider (a JWT checked against its
JWKS, AMB-203) vs our own token vs a public tenant: three tenants of one Daphne, slices alternate.

The identity provider is the tests' authorization server (tests/oauth/idp_server.py: joserfc under
uvicorn, its own process). All 16 clients send the same token, so after the first check each request
finds the verdict remembered by the token's checksum (MCP_IDENTITY_CACHE_SECONDS): this measures the
hot path, as the `oauth` row does for our own tokens. `--identity-cache 0` measures a signature check
(RS256) on every request instead.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import Iterator

import httpx
from load import Timing, fmt_ratio
from loadgen import PhaseResult
from pairs import PAIR_CONCURRENCY, drive_pair, oauth_token
from procs import HOST, PYTHON, ROOT, Affinity, daphne_server, free_port, log, run_checked, running

IDENTITY_GOAL = 0.95  # the identity provider's JWT: at least 0.95x the throughput of our own token (issue 23)

IDP_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
tenant, _ = Tenant.objects.get_or_create(slug="bench-idp", defaults=dict(name="bench-idp"))
tenant.auth_mode = "oauth"
tenant.identity = IDENTITY
tenant.full_clean()
tenant.save()
if not Tool.objects.filter(tenant=tenant, name="echo").exists():
    echo = Tool.objects.get(tenant__slug="demo", name="echo")
    echo.pk = None
    echo._state.adding = True
    echo.tenant = tenant
    echo.save()
"""


@contextlib.contextmanager
def identity_provider() -> Iterator[str]:
    """The tests' authorization server on a free port; its issuer URL."""
    port = free_port()
    url = f"http://{HOST}:{port}"
    cmd = [PYTHON, "-m", "uvicorn", "tests.oauth.idp_server:app", "--host", HOST, "--port", str(port),
           "--log-level", "warning"]  # fmt: skip
    env = {**os.environ, "IDP_ISSUER": url, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{url}/jwks", timeout=2).status_code == 200:
                    break
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the identity provider did not start")
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


def identity_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int, cache_seconds: int
) -> dict[str, PhaseResult]:
    server_env = {
        **env,
        "MCP_IDENTITY_ALLOW_HTTP_LOOPBACK": "1",
        "MCP_HTTP_HANDLER_ALLOW": HOST,
        "MCP_IDENTITY_CACHE_SECONDS": str(cache_seconds),
    }
    server = daphne_server(server_env, affinity.server, label="identity")
    ours = oauth_token(server)
    with identity_provider() as issuer:
        audience = f"http://{HOST}:{server.port}/t/bench-idp/mcp"
        identity = {"issuer": issuer, "jwks_uri": f"{issuer}/jwks", "audience": audience}
        run_checked([PYTHON, "manage.py", "shell", "-c", f"IDENTITY = {identity!r}\n" + IDP_SETUP], server.env,
                    "identity bench setup")  # fmt: skip
        form = {"grant_type": "client_credentials", "resource": audience, "scope": "mcp:tools"}
        jwt = httpx.post(f"{issuer}/token", data=form, auth=("app", "app-secret"), timeout=10).json()
        targets = {
            "public": ("/t/demo/mcp", None),
            "oauth": ("/t/secure/mcp", {"Authorization": f"Bearer {ours}"}),
            "identity": ("/t/bench-idp/mcp", {"Authorization": f"Bearer {jwt['access_token']}"}),
        }
        with running(server):
            return asyncio.run(drive_pair(server, targets, timing, slices))


def print_identity_section(
    env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int, cache_seconds: int = 5
) -> None:
    print(
        f"## Identity provider: tools/call of echo at c={PAIR_CONCURRENCY}, a JWT of the tenant's own "
        "identity provider vs our own token vs public"
    )
    print()
    print(
        f"one Daphne process serves the three tenants; MCP_IDENTITY_CACHE_SECONDS={cache_seconds} "
        "(0: an RS256 check on every request); slices alternate"
    )
    print()
    log("identity bench: starting")
    results = identity_bench(env, affinity, timing, rounds * 2, cache_seconds)
    labels = {
        "public": "`public` tenant (demo), no token",
        "oauth": "`oauth` tenant (secure), our Bearer token",
        "identity": "`oauth` tenant (bench-idp), its identity provider's JWT",
    }
    print("| workload | tenant | req/s | p50 ms | p99 ms | errors | server CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, label in labels.items():
        r = results[key]
        cpu = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
        print(
            f"| tools/call c={PAIR_CONCURRENCY} | {label} | {r.rps:,.0f} | {r.pct(0.5):.2f} | "
            f"{r.pct(0.99):.2f} | {sum(r.errors.values())} | {cpu} |"
        )
    ours, theirs, public = results["oauth"], results["identity"], results["public"]
    ratio = theirs.rps / ours.rps if ours.rps else 0.0
    print()
    print(
        f"- identity/oauth throughput {ratio:.2f}x, p99 {fmt_ratio(theirs.pct(0.99), ours.pct(0.99))} -> "
        f"{'MET' if ratio >= IDENTITY_GOAL else 'NOT MET'} (goal: >= {IDENTITY_GOAL}x); "
        f"identity/public {theirs.rps / public.rps if public.rps else 0.0:.2f}x"
    )
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")
