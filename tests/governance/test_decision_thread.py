"""A tenant's big lists under many policies are filtered off the serving loop (AMB-353): while one is
being filtered, the loop goes on serving, and the list is the one the inline filter gives."""

from __future__ import annotations

import asyncio

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, PolicyDef, TenantInfo, ToolDef
from mcp_app.governance import decision

TOOLS = 2_000
POLICIES = 200


def hostile_catalog(tenant_id: int) -> Catalog:
    """The most a tenant may write: 200 policies (models/policies.py), each reading caller and target."""
    tools = tuple(
        ToolDef(
            id=i, name=f"tool_{i}", title="", description="", input_schema={}, output_schema=None,
            annotations={"destructiveHint": i % 2 == 0}, icons=[], meta={}, handler="template", handler_config={},
        )  # fmt: skip
        for i in range(TOOLS)
    )
    policies = tuple(
        PolicyDef(name=f"p{i}", effect="deny", applies_to="tools", condition=f'target.name == "tool_{i}" && caller.role == "viewer"')
        for i in range(POLICIES)
    )  # fmt: skip
    return Catalog(tenant_id=tenant_id, version=1, tools=tools, tools_by_name={t.name: t for t in tools}, policies=policies)


def caller(tenant_id: int, user: int) -> RequestContext:
    return RequestContext(tenant=TenantInfo(id=tenant_id, slug="t", name="t"), role="viewer", user_id=user)


async def test_a_big_list_is_filtered_while_the_loop_goes_on_serving():
    catalog = hostile_catalog(tenant_id=-1)
    ticks = 0
    filtering = True

    async def ticker() -> None:
        nonlocal ticks
        while filtering:
            await asyncio.sleep(0.002)
            ticks += 1

    ticking = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    before = ticks
    shown = await decision.shown(caller(-1, 1), catalog, catalog.tools)
    during = ticks - before
    filtering = False
    await ticking
    assert [t.name for t in shown] == [f"tool_{i}" for i in range(POLICIES, TOOLS)]
    # Inline, the loop would not turn once until the filtering ended (0.7 s here, 2 s on a loaded CI
    # machine): a count of its turns, not a time, so that a machine's load cannot make it pass or fail.
    assert during >= 20, during


async def test_callers_of_one_tenant_wait_their_turn_and_one_caller_is_filtered_once():
    catalog = hostile_catalog(tenant_id=-2)
    same = [decision.shown(caller(-2, 1), catalog, catalog.tools) for _ in range(3)]
    other = decision.shown(caller(-2, 2), catalog, catalog.tools)
    results = await asyncio.gather(*same, other)
    assert len({id(r) for r in results[:3]}) == 1  # one filtering, shared
    assert results[3] == results[0] and len(results[0]) == TOOLS - POLICIES
    assert not decision._PENDING and not decision._BUSY
