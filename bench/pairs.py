"""The same echo under two settings, loaded in alternating slices: an oauth tenant (Bearer token) vs a
public one, quotas (and metrics, the tenant wall) on vs off, a Celery worker vs inline."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import secrets
from collections.abc import Awaitable, Callable

import httpx
import psycopg
from load import Timing, fmt_ratio, op_echo
from loadgen import (
    BenchError,
    McpClient,
    PhaseResult,
    make_clients,
    merge,
    run_phase,
)
from procs import (
    HOST,
    PYTHON,
    Affinity,
    Server,
    celery_worker,
    daphne_server,
    log,
    run_checked,
    running,
    wait_workers_ready,
)

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
    op: Callable[[McpClient, int], Awaitable[None]] = op_echo,
) -> dict[str, PhaseResult]:
    """tools/call of echo (or `op`) at c=16 on two tenant paths of one server; slices alternate between them.

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
            await asyncio.gather(*(op(c, 0) for c in cs))  # warm
        name = f"tools/call c={PAIR_CONCURRENCY}"
        for rnd in range(slices):
            for key in keys if rnd % 2 == 0 else keys[::-1]:
                log(f"{server.label} bench: {key} (slice {rnd + 1}/{slices})")
                raw[key].append(
                    await run_phase(
                        name,
                        clients[key],
                        op,
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


QUOTA_GOAL = 0.95  # quotas on: at most 5% slower than off


def echo_copied_to(tenant: str, indent: str = "", **fields: str) -> str:
    """Shell code giving the tenant in variable `tenant` a copy of the demo's echo (its `fields` set, as
    Python source), unless it has one; `demo` must name the demo tenant."""
    lines = [
        f"if not Tool.objects.filter(tenant={tenant}, name='echo').exists():",
        "    echo = Tool.objects.get(tenant=demo, name='echo')",
        "    echo.pk = None",
        "    echo._state.adding = True",
        f"    echo.tenant = {tenant}",
        *(f"    echo.{name} = {value}" for name, value in fields.items()),
        "    echo.save()",
    ]
    return "".join(f"{indent}{line}\n" for line in lines)


QUOTA_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
quota, _ = Tenant.objects.get_or_create(slug="demo-quota", defaults=dict(name="demo-quota", auth_mode="public"))
# Every quota on and never reached: each call is counted against the tenant, the tool and the caller.
Tenant.objects.filter(pk=quota.pk).update(
    calls_per_minute=10**9, calls_per_minute_per_tool=10**9, calls_per_minute_per_caller=10**9)
""" + echo_copied_to("quota")


def on_off_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int, setup: str, label: str, tenants: tuple[str, str]
) -> dict[str, PhaseResult]:
    """tools/call of echo on two tenants, "off" and "on" (`tenants`, as `setup` makes them in
    `manage.py shell`), on one Daphne process, in alternating slices."""
    run_checked([PYTHON, "manage.py", "shell", "-c", setup], env, f"{label} bench setup")
    server = daphne_server(env, affinity.server, label=label)
    with running(server):
        targets = {"off": (f"/t/{tenants[0]}/mcp", None), "on": (f"/t/{tenants[1]}/mcp", None)}
        return asyncio.run(drive_pair(server, targets, timing, slices))


def operations_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    return on_off_bench(env, affinity, timing, slices, QUOTA_SETUP, "operations", ("demo", "demo-quota"))


def print_on_off(
    results: dict[str, PhaseResult], column: str, labels: tuple[str, str], what: str, goal: float | None = QUOTA_GOAL
) -> None:
    """The table of an on/off pair of tools/call phases, then the ratio against the goal (None: no goal)."""
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
    verdict = "" if goal is None else f" -> {'MET' if ratio >= goal else 'NOT MET'} (goal: throughput >= {goal}x)"
    print()
    print(
        f"- {what} on/off throughput {ratio:.2f}x, p99 {fmt_ratio(results['on'].pct(0.99), results['off'].pct(0.99))}"
        + verdict
    )
    for key, r in results.items():
        for err, count in r.errors.most_common(5):
            print(f"  ERROR {key}: {count} x {err}")


WALL_ROLE = "mcp_bench_wall"


def wall_role(env: dict[str, str]) -> None:
    """A role without BYPASSRLS that may use the bench database's tables: the tenant wall binds it (AMB-96)."""
    with psycopg.connect(
        env["DATABASE_URL"].replace("postgres://", "postgresql://", 1), autocommit=True
    ) as conn:
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
    print(
        f"## Everything on vs off: tools/call of echo at c={PAIR_CONCURRENCY}, two processes, one loaded at a time"
    )
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


GOVERNANCE_GOAL = 0.90  # issue 34: a governed tenant's echo at least 0.9x a plain one's, through Daphne


# Two copies of the demo's echo: one alone (the demo's own echo has guardrails), one beside 20 policies
# (as bench/policies.py: on the caller, the target and the arguments, one reading every call's), three
# guardrails (secrets on arguments, personal data redacted on results, an RE2 pattern on both) and a
# quota on every tool that is never reached.
GOVERNANCE_SETUP = """
from mcp_app.models import Guardrail, Policy, Quota, Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
for slug in ("demo-plain", "demo-governed"):
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults=dict(name=slug, auth_mode="public"))
""" + echo_copied_to("tenant", indent="    ") + """governed = Tenant.objects.get(slug="demo-governed")
if not Policy.objects.filter(tenant=governed).exists():
    rules = [("deny", "tools", "caller.auth == 'api_key' && target.annotations.destructiveHint == true"),
             ("deny", "tools", "target.name == 'echo' && arguments.message.contains('password')"),
             ("deny", "prompts", "caller.role == 'viewer'"), ("allow", "all", "true")]
    rules += [("deny", "tools", f"target.name == 'never_{i}' || target.upstream == 'nowhere_{i}'") for i in range(16)]
    for i, (effect, applies_to, condition) in enumerate(rules):
        Policy.objects.create(tenant=governed, name=f"p{i}", effect=effect, applies_to=applies_to, condition=condition)
    for name, fields in (("keys", dict(detector="secrets", where="arguments", action="block")),
                         ("personal", dict(detector="personal_data", where="results")),
                         ("codes", dict(detector="pattern", pattern="PRJ-[0-9]{6}", where="both"))):
        Guardrail.objects.create(tenant=governed, name=name, **fields)
    Quota.objects.create(tenant=governed, name="plenty", calls=10**9, window="hour")
    governed.bump_version()
"""


def governance_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    tenants = ("demo-plain", "demo-governed")
    return on_off_bench(env, affinity, timing, slices, GOVERNANCE_SETUP, "governance", tenants)


def print_governance_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## Governance: tools/call of echo at c={PAIR_CONCURRENCY}, 20 policies, 3 guardrails and a quota vs none")
    print()
    print("one Daphne process serves both tenants (copies of the demo's echo); slices alternate")
    print()
    results = governance_bench(env, affinity, timing, rounds * 2)
    print_on_off(results, "tenant", ("plain (demo-plain)", "governed (demo-governed)"), "governance",
                 goal=GOVERNANCE_GOAL)  # fmt: skip


RESULT_CACHE_GOAL = 2.0  # issue 36 §3: a kept call at least twice an uncached http tool's throughput
# Each client asks for one of this many argument sets: after the first round, a kept tool answers all.
RESULT_CACHE_KEYS = 8
RESULT_CACHE_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
for slug, seconds in (("demo-http", 0), ("demo-kept", 60)):
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults=dict(name=slug, auth_mode="public"))
    Tool.objects.filter(tenant=tenant, name="lookup").delete()
    tool = Tool.objects.get(tenant=demo, name="fetch_json")
    tool.pk = None
    tool._state.adding = True
    tool.tenant, tool.name = tenant, "lookup"
    tool.handler_config = dict(tool.handler_config, url=URL)
    tool.annotations = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": True}
    tool.result_cache_seconds = seconds
    tool.full_clean()
    tool.save()
"""


async def op_lookup(client: McpClient, n: int) -> None:
    """tools/call of `lookup` (an http tool) with one of RESULT_CACHE_KEYS argument sets."""
    key = f"k{n % RESULT_CACHE_KEYS}"
    result = await client.request("tools/call", {"name": "lookup", "arguments": {"q": key}})
    if result.get("isError") or key not in str(result.get("content")):
        raise BenchError(f"lookup answered {str(result)[:200]}")


def result_cache_bench(
    env: dict[str, str], affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    # The tool posts to this process itself, on loopback: allowed as bin/serve allows it for the demo.
    server = daphne_server(dict(env, MCP_HTTP_HANDLER_ALLOW="127.0.0.1"), affinity.server, label="result-cache")
    setup = RESULT_CACHE_SETUP.replace("URL", repr(f"http://{HOST}:{server.port}/demo/echo"))
    run_checked([PYTHON, "manage.py", "shell", "-c", setup], server.env, "result cache bench setup")
    with running(server):
        targets = {"off": ("/t/demo-http/mcp", None), "on": ("/t/demo-kept/mcp", None)}
        return asyncio.run(drive_pair(server, targets, timing, slices, op=op_lookup))


def print_result_cache_section(env: dict[str, str], affinity: Affinity, timing: Timing, rounds: int) -> None:
    print(f"## Kept results: tools/call of an http tool at c={PAIR_CONCURRENCY}, kept 60 s vs run every time")
    print()
    print(f"one Daphne process; the tool posts to the same process's /demo/echo; {RESULT_CACHE_KEYS} arguments")
    print()
    results = result_cache_bench(env, affinity, timing, rounds * 2)
    print_on_off(results, "tenant", ("uncached (demo-http)", "kept (demo-kept)"), "kept results",
                 goal=RESULT_CACHE_GOAL)  # fmt: skip


BACKGROUND_SETUP = """
from mcp_app.models import Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
bg, _ = Tenant.objects.get_or_create(slug="demo-bg", defaults=dict(name="demo-bg", auth_mode="public"))
""" + echo_copied_to("bg", execution="'background'")


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
