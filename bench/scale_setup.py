"""Fill a (freshly migrated and seeded) database for the tenant-scale benchmark.

    DATABASE_URL=... python bench/scale_setup.py --tenants 10000 --tools 1000

Creates tenant `scale-target` with `--tools` tools, plus filler tenants (5 tools each) so the
database holds `--tenants` tenants in all (the seeded `demo` counts). Every tenant and tool is a
copy of the demo tenant and its `echo` tool (same auth settings, handler, schemas), so the two
setups differ only in how many rows there are. Uses bulk_create: no signals, no per-row cost.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

import django  # noqa: E402

django.setup()

from django.db import transaction  # noqa: E402

from mcp_app.models import Tool  # noqa: E402
from tenants.models import Tenant  # noqa: E402

FILLER_TOOLS = 5
BATCH = 5000


def clone_tenant(demo: Tenant, slug: str) -> Tenant:
    values = {f.attname: getattr(demo, f.attname) for f in Tenant._meta.concrete_fields if not f.primary_key}
    values.update(slug=slug, name=slug, title=slug)
    return Tenant(**values)


def clone_tool(echo: Tool, tenant: Tenant, name: str) -> Tool:
    values = {f.attname: getattr(echo, f.attname) for f in Tool._meta.concrete_fields if not f.primary_key}
    values.update(tenant_id=tenant.pk, name=name, description=f"{name}: {echo.description}")
    return Tool(**values)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tenants", type=int, required=True, help="tenants in the database in all")
    parser.add_argument("--tools", type=int, required=True, help="tools of the measured tenant")
    parser.add_argument(
        "--target-id",
        type=int,
        required=True,
        help="primary key of the measured tenant; distinct per database, because both servers share "
        "one Redis and per-tenant keys there are named by id",
    )
    args = parser.parse_args()

    demo = Tenant.objects.get(slug="demo")
    echo = Tool.objects.get(tenant=demo, name="echo")
    with transaction.atomic():
        target = clone_tenant(demo, "scale-target")
        target.pk = args.target_id
        target.save(force_insert=True)
        Tool.objects.bulk_create(
            [clone_tool(echo, target, f"tool_{i:05d}") for i in range(args.tools)], batch_size=BATCH
        )
        fillers = [clone_tenant(demo, f"filler-{i:05d}") for i in range(max(0, args.tenants - 2))]
        Tenant.objects.bulk_create(fillers, batch_size=BATCH)
        fillers = list(Tenant.objects.filter(slug__startswith="filler-"))
        tools: list[Tool] = []
        for tenant in fillers:
            tools.extend(clone_tool(echo, tenant, f"tool_{i:05d}") for i in range(FILLER_TOOLS))
            if len(tools) >= BATCH:
                Tool.objects.bulk_create(tools, batch_size=BATCH)
                tools = []
        Tool.objects.bulk_create(tools, batch_size=BATCH)
    print(f"tenants={Tenant.objects.count()} tools={Tool.objects.count()} target_tools={args.tools}")


if __name__ == "__main__":
    main()
