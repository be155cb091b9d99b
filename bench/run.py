"""Benchmark our MCP server (Daphne) against the official SDK's server (uvicorn), side by side.

    .venv/bin/python bench/run.py [--quick] [--only ours|reference] [--skip-scale] [--skip-streams]
    .venv/bin/python bench/run.py --only-oauth   # tools/call on an oauth tenant (token) vs a public one
    .venv/bin/python bench/run.py --only-identity   # a tenant's own identity provider's JWT vs our token vs public
    .venv/bin/python bench/run.py --only-background   # echo on a Celery worker vs the same echo inline
    .venv/bin/python bench/run.py --only-modern   # the 2026-07-28 wire: vs the SDK stateless, vs legacy
    .venv/bin/python bench/run.py --only-asking   # background progress, asking, workers, held runs
    .venv/bin/python bench/run.py --only-operations   # quotas on vs off; metrics + quotas + tenant wall on vs off
    .venv/bin/python bench/run.py --only-governance   # 20 policies, 3 guardrails and a quota vs none
    .venv/bin/python bench/run.py --only-result-cache # an http tool's results kept vs run every time
    .venv/bin/python bench/run.py --only-search       # search mode: 10,000 tools vs 10 (list and search)
    .venv/bin/python bench/run.py --only-audit-load   # tools/call, a million governance events stored vs none
    .venv/bin/python bench/run.py --only-upstream   # tools/call through federation vs the SDK client direct
    .venv/bin/python bench/run.py --only-scale   # tools/list: many tools, many tenants, 10 upstreams (one dead)
    .venv/bin/python bench/run.py --only-connected   # an http tool with the caller's connection vs a secret header

Prints figures; it is not a test. See bench/README.md for what is measured and how to read it.

This file only chooses and orders the sections; each is a module named by what it measures:
load.py (tools/call and tools/list vs the SDK, and the tables), pairs.py (oauth vs public, quotas and
the wall on vs off, worker vs inline), modern.py (the 2026-07-28 wire, listen streams), streams.py
(held-open streams: the listen and GET-stream phases share `hold_streams`, so their figures are made
the same way), scale.py (tenant scale), hotspots.py (py-spy), asking.py (issue 11's phases) and
sessions.py (session admission), upstream.py (calls to an upstream MCP server through
mcp_app.federation vs the SDK client direct; run in its own process: it sets up Django itself). Starting, pinning and stopping the processes (and the bench
database) live in procs.py; the load generator in loadgen.py.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from asking import print_asking_section  # noqa: E402
from audit_load import print_audit_load_section  # noqa: E402
from connected import print_connected_section  # noqa: E402
from external_idp import print_identity_section  # noqa: E402
from hotspots import profile_ours  # noqa: E402
from load import Timing, drive, figures, print_errors, print_goal, print_load_table  # noqa: E402
from loadgen import (  # noqa: E402
    MODERN_VERSION,
)
from modern import ModernResults, print_modern_section  # noqa: E402
from pairs import (  # noqa: E402
    print_background_section,
    print_governance_section,
    print_oauth_section,
    print_operations_section,
    print_result_cache_section,
)
from procs import (  # noqa: E402
    Server,
    daphne_server,
    hold_bench_lock,
    log,
    plan_affinity,
    prepare_database,
    raise_fd_limit,
    reference_server,
    running,
)
from scale import print_scale, scale_bench  # noqa: E402
from search_pairs import print_search_section  # noqa: E402
from sessions import print_sessions_section  # noqa: E402
from streams import print_streams, streams_bench  # noqa: E402

DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/mcp_bench"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/2"


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
        "--only-identity",
        action="store_true",
        help="only compare tools/call with a tenant's own identity provider's JWT vs our token vs public, c=16",
    )
    parser.add_argument(
        "--identity-cache",
        type=int,
        default=5,
        help="MCP_IDENTITY_CACHE_SECONDS of --only-identity (0: verify each)",
    )
    parser.add_argument(
        "--only-operations",
        action="store_true",
        help="only compare tools/call on a tenant with every quota on with one without, c=16",
    )
    parser.add_argument(
        "--only-governance",
        action="store_true",
        help="only compare tools/call on a tenant with 20 policies, 3 guardrails and a quota with one without, c=16",
    )
    parser.add_argument(
        "--only-result-cache",
        action="store_true",
        help="only compare tools/call of an http tool with its results kept (60 s) with it run every time, c=16",
    )
    parser.add_argument(
        "--only-search",
        action="store_true",
        help="only compare tools/list and search_tools on a search-mode tenant of 10,000 tools with one of 10, c=16",
    )
    parser.add_argument(
        "--only-audit-load",
        action="store_true",
        help="only compare tools/call (each an audit event) with a million governance events stored vs none, c=16",
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
        "--only-upstream",
        action="store_true",
        help="only tools/call echo through mcp_app.federation vs the SDK client calling the upstream directly",
    )
    parser.add_argument(
        "--only-scale",
        action="store_true",
        help="only the tenant scale section (many tools, many tenants, tools from 10 upstreams one dead)",
    )
    parser.add_argument(
        "--only-connected",
        action="store_true",
        help="only tools/call of an http tool sending the caller's connected account vs a static secret header",
    )
    parser.add_argument(
        "--runs", type=int, default=500, help="slow background runs to hold open (default 500)"
    )
    parser.add_argument(
        "--listens", type=int, default=1000, help="subscriptions/listen streams to hold open (default 1000)"
    )
    args = parser.parse_args()

    if args.only_upstream:
        # Its own process: it configures Django (and the SSRF allow-list) for itself, not for our servers.
        command = [sys.executable, str(Path(__file__).resolve().parent / "upstream.py")]
        command += ["--quick"] * args.quick + (["--duration", str(args.duration)] if args.duration else [])
        raise SystemExit(subprocess.run(command, check=False).returncode)

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
    if args.only_modern or args.only_asking or args.only_sessions or args.only_scale:
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

    if args.only_connected:
        log("connected: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        print_connected_section(env, affinity, timing, rounds)
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

    if args.only_scale:
        print("## Tenant scale: tools/list page fetch latency, one client")
        print()
        print_scale(scale_bench(database_url, redis_url, affinity, 3.0 if args.quick else 6.0, rounds * 2))
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    if args.only_audit_load:
        print_audit_load_section(database_url, redis_url, affinity, timing, rounds)
        print()
        print(f"total bench time: {time.monotonic() - started:.0f}s")
        return

    if args.only_identity:
        log("identity: preparing the database (create, migrate, seed_demo)")
        env = prepare_database(database_url, redis_url)
        print_identity_section(env, affinity, timing, rounds, args.identity_cache)
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
        "governance": print_governance_section,
        "result-cache": print_result_cache_section,
        "search": print_search_section,
    }
    chosen = (
        "oauth"
        if args.only_oauth
        else "background"
        if args.only_background
        else "operations"
        if args.only_operations
        else "governance"
        if args.only_governance
        else "result-cache"
        if args.only_result_cache
        else "search"
        if args.only_search
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


if __name__ == "__main__":
    main()
