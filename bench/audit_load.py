"""tools/call throughput with a million governance events stored vs an empty table (issue 34 "Audit
that cannot take the platform down": within 5 %), through Daphne, side by side.

Two databases made alike (migrated, the demo seeded, a tenant `demo-audited` with a copy of the demo's
echo and an audit-only guardrail that finds every bench message, so every call is a governance event
the usage flush writes); one of them holds 1,000,000 earlier events of that same tenant (inserted by
SQL, spread over 30 days). Two Daphne processes on the same core, one per database (each its own Redis
DB), loaded in alternating slices at c=16: the only difference is the table the flush writes into.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

import psycopg
from load import Timing
from loadgen import PhaseResult
from pairs import drive_pair, echo_copied_to, print_on_off
from procs import PYTHON, Affinity, daphne_server, log, prepare_database, run_checked, running, with_db_name

EVENTS = 1_000_000
AUDIT_GOAL = 0.95  # a million stored events cost tools/call at most 5 %

AUDIT_SETUP = """
from mcp_app.models import Guardrail, Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
audited, _ = Tenant.objects.get_or_create(slug="demo-audited", defaults=dict(name="demo-audited", auth_mode="public"))
""" + echo_copied_to("audited") + """if not Guardrail.objects.filter(tenant=audited).exists():
    # Every bench message is "hello <n>": each call is an `audited` event, the result unchanged.
    Guardrail.objects.create(tenant=audited, name="greetings", detector="pattern", pattern="hello",
                             where="arguments", action="audit")
audited.bump_version()
"""

# As the usage flush writes them (governance/audit.py): one tenant's, a second apart, newest now.
FILL = """
INSERT INTO mcp_app_governanceevent (tenant_id, created_at, kind, rule, target, method, caller, detail)
SELECT t.id, now() - make_interval(secs => i * 2.5), 'audited', 'greetings', 'echo', 'tools/call',
       'address:127.0.0.1', '{"found": "match of greetings", "count": 1, "in": "arguments"}'::jsonb
FROM tenants_tenant t, generate_series(1, %s) AS i
WHERE t.slug = 'demo-audited'
"""


def fill(database_url: str, rows: int) -> float:
    """Insert `rows` events as the superuser (the tenant wall is for the platform's own role)."""
    started = time.perf_counter()
    with psycopg.connect(database_url.replace("postgres://", "postgresql://", 1), autocommit=True) as conn:
        conn.execute(FILL, (rows,))  # type: ignore[arg-type]
        conn.execute("ANALYZE mcp_app_governanceevent")
        count = conn.execute("SELECT count(*) FROM mcp_app_governanceevent").fetchone()
    assert count is not None and count[0] >= rows, count
    return time.perf_counter() - started


def audit_load_bench(
    database_url: str, redis_url: str, affinity: Affinity, timing: Timing, slices: int
) -> dict[str, PhaseResult]:
    envs = {}
    for label, name, redis_db in (("off", "mcp_bench_audit_empty", 4), ("on", "mcp_bench_audit_full", 5)):
        log(f"audit load: preparing {name} (create, migrate, seed_demo)")
        env = prepare_database(with_db_name(database_url, name), redis_url.rsplit("/", 1)[0] + f"/{redis_db}")
        run_checked([PYTHON, "manage.py", "shell", "-c", AUDIT_SETUP], env, "audit load setup")
        # Each server writes its own slice's events during that slice, not during the other's.
        envs[label] = dict(env, MCP_USAGE_FLUSH_SECONDS="1")
    seconds = fill(envs["on"]["DATABASE_URL"], EVENTS)
    log(f"audit load: {EVENTS:,} events inserted in {seconds:.1f} s")
    servers = {label: daphne_server(env, affinity.server, label=f"audit-{label}") for label, env in envs.items()}
    with contextlib.ExitStack() as stack:
        for server in servers.values():
            stack.enter_context(running(server))
        targets = {"off": ("/t/demo-audited/mcp", None), "on": ("/t/demo-audited/mcp", None)}
        return asyncio.run(drive_pair(servers["off"], targets, timing, slices, servers=servers))


def print_audit_load_section(
    database_url: str, redis_url: str, affinity: Affinity, timing: Timing, rounds: int
) -> None:
    print(f"## Audit at scale: tools/call of echo at c=16, every call an audit event, {EVENTS:,} stored vs none")
    print()
    print(
        "two Daphne processes on the same core, one per database (alike but for the events stored), loaded "
        "in alternating slices; the usage flush writes each call's event into the table"
    )
    print()
    results = audit_load_bench(database_url, redis_url, affinity, timing, rounds * 2)
    print_on_off(results, "events stored", ("none", f"{EVENTS:,}"), "audit", goal=AUDIT_GOAL)
