"""Fill a (freshly migrated and seeded) database for the tenant-scale benchmark.

    DATABASE_URL=... python bench/scale_setup.py --tenants 10000 --tools 1000

Creates tenant `scale-target` with `--tools` tools, plus filler tenants (5 tools each) so the
database holds `--tenants` tenants in all (the seeded `demo` counts). Every tenant and tool is a
copy of the demo tenant and its `echo` tool (same auth settings, handler, schemas), so the two
setups differ only in how many rows there are. Uses bulk_create: no signals, no per-row cost.

With `--upstreams N --upstream-url URL --dead-url URL` the target's tools are instead published from
N upstream servers (`--tools` / N each, prefixed `uK_`), as `service.publish` leaves them (a Tool row of
the `upstream` kind beside its UpstreamTool); the first upstream's URL is `--dead-url` (nothing
listens there), the others `--upstream-url`.
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
from django.utils import timezone  # noqa: E402

from mcp_app.models import Tool, Upstream, UpstreamTool  # noqa: E402
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


def publish_from_upstreams(echo: Tool, target: Tenant, tools: int, upstreams: int, url: str, dead: str) -> None:
    """The target's tools as published from ``upstreams`` servers, the first of them dead."""
    now = timezone.now()
    rows = Upstream.objects.bulk_create(
        [
            Upstream(
                tenant=target, name=f"up{k}", url=dead if k == 0 else url, prefix=f"u{k}_", mode="legacy"
            )
            for k in range(upstreams)
        ]
    )
    per = tools // upstreams
    for upstream in rows:
        published = []
        remote = []
        for i in range(per):
            name = f"tool_{i:05d}"
            tool = clone_tool(echo, target, f"{upstream.prefix}{name}")
            tool.handler, tool.handler_config = "upstream", {"upstream": upstream.name, "tool": name, "fixed": {}}
            published.append(tool)
            definition = {"name": name, "description": tool.description, "inputSchema": tool.input_schema}
            remote.append((name, definition))
        published = Tool.objects.bulk_create(published, batch_size=BATCH)
        UpstreamTool.objects.bulk_create(
            [
                UpstreamTool(
                    tenant=target,
                    upstream=upstream,
                    remote_name=name,
                    offered=definition,
                    pinned=definition,
                    tool=tool,
                    last_seen_at=now,
                )
                for (name, definition), tool in zip(remote, published, strict=True)
            ],
            batch_size=BATCH,
        )


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
    parser.add_argument("--upstreams", type=int, default=0, help="publish the target's tools from N upstreams")
    parser.add_argument("--upstream-url", default="", help="the live upstreams' URL")
    parser.add_argument("--dead-url", default="", help="the first upstream's URL, where nothing listens")
    args = parser.parse_args()

    demo = Tenant.objects.get(slug="demo")
    echo = Tool.objects.get(tenant=demo, name="echo")
    with transaction.atomic():
        target = clone_tenant(demo, "scale-target")
        target.pk = args.target_id
        target.save(force_insert=True)
        if args.upstreams:
            publish_from_upstreams(echo, target, args.tools, args.upstreams, args.upstream_url, args.dead_url)
        else:
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
