"""Kept tool results (protocol/result_cache.py, AMB-374): per caller, per definitions version, never an
error, bounded per tenant; the decision and the guardrails still stand in front of them. With Redis
when REDIS_URL is set (what every process shares), in this process's memory otherwise."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from mcp_app.handlers.python import register
from mcp_app.infra import redis_client
from mcp_app.models import Policy, Tool
from mcp_app.protocol import result_cache
from tenants.models import Tenant
from tests.protocol.support import call, result_of
from tests.support import make_ctx

_counter = itertools.count(1)


@register("test_result_cache_counter")
async def counter(ctx: Any, arguments: dict[str, Any]) -> dict[str, Any]:
    """A new number every run: a kept result is the one number seen again. It says it is public, as a
    hostile upstream would: that must not widen what is kept."""
    number = next(_counter)
    if arguments.get("fail"):
        return {"content": [{"type": "text", "text": f"failed {number}"}], "isError": True}
    return {
        "content": [{"type": "text", "text": f"run {number} for {arguments.get('q')}"}],
        "_meta": {"cacheScope": "public"},
        "cacheScope": "public",
        "ttlMs": 3_600_000,
    }


KEPT = {"readOnlyHint": True, "idempotentHint": True}
SCHEMA = {"type": "object", "properties": {"q": {"type": "string"}, "fail": {"type": "boolean"}}}


@pytest.fixture
def kept_tenant(transactional_db, tenant_a) -> Tenant:
    Tool.objects.create(
        tenant=tenant_a, name="lookup", handler="python", handler_config={"callable": "test_result_cache_counter"},
        input_schema=SCHEMA, annotations=KEPT, result_cache_seconds=60,
    )  # fmt: skip
    Tool.objects.create(
        tenant=tenant_a, name="shared", handler="python", handler_config={"callable": "test_result_cache_counter"},
        input_schema=SCHEMA, annotations=KEPT, result_cache_seconds=60, result_cache_shared=True,
    )  # fmt: skip
    Tool.objects.create(
        tenant=tenant_a, name="fresh", handler="python", handler_config={"callable": "test_result_cache_counter"},
        input_schema=SCHEMA, annotations=KEPT,
    )  # fmt: skip
    result_cache.forget()
    if redis_client.enabled():  # tenant ids repeat across tests: start from an empty store
        keys = redis_client.sync_client().keys(f"{result_cache.KEY_PREFIX}{tenant_a.id}:*")
        if keys:
            redis_client.sync_client().delete(*keys)
    return tenant_a


def edit(tenant: Tenant) -> None:
    tool = Tool.objects.get(tenant=tenant, name="fresh")
    tool.description = "edited"
    tool.save()


def deny(tenant: Tenant, condition: str) -> None:
    row = Policy(tenant=tenant, name="no-alice", condition=condition, effect="deny")
    row.full_clean()
    row.save()


async def text_of(ctx: Any, name: str, **arguments: Any) -> str:
    result = await result_of(ctx, "tools/call", {"name": name, "arguments": arguments})
    return str(result["content"][0]["text"])


def caller(tenant: Tenant, **kwargs: Any) -> Any:
    return make_ctx(tenant, version="2026-07-28", session=None, **kwargs)


async def test_the_same_caller_and_arguments_get_the_kept_result_and_another_caller_its_own(kept_tenant):
    alice, bob = caller(kept_tenant, user_id=1), caller(kept_tenant, user_id=2)
    first = await text_of(alice, "lookup", q="a")
    assert await text_of(alice, "lookup", q="a") == first  # kept
    assert await text_of(alice, "lookup", q="b") != first  # other arguments, another run
    # Another identity never sees Alice's result, though the tool said it was public.
    bobs = await text_of(bob, "lookup", q="a")
    assert bobs != first and await text_of(bob, "lookup", q="a") == bobs
    # The same user through another client, or with other scopes, is another authorization context.
    assert await text_of(caller(kept_tenant, user_id=1, client_id="other-app"), "lookup", q="a") != first
    assert (
        await text_of(caller(kept_tenant, user_id=1, scopes=frozenset({"mcp:tools"})), "lookup", q="a")
        != first
    )
    # A tool that keeps nothing runs every time.
    assert await text_of(alice, "fresh", q="a") != await text_of(alice, "fresh", q="a")


async def test_the_owners_word_alone_keeps_one_result_for_every_caller(kept_tenant):
    first = await text_of(caller(kept_tenant, user_id=1), "shared", q="a")
    assert await text_of(caller(kept_tenant, user_id=2), "shared", q="a") == first
    assert await text_of(caller(kept_tenant, client_address="10.9.9.9"), "shared", q="a") == first


async def test_an_error_result_is_never_kept(kept_tenant):
    alice = caller(kept_tenant, user_id=1)
    assert await text_of(alice, "lookup", q="a", fail=True) != await text_of(
        alice, "lookup", q="a", fail=True
    )


async def test_a_publish_or_a_policy_starts_afresh_and_a_denied_caller_never_reaches_a_kept_result(
    kept_tenant,
):
    alice = caller(kept_tenant, user_id=1)
    first = await text_of(alice, "lookup", q="a")
    # An unrelated edit is a new definitions version: nothing kept before it is found again.
    await sync_to_async(edit)(kept_tenant)
    second = await text_of(caller(kept_tenant, user_id=1), "lookup", q="a")
    assert second != first
    # A policy that denies Alice the tool: her kept result is not an answer any more.
    alice = caller(kept_tenant, subject="alice")
    await text_of(alice, "lookup", q="a")
    await sync_to_async(deny)(kept_tenant, "caller.subject == 'alice'")
    reply = await call(
        caller(kept_tenant, subject="alice"), "tools/call", {"name": "lookup", "arguments": {"q": "a"}}
    )
    assert "error" in reply and "Unknown tool" in reply["error"]["message"], reply


async def test_a_result_larger_than_the_tenants_bound_is_not_kept(kept_tenant, settings):
    settings.MCP_RESULT_CACHE_TENANT_BYTES = 1024
    alice = caller(kept_tenant, user_id=1)
    assert await text_of(alice, "lookup", q="x" * 2000) != await text_of(alice, "lookup", q="x" * 2000)
    assert await text_of(alice, "lookup", q="y") == await text_of(alice, "lookup", q="y")


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"annotations": {"readOnlyHint": True}}, "idempotentHint"),
        ({"annotations": KEPT, "execution": "background"}, "background"),
        ({"annotations": KEPT, "approval": "every_time"}, "asks the person"),
    ],
)
def test_only_a_read_only_idempotent_tool_that_asks_nothing_may_keep_results(tenant_a, fields, says):
    tool = Tool(
        tenant=tenant_a, name="lookup", handler="python", handler_config={"callable": "test_result_cache_counter"},
        input_schema=SCHEMA, result_cache_seconds=60, **fields,
    )  # fmt: skip
    with pytest.raises(ValidationError) as raised:
        tool.full_clean()
    assert says in " ".join(raised.value.message_dict["result_cache_seconds"])
