"""Governance through Daphne, part by part, side by side (issue 34 "Speed", AMB-351, AMB-375).

    .venv/bin/python bench/governance_parts.py [--tenants plain,governed,plain2] [--rounds 6]
        [--slice 4] [--probe | --bare | --bare-without-cel] [--pyspy] [--keep-database]

One Daphne process (pinned like bench/run.py's) serves copies of the demo's echo on several tenants:
`plain` (nothing), `plain2` (nothing: the bench's own noise), `governed` (as `bench/run.py
--only-governance`: 20 policies, 3 guardrails and a quota), `policies` (the 20 policies alone),
`guarded` (the 3 guardrails alone) and `quota` (the quota alone). tools/call echo at c=16, one tenant
loaded at a time, in slices whose order rotates each round. Prints each tenant's req/s, its ratio to
`plain` over the whole run and the spread of the per-round ratios (each round's slices are
neighbours in time, so a round's ratio sees the same background load).

--bare serves through bench/gov_bare.py: governance cut down to the native calls a governed call cannot
avoid (one CEL evaluation, two RE2 questions, the quota), the ceiling of what making its Python cheaper
could gain (AMB-377); --bare-without-cel without the CEL evaluation too.
--probe serves through bench/gov_probe.py and prints the thread CPU each governance entry point took
a call, by tenant; --pyspy records each tenant's slices with py-spy (collapsed stacks, one file a
tenant under /tmp/gov-parts-pyspy/). Needs PostgreSQL and Redis like bench/run.py (its own database,
mcp_bench_parts; REDIS_URL's database is emptied of mcp:* keys).
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from load import op_echo
from loadgen import PhaseResult, make_clients, merge, run_phase
from pairs import echo_copied_to
from procs import (
    HOST,
    PYTHON,
    ROOT,
    daphne_server,
    django_env,
    hold_bench_lock,
    log,
    plan_affinity,
    prepare_database,
    run_checked,
    running,
)

CONCURRENCY = 16
DEFAULT_DATABASE_URL = "postgres://postgres@127.0.0.1:5432/mcp_bench_parts"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/10"
PROBE_OUT = "/tmp/gov-parts-probe.json"
PYSPY_DIR = Path("/tmp/gov-parts-pyspy")

SETUP = """
from mcp_app.models import Guardrail, Policy, Quota, Tool
from tenants.models import Tenant
demo = Tenant.objects.get(slug="demo")
RULES = [("deny", "tools", "caller.auth == 'api_key' && target.annotations.destructiveHint == true"),
         ("deny", "tools", "target.name == 'echo' && arguments.message.contains('password')"),
         ("deny", "prompts", "caller.role == 'viewer'"), ("allow", "all", "true")]
RULES += [("deny", "tools", f"target.name == 'never_{i}' || target.upstream == 'nowhere_{i}'") for i in range(16)]
GUARDS = (("keys", dict(detector="secrets", where="arguments", action="block")),
          ("personal", dict(detector="personal_data", where="results")),
          ("codes", dict(detector="pattern", pattern="PRJ-[0-9]{6}", where="both")))
PARTS = {"plain": "", "plain2": "", "governed": "pgq", "policies": "p", "guarded": "g", "quota": "q"}
for short, parts in PARTS.items():
    slug = f"parts-{short}"
    tenant, _ = Tenant.objects.get_or_create(slug=slug, defaults=dict(name=slug, auth_mode="public"))
""" + echo_copied_to("tenant", indent="    ") + """    if "p" in parts and not Policy.objects.filter(tenant=tenant).exists():
        for i, (effect, applies_to, condition) in enumerate(RULES):
            Policy.objects.create(tenant=tenant, name=f"p{i}", effect=effect, applies_to=applies_to, condition=condition)
    if "g" in parts and not Guardrail.objects.filter(tenant=tenant).exists():
        for name, fields in GUARDS:
            Guardrail.objects.create(tenant=tenant, name=name, **fields)
    if "q" in parts and not Quota.objects.filter(tenant=tenant).exists():
        Quota.objects.create(tenant=tenant, name="plenty", calls=10**9, window="hour")
    tenant.bump_version()
"""


FAULTS: dict[str, list[tuple[int, int, int]]] = collections.defaultdict(list)


def _faults(pid: int) -> tuple[int, int]:
    """The server's minor page faults and context switches so far (warm-up included: per request, roughly)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    status = Path(f"/proc/{pid}/status").read_text()
    switches = sum(int(line.split()[1]) for line in status.splitlines() if line.endswith("ctxt_switches") or "ctxt_switches:" in line)
    return int(fields[7]), switches


class PySpy:
    """py-spy recording the server during one tenant's slice, appended to that tenant's file."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        PYSPY_DIR.mkdir(exist_ok=True)
        for old in [*PYSPY_DIR.glob("*.txt"), *PYSPY_DIR.glob("*.perf")]:
            old.unlink()

    def start(self, tenant: str, seconds: float) -> subprocess.Popen[bytes]:
        if os.environ.get("GOV_PARTS_PERF"):  # perf (software clock, kernel and native frames) instead
            out = PYSPY_DIR / f"{tenant}-{time.monotonic_ns()}.perf"
            command = ["perf", "record", "-q", "-F", "1000", "-e", "cpu-clock", "-g", "-p", str(self.pid),
                       "-o", str(out), "--", "sleep", str(seconds)]  # fmt: skip
            return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out = PYSPY_DIR / f"{tenant}-{time.monotonic_ns()}.txt"
        spy = Path(PYTHON).with_name("py-spy")
        command = [str(spy), "record", "-p", str(self.pid), "-d", str(max(1, int(seconds))), "-r", "250",
                   "--nonblocking", "-f", "raw", "-o", str(out)]  # fmt: skip
        return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def drive(
    server_port: int, server_pid: int, tenants: list[str], rounds: int, seconds: float, warmup: float,
    spy: PySpy | None,
) -> dict[str, list[PhaseResult]]:  # fmt: skip
    clients = {t: await make_clients(CONCURRENCY, HOST, server_port, f"/t/parts-{t}/mcp") for t in tenants}
    raw: dict[str, list[PhaseResult]] = collections.defaultdict(list)
    try:
        for cs in clients.values():
            await asyncio.gather(*(c.call_echo("warm") for c in cs))
        for rnd in range(rounds):
            shift = rnd % len(tenants)
            order = tenants[shift:] + tenants[:shift]
            if rnd % 2:
                order.reverse()
            for tenant in order:
                log(f"parts: {tenant} (round {rnd + 1}/{rounds})")
                recording = spy.start(tenant, seconds) if spy is not None else None
                before = _faults(server_pid)
                raw[tenant].append(
                    await run_phase(f"c={CONCURRENCY}", clients[tenant], op_echo, seconds, warmup,
                                    server_pid=server_pid)  # fmt: skip
                )
                FAULTS[tenant].append((_faults(server_pid)[0] - before[0], _faults(server_pid)[1] - before[1],
                                       raw[tenant][-1].requests))  # fmt: skip
                if recording is not None:
                    await asyncio.to_thread(recording.wait)
    finally:
        for cs in clients.values():
            await asyncio.gather(*(c.delete_session() for c in cs), return_exceptions=True)
            await asyncio.gather(*(c.close() for c in cs), return_exceptions=True)
    return raw


def report(raw: dict[str, list[PhaseResult]], tenants: list[str]) -> None:
    base = "plain" if "plain" in tenants else tenants[0]
    merged = {t: merge(rs) for t, rs in raw.items()}
    print(f"| tenant | req/s | p50 ms | p99 ms | errors | server CPU | ratio to {base} | per-round ratios (min-median-max) |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for tenant in tenants:
        r = merged[tenant]
        ratios = [a.rps / b.rps for a, b in zip(raw[tenant], raw[base], strict=True) if b.rps]
        spread = f"{min(ratios):.2f}-{statistics.median(ratios):.2f}-{max(ratios):.2f}" if ratios else "-"
        cpu = f"{r.server_cpu * 100:.0f}%" if r.server_cpu is not None else "?"
        print(f"| {tenant} | {r.rps:,.0f} | {r.pct(0.5):.2f} | {r.pct(0.99):.2f} | {sum(r.errors.values())} | "
              f"{cpu} | {r.rps / merged[base].rps:.2f}x | {spread} |")  # fmt: skip
        for err, count in r.errors.most_common(3):
            print(f"  ERROR {tenant}: {count} x {err}")


def report_probe() -> None:
    found = json.loads(Path(PROBE_OUT).read_text())
    print()
    print("Thread CPU a call of each timed entry point (bench/gov_probe.py), µs:")
    print()
    for tenant, entries in sorted(found.items()):
        if not tenant.startswith("parts-"):
            continue
        line = ", ".join(
            f"{what} {ns / calls / 1000:.1f} (x{calls})" for what, (calls, ns) in sorted(entries.items()) if calls
        )
        print(f"- {tenant}: {line}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="plain,governed,plain2")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--slice", type=float, default=4.0, help="seconds measured a slice")
    parser.add_argument("--warmup", type=float, default=0.5)
    parser.add_argument("--probe", action="store_true")
    parser.add_argument("--bare", action="store_true", help="serve through bench/gov_bare.py (AMB-377)")
    parser.add_argument("--bare-without-cel", action="store_true", help="--bare, without the CEL evaluation")
    parser.add_argument("--pyspy", action="store_true")
    parser.add_argument("--keep-database", action="store_true")
    args = parser.parse_args()
    tenants = args.tenants.split(",")
    bare = args.bare or args.bare_without_cel
    database_url = os.environ.get("DATABASE_URL", DEFAULT_DATABASE_URL)
    redis_url = os.environ.get("REDIS_URL", DEFAULT_REDIS_URL)
    lock = hold_bench_lock()  # noqa: F841 - held until the process exits
    affinity = plan_affinity()
    log("preparing the database")
    env = django_env(database_url, redis_url) if args.keep_database else prepare_database(database_url, redis_url)
    run_checked([PYTHON, "manage.py", "shell", "-c", SETUP], env, "parts setup")
    server = daphne_server(env, affinity.server, label="parts")
    if args.probe:
        probe = os.environ.get("GOV_PARTS_PROBE_SCRIPT", str(ROOT / "bench" / "gov_probe.py"))
        server.cmd = [PYTHON, probe, *server.cmd[3:]]
        server.env = dict(server.env, GOV_PROBE_OUT=PROBE_OUT)
    elif bare:
        server.cmd = [PYTHON, str(ROOT / "bench" / "gov_bare.py"), *server.cmd[3:]]
        server.env = dict(server.env, GOV_BARE_CEL="0" if args.bare_without_cel else "1")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S')}, load average before start: "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {affinity.note}")  # fmt: skip
    print(f"tools/call echo at c={CONCURRENCY}, {args.rounds} rounds of one {args.slice:g} s slice a tenant"
          f"{' (through bench/gov_probe.py)' if args.probe else ''}"
          f"{' (through bench/gov_bare.py' + (', no CEL)' if args.bare_without_cel else ')') if bare else ''}"
          f"{' (py-spy recording)' if args.pyspy else ''}")
    print()
    with running(server):
        asyncio.run(server.wait_ready())
        spy = PySpy(server.pid) if args.pyspy else None
        raw = asyncio.run(drive(server.port, server.pid, tenants, args.rounds, args.slice, args.warmup, spy))
        if args.probe:
            time.sleep(2.5)
    report(raw, tenants)
    print()
    for tenant in tenants:
        faults = sum(f for f, _, _ in FAULTS[tenant])
        switches = sum(c for _, c, _ in FAULTS[tenant])
        requests = sum(r for _, _, r in FAULTS[tenant]) or 1
        print(f"- {tenant}: {faults / requests:.2f} minor page faults, {switches / requests:.2f} context switches a request")
    if args.probe:
        report_probe()
    if args.pyspy:
        print(f"\npy-spy stacks: {PYSPY_DIR}/<tenant>-*.txt")


if __name__ == "__main__":
    sys.exit(main())
