"""Benchmark our MCP server (Daphne) against the official SDK's server (uvicorn), side by side.

    .venv/bin/python bench/run.py [--quick] [--only ours|reference] [--skip-scale] [--skip-streams]
    .venv/bin/python bench/run.py --only-oauth   # tools/call on an oauth tenant (token) vs a public one
    .venv/bin/python bench/run.py --only-background   # echo on a Celery worker vs the same echo inline
    .venv/bin/python bench/run.py --only-modern   # the 2026-07-28 wire: vs the SDK stateless, vs legacy
    .venv/bin/python bench/run.py --only-asking   # background progress, asking, workers, held runs
    .venv/bin/python bench/run.py --only-operations   # quotas on vs off; metrics + quotas + tenant wall on vs off

Prints figures; it is not a test. See bench/README.md for what is measured and how to read it.

Longer than 400 lines on purpose: one script a person reads top to bottom to see how each figure is
made (phases, tables); splitting it would scatter that story. Starting, pinning and stopping the
processes (and the bench database) live in procs.py, shared with issue 11's phases (asking.py).
The 2026-07-28 listen phase and the legacy GET-stream phase share `hold_streams` (open with bounded
concurrency, RSS, one edit, delivery to every stream), so their figures are made the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import datetime
import importlib.util
import json
import os
import platform
import pstats
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import httpx
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asking import print_asking_section  # noqa: E402
from loadgen import (  # noqa: E402
    MODERN_VERSION,
    BenchError,
    GetStream,
    ListenStream,
    McpClient,
    ModernClient,
    PhaseResult,
    SseStream,
    make_clients,
    merge,
    proc_rss_kib,
    run_phase,
)
from procs import (  # noqa: E402
    HOST,
    PYTHON,
    ROOT,
    Affinity,
    Server,
    celery_worker,
    daphne_server,
    hold_bench_lock,
    log,
    plan_affinity,
    prepare_database,
    raise_fd_limit,
    reference_server,
    run_checked,
    running,
    uvicorn_ours,
    wait_workers_ready,
    with_db_name,
)
from sessions import print_sessions_section  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/mcp_bench"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/2"
CONCURRENCIES = (1, 16, 64)
LIST_CONCURRENCY = 16


# ---------------------------------------------------------------------------------------------
# Throughput / latency


@dataclass
class Timing:
    warmup: float
    duration: float


async def op_echo(client: McpClient, n: int) -> None:
    await client.call_echo(f"hello {n}")


async def op_list(client: McpClient, n: int) -> None:
    await client.list_tools()


PHASES = [(f"tools/call c={c}", op_echo, c) for c in CONCURRENCIES] + [
    (f"tools/list c={LIST_CONCURRENCY}", op_list, LIST_CONCURRENCY)
]


async def drive(servers: list[Server], timing: Timing, rounds: int) -> dict[str, dict[str, PhaseResult]]:
    """Run every load phase against every server, one server at a time, interleaved in rounds.

    All servers stay up but only one is loaded at any moment; each phase is split into
    `rounds` slices that alternate between the servers (in alternating order), so drift in
    background load on the machine hits every server alike.
    """
    clients: dict[str, list[McpClient]] = {}
    for server in servers:
        await server.wait_ready()
        clients[server.label] = await make_clients(max(CONCURRENCIES), HOST, server.port, server.path)
        # Warm every path once before measuring (imports, caches, lazy initialisation).
        await asyncio.gather(*(c.call_echo("warm") for c in clients[server.label]))
        await asyncio.gather(*(c.list_tools() for c in clients[server.label][:LIST_CONCURRENCY]))
    raw: dict[str, dict[str, list[PhaseResult]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    try:
        for name, op, conc in PHASES:
            for rnd in range(rounds):
                order = servers if rnd % 2 == 0 else list(reversed(servers))
                for server in order:
                    log(f"{server.label}: {name} (round {rnd + 1}/{rounds})")
                    raw[server.label][name].append(
                        await run_phase(
                            name,
                            clients[server.label][:conc],
                            op,
                            timing.duration / rounds,
                            timing.warmup,
                            server_pid=server.pid,
                        )
                    )
    finally:
        for server in servers:
            cs = clients.get(server.label, [])
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {label: {name: merge(rs) for name, rs in phases.items()} for label, phases in raw.items()}


# ---------------------------------------------------------------------------------------------
# OAuth: the same tools/call on an `oauth` tenant (with a valid token) and on a `public` one


PAIR_CONCURRENCY = 16  # the oauth and background comparisons
OAUTH_GOAL = 0.9  # oauth throughput at least 0.9x the public tenant's

# Run in `manage.py shell` with the server's environment (its MCP_PUBLIC_URL makes the canonical URI).
OAUTH_SETUP = """
import datetime
from django.contrib.auth import get_user_model
from django.utils import timezone
from oauth2_provider.models import AccessToken, Application
from mcp_app.models import Tool
from mcp_app.oauth import resources
from tenants.models import Tenant
secure = Tenant.objects.get(slug="secure")
if not Tool.objects.filter(tenant=secure, name="echo").exists():
    echo = Tool.objects.get(tenant__slug="demo", name="echo")
    echo.pk = None
    echo._state.adding = True
    echo.tenant = secure
    echo.save()
app, _ = Application.objects.get_or_create(
    client_id="bench-oauth", defaults=dict(name="bench", client_type="public",
    authorization_grant_type="authorization-code", redirect_uris="http://127.0.0.1/cb", client_secret=""))
AccessToken.objects.create(
    user=get_user_model().objects.get(username="secure-user"), application=app, token=TOKEN,
    scope="mcp:tools", resource=[resources.canonical_uri("secure")],
    expires=timezone.now() + datetime.timedelta(hours=2))
"""


def oauth_token(server: Server) -> str:
    """Copy the demo's `echo` to the `secure` tenant and store a token bound to it; return the token."""
    token = secrets.token_urlsafe(32)
    code = f"TOKEN = {token!r}\n" + OAUTH_SETUP
    run_checked([PYTHON, "manage.py", "shell", "-c", code], server.env, "OAuth bench setup")
    return token


async def drive_pair(
    server: Server,
    targets: dict[str, tuple[str, dict[str, str] | None]],
    timing: Timing,
    slices: int,
    servers: dict[str, Server] | None = None,
) -> dict[str, PhaseResult]:
    """tools/call of echo at c=16 on two tenant paths of one server; slices alternate between them.

    `targets` maps a label to (path, extra headers); the order of the two is reversed each round.
    `servers` gives a label a server of its own (two processes, one loaded at a time).
    """
    servers = servers or {}
    for each in {server, *servers.values()}:
        await each.wait_ready()
    clients = {
        key: await make_clients(
            PAIR_CONCURRENCY, HOST, servers.get(key, server).port, path, extra_headers=headers
        )
        for key, (path, headers) in targets.items()
    }
    keys = list(targets)
    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    try:
        for cs in clients.values():
            await asyncio.gather(*(c.call_echo("warm") for c in cs))
        name = f"tools/call c={PAIR_CONCURRENCY}"
        for rnd in range(slices):
            for key in keys if rnd % 2 == 0 else keys[::-1]:
                log(f"{server.label} bench: {key} (slice {rnd + 1}/{slices})")
                raw[key].append(
                    await run_phase(
                        name,
                        clients[key],
                        op_echo,
                        timing.duration / slices,
                        timing.warmup,
                        server_pid=servers.get(key, server).pid,
                    )
                )
    finally:
        for cs in clients.values():
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {key: merge(rs) for key, rs in raw.items()}


async def drive_oauth(server: Server, token: str, timing: Timing, slices: int) -> dict[str, PhaseResult]:
    """echo on /t/demo/mcp (public) and /t/secure/mcp (Bearer), same process."""
    targets = {
        "public": ("/t/demo/mcp", None),
        "oauth": ("/t/secure/mcp", {"Authorization": f"Bearer {token}"}),
    }
    return await drive_pair(server, targets, timing, slices)


def oauth_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    server = daphne_server(env, affinity.server, label="oauth")
    token = oauth_token(server)
    with running(server):
        return asyncio.run(drive_oauth(server, token, timing, slices))


def print_oauth_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## OAuth: tools/call of echo at c={PAIR_CONCURRENCY}, oauth tenant with a token vs public tenant")
    print()
    print("one Daphne process serves both tenants; the echo tool is the same row copied; slices alternate")
    print()
    print_oauth(oauth_bench(env, affinity, timing, rounds * 2))


def print_oauth(results: dict[str, PhaseResult]) -> list[str]:
    labels = {
        "public": "`public` tenant (demo), no token",
        "oauth": "`oauth` tenant (secure), Bearer token",
    }
    lines = [
        "| workload | tenant | req/s | p50 ms | p99 ms | errors | server CPU | other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for key, label in labels.items():
        r = results[key]
        srv = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
        oth = f"{r.other_cpu * 100:.0f}%" if r.other_cpu is not None else "?"
        lines.append(
            f"| tools/call c={PAIR_CONCURRENCY} | {label} | {r.rps:,.0f} | {r.pct(0.5):.2f} | "
            f"{r.pct(0.99):.2f} | {sum(r.errors.values())} | {srv} | {oth} |"
        )
    ratio = results["oauth"].rps / results["public"].rps if results["public"].rps else 0.0
    verdict = "MET" if ratio >= OAUTH_GOAL else "NOT MET"
    lines += [
        "",
        f"- oauth/public throughput {ratio:.2f}x, p99 "
        f"{fmt_ratio(results['oauth'].pct(0.99), results['public'].pct(0.99))} -> {verdict} "
        f"(goal: throughput >= {OAUTH_GOAL}x)",
    ]
    for line in lines:
        print(line)
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")
    return lines


# ---------------------------------------------------------------------------------------------
# Operations (issue 13): the same echo on a tenant with every quota on


QUOTA_GOAL = 0.95  # quotas on: at most 5% slower than off
QUOTA_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
quota, _ = Tenant.objects.get_or_create(slug="demo-quota", defaults=dict(name="demo-quota", auth_mode="public"))
# Every quota on and never reached: each call is counted against the tenant, the tool and the caller.
Tenant.objects.filter(pk=quota.pk).update(
    calls_per_minute=10**9, calls_per_minute_per_tool=10**9, calls_per_minute_per_caller=10**9)
if not Tool.objects.filter(tenant=quota, name="echo").exists():
    echo = Tool.objects.get(tenant=demo, name="echo")
    echo.pk = None
    echo._state.adding = True
    echo.tenant = quota
    echo.save()
"""


def operations_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    run_checked([PYTHON, "manage.py", "shell", "-c", QUOTA_SETUP], env, "operations bench setup")
    server = daphne_server(env, affinity.server, label="operations")
    with running(server):
        targets = {"off": ("/t/demo/mcp", None), "on": ("/t/demo-quota/mcp", None)}
        return asyncio.run(drive_pair(server, targets, timing, slices))


def print_on_off(results: dict[str, PhaseResult], column: str, labels: tuple[str, str], what: str) -> None:
    """The table of an on/off pair of tools/call phases, then the ratio against the goal."""
    print(f"| workload | {column} | req/s | p50 ms | p99 ms | errors | server CPU |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for key, label in zip(("off", "on"), labels, strict=True):
        r = results[key]
        cpu = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
        print(
            f"| tools/call c={PAIR_CONCURRENCY} | {label} | {r.rps:,.0f} | {r.pct(0.5):.2f} | "
            f"{r.pct(0.99):.2f} | {sum(r.errors.values())} | {cpu} |"
        )
    ratio = results["on"].rps / results["off"].rps if results["off"].rps else 0.0
    verdict = "MET" if ratio >= QUOTA_GOAL else "NOT MET"
    print()
    print(
        f"- {what} on/off throughput {ratio:.2f}x, p99 {fmt_ratio(results['on'].pct(0.99), results['off'].pct(0.99))}"
        f" -> {verdict} (goal: throughput >= {QUOTA_GOAL}x)"
    )
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")


WALL_ROLE = "mcp_bench_wall"


def wall_role(env: dict[str, str]) -> None:
    """A role without BYPASSRLS that may use the bench database's tables: the tenant wall binds it (AMB-96)."""
    with psycopg.connect(env["DATABASE_URL"].replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [WALL_ROLE]).fetchone():
            conn.execute(f"CREATE ROLE {WALL_ROLE} NOLOGIN NOSUPERUSER NOBYPASSRLS")
        conn.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {WALL_ROLE}")
        conn.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {WALL_ROLE}")


async def scrape_metrics(server: Server, stop: asyncio.Event) -> int:
    """GET /metrics once a second, as Prometheus would; how many scrapes answered 200."""
    answered = 0
    async with httpx.AsyncClient(base_url=f"http://{HOST}:{server.port}", timeout=10) as client:
        while not stop.is_set():
            answered += (await client.get("/metrics")).status_code == 200
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)
    return answered


async def drive_everything(
    off: Server, on: Server, timing: Timing, slices: int
) -> tuple[dict[str, PhaseResult], int]:
    stop = asyncio.Event()
    await on.wait_ready()
    scraper = asyncio.create_task(scrape_metrics(on, stop))
    try:
        targets = {"off": ("/t/demo/mcp", None), "on": ("/t/demo-quota/mcp", None)}
        results = await drive_pair(off, targets, timing, slices, servers={"on": on})
    finally:
        stop.set()
    return results, await scraper


def print_everything_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    """Issue 13's figure: metrics scraped, every quota and the tenant wall on, against none of them."""
    if not env["DATABASE_URL"].startswith("postgres"):
        print("## Everything on vs off: skipped (the tenant wall needs PostgreSQL)")
        return
    wall_role(env)
    off = daphne_server(env, affinity.server, label="all-off")
    on = daphne_server(dict(env, DATABASE_ROLE=WALL_ROLE), affinity.server, label="all-on")
    print(f"## Everything on vs off: tools/call of echo at c={PAIR_CONCURRENCY}, two processes, one loaded at a time")
    print()
    print(
        f"on: DATABASE_ROLE={WALL_ROLE} (the tenant wall binds every statement), tenant demo-quota (every "
        "quota on), /metrics scraped every second; off: the database's superuser (no wall), tenant demo "
        "(no quota), no scrape. Slices alternate between the processes."
    )
    print()
    with running(off), running(on):
        results, scrapes = asyncio.run(drive_everything(off, on, timing, rounds * 2))
    print_on_off(results, "process", ("everything off", "metrics + quotas + wall on"), "everything")
    print(f"- {scrapes} scrapes of /metrics answered during the run")


def print_operations_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## Quotas: tools/call of echo at c={PAIR_CONCURRENCY}, every quota of the tenant on vs none")
    print()
    print(
        "one Daphne process serves both tenants (Redis counts the quotas: a batch reserved per 100 calls "
        "and scope); usage recording (the metrics' source) is on for both; slices alternate"
    )
    print()
    results = operations_bench(env, affinity, timing, rounds * 2)
    print_on_off(results, "tenant", ("no quota (demo)", "every quota on (demo-quota)"), "quotas")
    print()
    print_everything_section(env, affinity, timing, rounds)


# ---------------------------------------------------------------------------------------------
# Background tools: the same echo on a Celery worker


BACKGROUND_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
bg, _ = Tenant.objects.get_or_create(slug="demo-bg", defaults=dict(name="demo-bg", auth_mode="public"))
if not Tool.objects.filter(tenant=bg, name="echo").exists():
    echo = Tool.objects.get(tenant=demo, name="echo")
    echo.pk = None
    echo._state.adding = True
    echo.tenant = bg
    echo.execution = "background"
    echo.save()
"""


def background_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    env = dict(env, MCP_BACKGROUND_TOOLS="celery")
    run_checked([PYTHON, "manage.py", "shell", "-c", BACKGROUND_SETUP], env, "background bench setup")
    server = daphne_server(env, affinity.server, label="background")
    worker = celery_worker(server.env, affinity.server)
    with running(worker), running(server):
        wait_workers_ready([worker])
        targets = {"inline": ("/t/demo/mcp", None), "background": ("/t/demo-bg/mcp", None)}
        return asyncio.run(drive_pair(server, targets, timing, slices))


def print_background_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## Background tools: tools/call of echo at c={PAIR_CONCURRENCY}, on a Celery worker vs inline")
    print()
    print(
        "one Daphne process; one Celery worker (prefork, concurrency 2, as bin/serve starts it), both "
        "pinned to the server core; broker and channel layer: Redis; the echo row copied to a tenant "
        "where it runs in the background; slices alternate"
    )
    print()
    results = background_bench(env, affinity, timing, rounds * 2)
    lines = [
        "| workload | where echo runs | req/s | p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---:|---:|",
    ]
    for key, label in (("inline", "in Daphne (inline)"), ("background", "on the Celery worker")):
        r = results[key]
        lines.append(
            f"| tools/call c={PAIR_CONCURRENCY} | {label} | {r.rps:,.0f} | {r.pct(0.5):.2f} | "
            f"{r.pct(0.99):.2f} | {sum(r.errors.values())} |"
        )
    inline, background = results["inline"], results["background"]
    lines += [
        "",
        f"- background/inline throughput {fmt_ratio(background.rps, inline.rps)}, p50 "
        f"{fmt_ratio(background.pct(0.5), inline.pct(0.5))}, p99 {fmt_ratio(background.pct(0.99), inline.pct(0.99))} "
        "(the price of a queue hop; background is for tools that run for seconds)",
    ]
    for line in lines:
        print(line)
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")


# ---------------------------------------------------------------------------------------------
# The 2026-07-28 ("modern") wire: stateless POSTs, no initialize, no session


@dataclass
class Target:
    """One server driven on one wire: a column of the modern tables."""

    key: str
    label: str
    server: Server
    wire: str


async def op_discover(client: McpClient, n: int) -> None:
    await client.discover()


MODERN_CONCURRENCIES = (1, 16, 64)
MODERN_LABELS = {
    "ours-modern": "ours (Daphne), modern",
    "ref-stateless": "SDK stateless json_response, modern",
    "ours-legacy": "ours (Daphne), legacy session",
    "ours-uvicorn": "ours (uvicorn+uvloop+httptools), modern",
}
# (phase, op, concurrency, targets): each phase's targets alternate slice by slice.
MODERN_PHASES = [
    *(
        (
            f"tools/call c={c}",
            op_echo,
            c,
            ("ours-modern", "ref-stateless", "ours-legacy") + (("ours-uvicorn",) if c == 16 else ()),
        )
        for c in MODERN_CONCURRENCIES
    ),
    ("server/discover c=16", op_discover, 16, ("ours-modern", "ref-stateless")),
    ("tools/list c=16", op_list, 16, ("ours-modern", "ref-stateless", "ours-legacy")),
]
# (phase, numerator, phase of the denominator, denominator): the ratios printed.
MODERN_RATIOS = [
    *(
        (f"tools/call c={c}", "ours-modern", f"tools/call c={c}", den)
        for c in MODERN_CONCURRENCIES
        for den in ("ref-stateless", "ours-legacy")
    ),
    ("tools/call c=16", "ours-uvicorn", "tools/call c=16", "ours-modern"),
    ("server/discover c=16", "ours-modern", "tools/list c=16", "ours-legacy"),
    ("server/discover c=16", "ours-modern", "server/discover c=16", "ref-stateless"),
    ("tools/list c=16", "ours-modern", "tools/list c=16", "ours-legacy"),
    ("tools/list c=16", "ours-modern", "tools/list c=16", "ref-stateless"),
]
ModernResults = dict[str, dict[str, PhaseResult]]


def uvloop_missing() -> str | None:
    """Why ours cannot run on uvicorn with uvloop and httptools here (None: it can)."""
    missing = [m for m in ("uvloop", "httptools") if importlib.util.find_spec(m) is None]
    return (
        f"{' and '.join(missing)} not installed (.venv/bin/pip install uvloop httptools)" if missing else None
    )


async def drive_modern(targets: list[Target], timing: Timing, rounds: int) -> ModernResults:
    """Every modern phase on its targets, one target loaded at a time, slices alternating."""
    by_key = {t.key: t for t in targets}
    clients: dict[str, list[McpClient]] = {}
    for t in targets:
        await t.server.wait_ready(t.wire)
    for t in targets:
        clients[t.key] = await make_clients(
            max(MODERN_CONCURRENCIES), HOST, t.server.port, t.server.path, wire=t.wire
        )
        # Warm every path once before measuring (imports, caches, lazy initialisation).
        await asyncio.gather(*(c.call_echo("warm") for c in clients[t.key]))
        await asyncio.gather(*(c.list_tools() for c in clients[t.key][:16]))
        if t.wire == "modern":
            await asyncio.gather(*(c.discover() for c in clients[t.key][:16]))
    raw: dict[str, dict[str, list[PhaseResult]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    try:
        for name, op, conc, keys in MODERN_PHASES:
            present = [k for k in keys if k in by_key]
            for rnd in range(rounds):
                for key in present if rnd % 2 == 0 else present[::-1]:
                    log(f"modern: {key}: {name} (round {rnd + 1}/{rounds})")
                    raw[key][name].append(
                        await run_phase(
                            name,
                            clients[key][:conc],
                            op,
                            timing.duration / rounds,
                            timing.warmup,
                            server_pid=by_key[key].server.pid,
                        )
                    )
    finally:
        for cs in clients.values():
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return {key: {name: merge(rs) for name, rs in phases.items()} for key, phases in raw.items()}


def print_modern(results: ModernResults, notes: list[str]) -> list[str]:
    lines = [
        "| workload | server, wire | req/s | p50 ms | p99 ms | errors | server CPU | loadgen CPU | other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for name, _, _, keys in MODERN_PHASES:
        for key in keys:
            r = results.get(key, {}).get(name)
            if r is not None:
                lines.append(load_row(name, MODERN_LABELS[key], r))
    lines += [
        "",
        "| ratio | throughput | p50 | p99 |",
        "|---|---:|---:|---:|",
    ]
    for num_phase, num, den_phase, den in MODERN_RATIOS:
        a, b = results.get(num, {}).get(num_phase), results.get(den, {}).get(den_phase)
        if a is None or b is None:
            continue
        what = (
            f"{num_phase}: {MODERN_LABELS[num]} / {MODERN_LABELS[den]}"
            if num_phase == den_phase
            else f"{num_phase} ({MODERN_LABELS[num]}) / {den_phase} ({MODERN_LABELS[den]})"
        )
        lines.append(
            f"| {what} | {fmt_ratio(a.rps, b.rps)} | {fmt_ratio(a.pct(0.5), b.pct(0.5))} | "
            f"{fmt_ratio(a.pct(0.99), b.pct(0.99))} |"
        )
    lines += [f"- {note}" for note in notes]
    for line in lines:
        print(line)
    for key, phases in results.items():
        for name, r in phases.items():
            for err, count in r.errors.most_common(5):
                print(f"  ERROR {key} {name}: {count} x {err}")
    return lines


# ---------------------------------------------------------------------------------------------
# Held-open streams: the listen phase and the GET-stream phase open and time them the same way

S = TypeVar("S", bound=SseStream)
LIST_CHANGED = "notifications/tools/list_changed"
OPEN_PARALLEL = 64


async def open_streams(
    streams: Sequence[S], parallel: int = OPEN_PARALLEL
) -> tuple[list[S], collections.Counter[str], float]:
    """Open every stream, `parallel` at a time; return the opened ones, why the others failed,
    and the seconds the whole opening took."""
    errors: collections.Counter[str] = collections.Counter()
    sem = asyncio.Semaphore(parallel)

    async def open_one(s: S) -> bool:
        async with sem:
            try:
                await s.open()
                return True
            except (TimeoutError, BenchError, OSError, asyncio.IncompleteReadError) as exc:
                errors[f"{type(exc).__name__}: {exc}"[:200]] += 1
                return False

    t_open = time.monotonic()
    flags = await asyncio.gather(*(open_one(s) for s in streams))
    seconds = time.monotonic() - t_open
    return [s for s, ok in zip(streams, flags, strict=True) if ok], errors, seconds


@dataclass
class Delivery:
    delivered: int  # streams whose `got` was set
    seconds: float  # from starting the trigger until all had it (or the wait ran out)
    trigger_seconds: float  # the trigger subprocess, Django start included
    first_ms: float | None  # after the trigger's save() returned
    last_ms: float | None


async def trigger_and_wait(
    streams: Sequence[SseStream],
    env: dict[str, str],
    script: str,
    wait_seconds: float,
    errors: collections.Counter[str],
) -> Delivery:
    """Run `script` (an edit that prints `SAVED <time.time()>` once committed) in a `manage.py shell`
    subprocess and wait up to `wait_seconds` for every stream to receive its `want_method`.

    Streams that broke and a trigger that failed are counted in `errors`; first/last are timed from
    the moment save() returned."""
    arrival: dict[int, float] = {}

    async def watch(i: int, s: SseStream) -> None:
        await s.got.wait()
        arrival[i] = time.time()

    watchers = [asyncio.create_task(watch(i, s)) for i, s in enumerate(streams)]
    t0 = time.time()
    trigger = await asyncio.create_subprocess_exec(
        PYTHON, "manage.py", "shell", "-c", script, cwd=ROOT, env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    out, _ = await trigger.communicate()
    t_trigger = time.time() - t0
    saved = [
        line.split()[1] for line in out.decode(errors="replace").splitlines() if line.startswith("SAVED ")
    ]
    t_saved = float(saved[0]) if saved else None
    with contextlib.suppress(asyncio.TimeoutError):
        await asyncio.wait_for(asyncio.gather(*watchers), wait_seconds)
    elapsed = time.time() - t0
    for w in watchers:
        w.cancel()
    for s in streams:
        if s.error:
            errors[f"stream: {s.error}"[:200]] += 1
    if trigger.returncode != 0 or t_saved is None:
        errors[f"trigger exit {trigger.returncode}: {out.decode(errors='replace')[-300:]}"] += 1
    times = sorted(arrival.values())
    return Delivery(
        delivered=len(arrival),
        seconds=elapsed,
        trigger_seconds=t_trigger,
        first_ms=(times[0] - t_saved) * 1000 if times and t_saved else None,
        last_ms=(times[-1] - t_saved) * 1000 if times and t_saved else None,
    )


@dataclass
class HeldStreams:
    """Streams held open on one server process, and one edit's notification timed to all of them."""

    streams: int  # requested
    opened: int
    errors: collections.Counter[str]  # opening, broken streams, the trigger
    open_seconds: float
    rss_streams_kib: int  # server VmRSS with the streams open
    delivery: Delivery


async def hold_streams(
    server: Server,
    env: dict[str, str],
    streams: Sequence[SseStream],
    script: str,
    wait_seconds: float,
    label: str,
    doing: str,
) -> HeldStreams:
    """Open `streams`, read the server's RSS once it settles, run the edit `script`, time its
    notification to every open stream, then close them all."""
    opened, errors, open_seconds = await open_streams(streams)
    await asyncio.sleep(2.0)
    rss = proc_rss_kib(server.pid) or 0
    log(f"{label}: {len(opened)} open; {doing}")
    delivery = await trigger_and_wait(opened, env, script, wait_seconds, errors)
    await asyncio.gather(*(s.close() for s in streams))
    return HeldStreams(len(streams), len(opened), errors, open_seconds, rss, delivery)


def print_held(lines: list[str], held: HeldStreams, label: str) -> list[str]:
    """Print a stream phase's lines, then its five most common errors; return the lines."""
    for line in lines:
        print(line)
    for err, count in held.errors.most_common(5):
        print(f"  ERROR {label}: {count} x {err}")
    return lines


# A real edit: the demo echo's description gets a new suffix (replacing the last run's), committed.
# Prints the wall-clock time save() returned so delivery is timed from there.
MODERN_TRIGGER = (
    "import time; from mcp_app.models import Tool; "
    "t = Tool.objects.get(tenant__slug='demo', name='echo'); "
    "t.description = t.description.split(' [bench edit')[0] + f' [bench edit {time.time():.0f}]'; "
    "t.save(); print('SAVED', time.time())"
)


@dataclass
class ListenResult:
    rss_start_kib: int  # server VmRSS after warm-up
    held: HeldStreams


async def listen_bench(server: Server, env: dict[str, str], n: int, wait_seconds: float) -> ListenResult:
    """Hold `n` subscriptions/listen streams on one process; time an edit's list_changed to all."""
    await server.wait_ready("modern")
    warm = ModernClient(HOST, server.port, server.path)
    await warm.call_echo("warm")
    await warm.list_tools()
    await warm.close()
    first = ListenStream(HOST, server.port, server.path)
    await first.open()  # warms the listen path (channel layer, group join)
    await first.close()
    await asyncio.sleep(1.0)
    rss0 = proc_rss_kib(server.pid) or 0
    log(f"listen: opening {n} subscriptions/listen streams")
    streams = [
        ListenStream(HOST, server.port, server.path, request_id=i + 1, want_method=LIST_CHANGED)
        for i in range(n)
    ]
    held = await hold_streams(
        server,
        env,
        streams,
        MODERN_TRIGGER,
        wait_seconds,
        "listen",
        "editing a tool description in a subprocess",
    )
    return ListenResult(rss_start_kib=rss0, held=held)


def print_listen(r: ListenResult) -> list[str]:
    h, d = r.held, r.held.delivery
    per_stream = (h.rss_streams_kib - r.rss_start_kib) / max(1, h.opened)
    first = "n/a" if d.first_ms is None else f"{d.first_ms:.0f} ms"
    last = "n/a" if d.last_ms is None else f"{d.last_ms:.0f} ms"
    lines = [
        f"- streams requested / opened (acknowledged): {h.streams} / {h.opened}, in {h.open_seconds:.1f}s "
        f"({OPEN_PARALLEL} opening at a time)",
        f"- server RSS: after warm-up {r.rss_start_kib / 1024:.1f} MiB, with the streams open "
        f"{h.rss_streams_kib / 1024:.1f} MiB -> {per_stream:.1f} KiB per open stream",
        f"- notifications/tools/list_changed delivered to {d.delivered} / {h.opened} streams "
        f"(after save() returned: first {first}, last {last})",
        "- trigger: the demo echo's description changed with the ORM (Tool.save()) in a `manage.py shell` "
        f"subprocess, same DATABASE_URL/REDIS_URL ({d.trigger_seconds:.1f}s incl. Django start)",
    ]
    return print_held(lines, h, "listen")


def print_modern_section(
    env: dict[str, str], affinity: Affinity, quick: bool, duration: float | None, listens: int
) -> ModernResults:
    """The modern wire's phases: one run, every server started, loaded one at a time."""
    timing = Timing(warmup=0.3, duration=2.0) if quick else Timing(warmup=0.5, duration=8.0)
    rounds = 1 if quick else 2
    if duration:
        timing.duration = duration
    notes = []
    daphne = daphne_server(env, affinity.server, label="modern")
    servers = [daphne, reference_server(True, affinity.server, stateless=True)]
    targets = [
        Target("ours-modern", MODERN_LABELS["ours-modern"], daphne, "modern"),
        Target("ref-stateless", MODERN_LABELS["ref-stateless"], servers[1], "modern"),
        Target("ours-legacy", MODERN_LABELS["ours-legacy"], daphne, "legacy"),
    ]
    why_not = uvloop_missing()
    if why_not is None:
        servers.append(uvicorn_ours(env, affinity.server))
        targets.append(Target("ours-uvicorn", MODERN_LABELS["ours-uvicorn"], servers[2], "modern"))
    else:
        notes.append(f"ours on uvicorn skipped: {why_not}")
    print(
        f"## MCP {MODERN_VERSION} wire: ours vs the SDK's stateless server, vs our legacy wire, Daphne vs uvicorn"
    )
    print()
    print(
        f"{timing.duration:g}s measured per phase and target, in {rounds} slice(s) each after a "
        f"{timing.warmup:g}s warm-up; closed loop; one keep-alive connection per client. Modern: one POST per "
        f"request with the _meta envelope and MCP-Protocol-Version/Mcp-Method/Mcp-Name, no initialize, no "
        "session; every answer checked (200, resultType complete, echo echoed). Legacy: protocol 2025-06-18, "
        "one session per client, on the same Daphne process as ours-modern. SDK: MCPServer, "
        "streamable_http_app(json_response=True, stateless_http=True), uvicorn (asyncio, h11). Ours on "
        "uvicorn: the same mcpsite.asgi:application, --loop uvloop --http httptools, 1 process. All "
        "servers pinned to the server core and up at once; one loaded at a time, slices alternate "
        "(order reversed every other round)."
    )
    print()
    with contextlib.ExitStack() as stack:
        for server in servers:
            log(f"{server.label}: starting")
            stack.enter_context(running(server))
        results = asyncio.run(drive_modern(targets, timing, rounds))
    print_modern(results, notes)
    print()
    print(f"## {listens} subscriptions/listen streams on one Daphne process")
    print()
    server = daphne_server(env, affinity.server, label="listen")
    with running(server):
        lres = asyncio.run(listen_bench(server, env, listens, 10.0 if quick else 20.0))
    print_listen(lres)
    return results


# ---------------------------------------------------------------------------------------------
# Tenant scale


SCALE_SETUPS = {
    # label: (database suffix, tenants in the database, tools of the measured tenant)
    "small": ("scale_small", 10, 10),
    "large": ("scale_large", 10_000, 1_000),
}
# Both scale servers share one Redis, where per-tenant keys are named by tenant id.
SCALE_TARGET_IDS = {"small": 900_001, "large": 900_002}
# 10 = every page of both tenants holds the same number of tools (a like-for-like page);
# None = the server's default page size (the large tenant's pages are then bigger).
SCALE_PAGE_SIZES = (10, None)

ScaleResult = dict[tuple[int | None, str], tuple[PhaseResult, int, list[int]]]


async def measure_pages(
    servers: dict[str, Server], seconds: float, rounds: int
) -> dict[str, tuple[PhaseResult, int, list[int]]]:
    """From one client per server, fetch the tenant's tools/list pages in a loop; time each page.

    The servers are loaded one at a time, in alternating slices, like the main comparison.
    """
    clients: dict[str, McpClient] = {}
    shape: dict[str, tuple[int, list[int]]] = {}
    for label, server in servers.items():
        await server.wait_ready()
        client = clients[label] = McpClient(HOST, server.port, server.path)
        await client.initialize()
        # Walk all pages once: warms the catalog and learns the page sizes.
        sizes: list[int] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor)
            sizes.append(len(page["tools"]))
            cursor = page.get("nextCursor")
            if not cursor or len(sizes) > 10_000:
                break
        shape[label] = (sum(sizes), sizes)
    cursors: dict[int, str | None] = {}

    async def op(c: McpClient, n: int) -> None:
        # Cycle through every page: page 1, 2, ..., last, 1, ...
        page = await c.list_tools(cursors.get(id(c)))
        cursors[id(c)] = page.get("nextCursor")

    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    labels = list(servers)
    for rnd in range(rounds):
        for label in labels if rnd % 2 == 0 else list(reversed(labels)):
            raw[label].append(
                await run_phase(
                    "tools/list page", [clients[label]], op, seconds / rounds, 0.5, servers[label].pid
                )
            )

    for client in clients.values():
        await client.delete_session()
        await client.close()
    return {label: (merge(rs), *shape[label]) for label, rs in raw.items()}


def scale_bench(
    base_url: str, redis_url: str, affinity: Affinity, seconds: float, rounds: int
) -> ScaleResult:
    """Fill one database per setup, then time tools/list pages of each at each page size."""
    envs: dict[str, dict[str, str]] = {}
    for label, (suffix, tenants, tools) in SCALE_SETUPS.items():
        url = with_db_name(base_url, f"{urlsplit(base_url).path.lstrip('/')}_{suffix}")
        log(f"scale {label}: preparing {tenants} tenants, measured tenant with {tools} tools")
        env = prepare_database(url, redis_url)
        t0 = time.monotonic()
        out = run_checked(
            [
                PYTHON,
                str(ROOT / "bench" / "scale_setup.py"),
                "--tenants",
                str(tenants),
                "--tools",
                str(tools),
                "--target-id",
                str(SCALE_TARGET_IDS[label]),
            ],
            env,
            f"scale setup {label}",
        )
        log(f"scale {label}: {out.strip()} (bulk_create {time.monotonic() - t0:.1f}s)")
        envs[label] = env
    results: ScaleResult = {}
    for page_size in SCALE_PAGE_SIZES:
        servers: dict[str, Server] = {}
        for label, env in envs.items():
            if page_size is not None:
                env = dict(env, MCP_PAGE_SIZE=str(page_size))
            server = daphne_server(env, affinity.server, label=f"scale-{label}")
            server.path = "/t/scale-target/mcp"
            servers[label] = server
        with contextlib.ExitStack() as stack:
            for server in servers.values():
                stack.enter_context(running(server))
            log(f"scale: timing pages (page size {page_size or 'default'})")
            for label, value in asyncio.run(measure_pages(servers, seconds, rounds)).items():
                results[(page_size, label)] = value
    return results


# ---------------------------------------------------------------------------------------------
# 1,000 open GET streams


@dataclass
class StreamResult:
    rss_start_kib: int  # server VmRSS after warm-up
    rss_sessions_kib: int  # ... with the sessions initialized (their POST connections closed)
    held: HeldStreams


# Saving a tool unchanged is an edit as far as the signals go; it leaves the demo data as it was.
# Prints the wall-clock time the save returned (after commit) so delivery is timed from there.
TRIGGER = (
    "import time; from mcp_app.models import Tool; "
    "t = Tool.objects.get(tenant__slug='demo', name='echo'); t.save(); print('SAVED', time.time())"
)


async def streams_bench(server: Server, env: dict[str, str], n: int, wait_seconds: float) -> StreamResult:
    await server.wait_ready()
    warm = McpClient(HOST, server.port, server.path)
    await warm.initialize()
    await warm.call_echo("warm")
    await warm.delete_session()
    await warm.close()
    await asyncio.sleep(1.0)
    rss0 = proc_rss_kib(server.pid) or 0
    log(f"streams: initializing {n} sessions")
    clients = await make_clients(n, HOST, server.port, server.path, parallel=32)
    # The POST connections are not needed any more; only the streams stay open.
    await asyncio.gather(*(c.close() for c in clients))
    await asyncio.sleep(1.0)
    rss1 = proc_rss_kib(server.pid) or 0
    log(f"streams: opening {n} GET streams")
    streams = [GetStream(c, want_method=LIST_CHANGED) for c in clients]
    held = await hold_streams(
        server,
        env,
        streams,
        TRIGGER,
        wait_seconds,
        "streams",
        "triggering list_changed with an edit in a subprocess",
    )
    await asyncio.gather(*(c.delete_session() for c in clients), return_exceptions=True)
    await asyncio.gather(*(c.close() for c in clients), return_exceptions=True)
    return StreamResult(rss_start_kib=rss0, rss_sessions_kib=rss1, held=held)


# ---------------------------------------------------------------------------------------------
# Output


def fmt_ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def load_row(workload: str, server: str, r: PhaseResult) -> str:
    """One row of a load table (the legacy comparison and the 2026-07-28 one share the columns)."""
    srv = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
    oth = f"{r.other_cpu * 100:.0f}%" if r.other_cpu is not None else "?"
    return (
        f"| {workload} | {server} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | "
        f"{sum(r.errors.values())} | {srv} | {r.loadgen_cpu * 100:.0f}% | {oth} |"
    )


def print_load_table(results: dict[str, dict[str, PhaseResult]]) -> list[str]:
    """Print one row per (phase, server) and the ratios; return markdown lines."""
    labels = {"ours": "ours (Daphne)", "ref-sse": "SDK default (SSE)", "ref-json": "SDK json_response"}
    lines = [
        "| workload | server | req/s | p50 ms | p99 ms | errors | server CPU | loadgen CPU | other CPU |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    phases = list(next(iter(results.values())).keys()) if results else []
    for phase in phases:
        for key, label in labels.items():
            r = results.get(key, {}).get(phase)
            if r is not None:
                lines.append(load_row(phase, label, r))
    ratio_lines = []
    if "ours" in results:
        ratio_lines += [
            "",
            "| workload | vs | throughput ours/ref | p50 ours/ref | p99 ours/ref |",
            "|---|---|---:|---:|---:|",
        ]
        for phase in phases:
            ours = results["ours"].get(phase)
            for key in ("ref-sse", "ref-json"):
                ref = results.get(key, {}).get(phase)
                if ours is None or ref is None:
                    continue
                ratio_lines.append(
                    f"| {phase} | {labels[key]} | {fmt_ratio(ours.rps, ref.rps)} | "
                    f"{fmt_ratio(ours.pct(0.5), ref.pct(0.5))} | {fmt_ratio(ours.pct(0.99), ref.pct(0.99))} |"
                )
    for line in lines + ratio_lines:
        print(line)
    return lines + ratio_lines


def print_goal(results: dict[str, dict[str, PhaseResult]]) -> list[str]:
    phase = "tools/call c=16"
    ours = results.get("ours", {}).get(phase)
    lines = []
    for key, label in (("ref-sse", "reference default (SSE)"), ("ref-json", "reference json_response")):
        ref = results.get(key, {}).get(phase)
        if ours is None or ref is None:
            continue
        tput, p99 = ours.rps / ref.rps, ours.pct(0.99) / ref.pct(0.99)
        verdict = "MET" if tput >= 1.0 and p99 <= 1.0 else "NOT MET"
        goal = " (goal: throughput >= 1.0x and p99 <= 1.0x)" if key == "ref-sse" else " (for information)"
        lines.append(f"- c=16 vs {label}: throughput {tput:.2f}x, p99 {p99:.2f}x -> {verdict}{goal}")
    for line in lines:
        print(line)
    return lines


def print_errors(results: dict[str, dict[str, PhaseResult]]) -> None:
    for key, phases in results.items():
        for phase, r in phases.items():
            for err, count in r.errors.most_common(5):
                print(f"  ERROR {key} {phase}: {count} x {err}")


def print_scale(scale: ScaleResult) -> list[str]:
    lines = [
        "| page size | setup | tenants in DB | tools of tenant | pages (tools per page) | page fetches | p50 ms | p99 ms | errors |",
        "|---|---|---:|---:|---|---:|---:|---:|---:|",
    ]
    verdicts = []
    for page_size in SCALE_PAGE_SIZES:
        for label, (_, tenants, _) in SCALE_SETUPS.items():
            if (page_size, label) not in scale:
                continue
            r, total, sizes = scale[(page_size, label)]
            per_page = f"{sizes[0]}" if len(set(sizes)) == 1 else f"{sizes[0]}, last {sizes[-1]}"
            lines.append(
                f"| {page_size or 'default'} | {label} | {tenants:,} | {total:,} | {len(sizes)} ({per_page}) | "
                f"{r.requests:,} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {sum(r.errors.values())} |"
            )
        small, large = scale.get((page_size, "small")), scale.get((page_size, "large"))
        if small and large:
            p50, p99 = large[0].pct(0.5) / small[0].pct(0.5), large[0].pct(0.99) / small[0].pct(0.99)
            verdict = "MET" if p50 <= 1.2 and p99 <= 1.2 else "NOT MET"
            verdicts.append(
                f"- page size {page_size or 'default'}: per-page large/small p50 {p50:.2f}x, p99 {p99:.2f}x "
                f"-> {verdict} (goal: within 20%)"
                + (
                    ""
                    if page_size
                    else "; pages of the large tenant hold more tools, so this is not like for like"
                )
            )
    lines.append("")
    lines.extend(verdicts)
    for line in lines:
        print(line)
    for key, (r, _, _) in scale.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR scale {key}: {count} x {err}")
    return lines


def print_streams(s: StreamResult) -> list[str]:
    h, d = s.held, s.held.delivery
    per_stream = (h.rss_streams_kib - s.rss_sessions_kib) / max(1, h.opened)
    per_session = (s.rss_sessions_kib - s.rss_start_kib) / max(1, h.streams)
    lines = [
        f"- streams requested / opened: {h.streams} / {h.opened}",
        f"- server RSS: start {s.rss_start_kib / 1024:.1f} MiB, after {h.streams} sessions "
        f"{s.rss_sessions_kib / 1024:.1f} MiB, with the streams open {h.rss_streams_kib / 1024:.1f} MiB",
        f"- memory per session {per_session:.1f} KiB, per open GET stream {per_stream:.1f} KiB",
        f"- list_changed delivered to {d.delivered} / {h.opened} streams within {d.seconds:.1f}s "
        f"(after save() returned: first {d.first_ms if d.first_ms is None else round(d.first_ms)} ms, "
        f"last {d.last_ms if d.last_ms is None else round(d.last_ms)} ms)",
        "- trigger: Tool.save() of demo/echo in a `manage.py shell` subprocess "
        f"({d.trigger_seconds:.1f}s incl. Django start)",
    ]
    return print_held(lines, h, "streams")


# ---------------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="short phases, for a smoke run")
    parser.add_argument("--only", choices=["ours", "reference"], help="benchmark one side only")
    parser.add_argument("--skip-scale", action="store_true", help="skip the tenant scale comparison")
    parser.add_argument("--skip-streams", action="store_true", help="skip the 1,000 GET streams test")
    parser.add_argument("--streams", type=int, default=1000, help="GET streams to hold open (default 1000)")
    parser.add_argument("--duration", type=float, help="seconds measured per phase")
    parser.add_argument(
        "--profile", action="store_true", help="also run ours under cProfile at c=16, print hot spots"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    parser.add_argument(
        "--only-oauth",
        action="store_true",
        help="only compare tools/call on an oauth tenant (Bearer token) with a public one, c=16",
    )
    parser.add_argument("--skip-oauth", action="store_true", help="skip the oauth vs public comparison")
    parser.add_argument(
        "--only-operations",
        action="store_true",
        help="only compare tools/call on a tenant with every quota on with one without, c=16",
    )
    parser.add_argument(
        "--only-background",
        action="store_true",
        help="only compare tools/call of echo on a Celery worker with the same echo inline, c=16",
    )
    parser.add_argument(
        "--only-modern",
        action="store_true",
        help=f"only the MCP {MODERN_VERSION} phases: ours vs the SDK stateless server vs our legacy wire, "
        "server/discover and tools/list, Daphne vs uvicorn, subscriptions/listen streams",
    )
    parser.add_argument("--skip-modern", action="store_true", help=f"skip the MCP {MODERN_VERSION} phases")
    parser.add_argument(
        "--only-asking",
        action="store_true",
        help="only issue 11's phases: progress from a worker vs inline, an elicitation through a worker, "
        "two worker processes vs one, many slow background runs held open",
    )
    parser.add_argument("--skip-asking", action="store_true", help="skip issue 11's background/asking phases")
    parser.add_argument(
        "--only-sessions",
        action="store_true",
        help="only session admission: an initialize refused at the per-client cap vs an accepted one",
    )
    parser.add_argument(
        "--runs", type=int, default=500, help="slow background runs to hold open (default 500)"
    )
    parser.add_argument(
        "--listens", type=int, default=1000, help="subscriptions/listen streams to hold open (default 1000)"
    )
    args = parser.parse_args()

    timing = Timing(warmup=0.5, duration=2.0) if args.quick else Timing(warmup=1.0, duration=8.0)
    rounds = 1 if args.quick else 2
    if args.duration:
        timing.duration = args.duration
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    lock = hold_bench_lock()  # noqa: F841 - held until the process exits
    affinity = plan_affinity()
    fd_limit = raise_fd_limit()
    started = time.monotonic()

    header = [
        f"date: {datetime.datetime.now().astimezone().isoformat(timespec='seconds')}",
        f"machine: {os.cpu_count()} cores, {platform.processor() or platform.machine()}, "
        f"Python {platform.python_version()}, {platform.system()} {platform.release()}",
        f"pinning: {affinity.note}",
        f"fd limit: {fd_limit}",
        f"phases: {timing.duration:g}s measured per phase and server, in {rounds} slice(s) each after a "
        f"{timing.warmup:g}s warm-up; closed loop; one keep-alive connection and one MCP session "
        "(protocol 2025-06-18, initialize + notifications/initialized) per simulated client",
        "servers are all started, but loaded one at a time: slices alternate ours / SDK default / SDK json "
        "(reversed every other round); never two loaded at once",
        f"load average before start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}",
        f"ours: Daphne, 1 process, DATABASE_URL={database_url}, REDIS_URL={redis_url}, "
        "MCP_TOOL_CALLS_PER_MINUTE=0 (per-session rate limit off)",
        "reference: mcp SDK MCPServer, stateful Streamable HTTP, uvicorn 1 process (asyncio loop, h11), "
        "access log off",
    ]
    if args.only_modern or args.only_asking or args.only_sessions:
        # These sections describe their own phases, servers and timing.
        header = [line for line in header if not line.startswith(("phases:", "servers are", "reference:"))]
    for line in header:
        print(line)
    print()

    if args.only_modern:
        log("modern: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        modern = print_modern_section(env, affinity, args.quick, args.duration, args.listens)
        if args.profile:
            print()
            print("## Profile of ours (py-spy, tools/call c=16, modern wire)")
            profile_ours(env, affinity, timing, wire="modern")
        if args.json:
            args.json.write_text(json.dumps({"modern": figures(modern)}, indent=2))
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    if args.only_sessions:
        log("sessions: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        print_sessions_section(env, affinity, timing.duration, timing.warmup, rounds * 2)
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    if args.only_asking:
        log("asking: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        print_asking_section(env, affinity, args.quick, args.runs)
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    only = {
        "oauth": print_oauth_section,
        "background": print_background_section,
        "operations": print_operations_section,
    }
    chosen = (
        "oauth"
        if args.only_oauth
        else "background"
        if args.only_background
        else "operations"
        if args.only_operations
        else None
    )
    if chosen is not None:
        log(f"{chosen}: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        only[chosen](env, affinity, timing, rounds)
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    ours_env: dict[str, str] | None = None
    servers: list[Server] = []
    if args.only != "reference":
        log("ours: preparing the database (create, migrate, seed_demo)")
        ours_env = prepare_database(database_url, redis_url)
        servers.append(daphne_server(ours_env, affinity.server))
    if args.only != "ours":
        servers += [reference_server(False, affinity.server), reference_server(True, affinity.server)]
    with contextlib.ExitStack() as stack:
        for server in servers:
            log(f"{server.label}: starting")
            stack.enter_context(running(server))
        results = asyncio.run(drive(servers, timing, rounds))

    print("## Throughput and latency (tools/call of echo; tools/list)")
    print()
    print_load_table(results)
    print()
    print_goal(results)
    print_errors(results)

    if ours_env is not None and not args.skip_oauth:
        print()
        print_oauth_section(ours_env, affinity, timing, rounds)

    modern: ModernResults = {}
    if ours_env is not None and not args.skip_modern:
        print()
        modern = print_modern_section(ours_env, affinity, args.quick, args.duration, args.listens)

    if ours_env is not None and not args.skip_asking:
        print()
        print_asking_section(ours_env, affinity, args.quick, args.runs)

    if ours_env is not None and not args.skip_scale:
        print()
        print("## Tenant scale: tools/list page fetch latency, one client")
        print()
        scale = scale_bench(database_url, redis_url, affinity, 3.0 if args.quick else 6.0, rounds * 2)
        print_scale(scale)

    if ours_env is not None and not args.skip_streams:
        print()
        print(f"## {args.streams} open GET streams on one Daphne process")
        print()
        server = daphne_server(ours_env, affinity.server, label="streams")
        with running(server):
            sres = asyncio.run(streams_bench(server, ours_env, args.streams, 10.0 if args.quick else 20.0))
        print_streams(sres)

    if ours_env is not None and args.profile:
        print()
        print("## Profile of ours (py-spy, tools/call c=16)")
        profile_ours(ours_env, affinity, timing)

    if args.json:
        out = figures(results)
        if modern:
            out["modern"] = figures(modern)
        args.json.write_text(json.dumps(out, indent=2))
    print()
    print(f"total bench time: {time.monotonic() - started:.0f}s")


def figures(results: dict[str, dict[str, PhaseResult]]) -> dict[str, Any]:
    """The throughput figures as plain data, for --json."""
    return {
        k: {
            p: {"rps": r.rps, "p50_ms": r.pct(0.5), "p99_ms": r.pct(0.99), "errors": dict(r.errors)}
            for p, r in v.items()
        }
        for k, v in results.items()
    }


PROFILE_GROUPS = {
    "Redis client (redis-py)": "redis/",
    "Twisted HTTP (Daphne's server)": "twisted/",
    "  of which Content-Type parsing via the email package": "email/",
    "Channels routing/consumer": "channels/",
    "channels_redis": "channels_redis",
    "jsonschema": "jsonschema/",
    "json encode/decode": "json/",
    "Django": "django/",
    "psycopg": "psycopg",
    "socket writes (asyncio transport.write)": "selector_events.py:1057",
    "our code (mcp_app), inclusive": "mcp_app/",
}


def summarize_collapsed(path: Path, top: int = 20) -> list[str]:
    """Shares of py-spy samples per library and per function of ours, from raw (collapsed) output.

    A sample counts for a group when any frame of its stack is in it (inclusive). Stacks of
    asyncio tasks start at the task's coroutine, so "inclusive" is a lower bound for callers.
    """
    self_counts: collections.Counter[str] = collections.Counter()
    ours: collections.Counter[str] = collections.Counter()
    groups: collections.Counter[str] = collections.Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        total += count
        frames = [
            f
            for f in (f.strip() for f in stack.split(";"))
            if f and not f.startswith(("process ", "thread "))
        ]
        if not frames:
            continue
        self_counts[frames[-1]] += count
        for label, needle in PROFILE_GROUPS.items():
            if any(needle in f for f in frames):
                groups[label] += count
        for frame in {f for f in frames if "mcp_app/" in f}:
            ours[frame] += count
    if not total:
        return ["no samples"]
    lines = [
        f"{total} samples of active time (py-spy, every thread)",
        "",
        "share  library / part (inclusive)",
    ]
    lines += [f"{100 * groups[label] / total:5.1f}  {label}" for label in PROFILE_GROUPS]
    lines += ["", "self %  function (top)"]
    lines += [f"{100 * n / total:5.1f}  {name}" for name, n in self_counts.most_common(top)]
    lines += ["", "incl %  function of ours"]
    lines += [f"{100 * n / total:5.1f}  {name}" for name, n in ours.most_common(top)]
    return lines


def profile_ours(env: dict[str, str], affinity: Affinity, timing: Timing, wire: str = "legacy") -> None:
    """Sample ours with py-spy (cProfile if py-spy is missing) under tools/call c=16; print hot spots.

    Also prints the latency distribution of the sampled window, slowest first, to see the tail.
    """
    pyspy = shutil.which("py-spy") or str(Path(PYTHON).parent / "py-spy")
    use_pyspy = Path(pyspy).exists()
    out = Path("/tmp/mcp-bench-ours.prof")
    raw = Path("/tmp/mcp-bench-ours.pyspy.txt")
    server = daphne_server(env, affinity.server, label="profile", profile=None if use_pyspy else out)
    server.start()
    seconds = max(4.0, timing.duration)
    try:

        async def go() -> PhaseResult:
            await server.wait_ready(wire)
            clients = await make_clients(16, HOST, server.port, server.path, wire=wire)
            await asyncio.gather(*(c.call_echo("warm") for c in clients))
            sampler = None
            if use_pyspy:
                sampler = await asyncio.create_subprocess_exec(
                    pyspy,
                    "record",
                    "--format",
                    "raw",
                    "--threads",
                    "--nonblocking",
                    "-r",
                    "200",
                    "-d",
                    str(int(seconds)),
                    "-o",
                    str(raw),
                    "-p",
                    str(server.pid),
                    stdout=asyncio.subprocess.DEVNULL,
                    stderr=asyncio.subprocess.PIPE,
                )
            r = await run_phase("profile", clients, op_echo, seconds, 0.5, server_pid=server.pid)
            if sampler is not None:
                _, err = await asyncio.wait_for(sampler.communicate(), 30)
                if sampler.returncode != 0:
                    print("py-spy failed:", err.decode(errors="replace")[-500:])
            await asyncio.gather(*(c.delete_session() for c in clients), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in clients))
            return r

        r = asyncio.run(go())
        print(
            f"(while sampled, {wire} wire: {r.rps:,.0f} req/s, p50 {r.pct(0.5):.2f} ms, p99 {r.pct(0.99):.2f} ms, "
            f"p99.9 {r.pct(0.999):.2f} ms, max {r.pct(1.0):.2f} ms, server CPU {100 * (r.server_cpu or 0):.0f}%)"
        )
    finally:
        server.stop(sig_int=True)
    if use_pyspy and raw.exists():
        print("\n".join(summarize_collapsed(raw)))
        print(f"(raw collapsed stacks: {raw}; render with any flame graph tool)")
    elif out.exists():
        stats = pstats.Stats(str(out))
        stats.sort_stats("tottime").print_stats(25)
    else:
        print("no profile written:", server.tail())


if __name__ == "__main__":
    main()
