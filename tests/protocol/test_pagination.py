"""Cursor pagination of the list methods (checklist §5.8)."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from mcp_app.models import Tool
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

LISTS = [
    ("tools/list", "tools", "name"),
    ("prompts/list", "prompts", "name"),
    ("resources/list", "resources", "uri"),
    ("resources/templates/list", "resourceTemplates", "uriTemplate"),
]


async def collect(ctx, method: str, key: str) -> tuple[list[dict], int]:
    items: list[dict] = []
    params: dict = {}
    pages = 0
    while True:
        result = await result_of(ctx, method, params)
        pages += 1
        items.extend(result[key])
        assert result.get("nextCursor", "") is not None  # never null
        if "nextCursor" not in result:
            return items, pages
        assert isinstance(result["nextCursor"], str)
        params = {"cursor": result["nextCursor"]}
        assert pages < 50


@pytest.mark.parametrize(("method", "key", "field"), LISTS)
async def test_pg02_pages_cover_every_item_once_and_the_last_omits_next_cursor(
    demo_a, settings, method, key, field
):
    settings.MCP_PAGE_SIZE = 1
    ctx = make_ctx(demo_a)
    paged, pages = await collect(ctx, method, key)
    settings.MCP_PAGE_SIZE = 1000
    whole = (await result_of(ctx, method))[key]
    assert paged == whole
    assert pages == len(whole)
    assert [i[field] for i in paged] == sorted(i[field] for i in paged)


async def test_pg02_a_single_page_has_no_next_cursor(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/list")
    assert "nextCursor" not in result


async def test_pg01_the_page_size_follows_the_setting(demo_a, settings):
    settings.MCP_PAGE_SIZE = 3
    result = await result_of(make_ctx(demo_a), "tools/list")
    assert len(result["tools"]) == 3
    assert result["nextCursor"]


@pytest.mark.parametrize("cursor", ["garbage", "", 5, ["list"], {"offset": 1}, "a" * 5000])
async def test_pg05_an_invalid_cursor_is_invalid_params(demo_a, cursor):
    error = await error_of(make_ctx(demo_a), "tools/list", {"cursor": cursor})
    assert error["code"] == INVALID_PARAMS


async def test_pg05_a_cursor_from_another_list_is_invalid(demo_a, settings):
    settings.MCP_PAGE_SIZE = 1
    ctx = make_ctx(demo_a)
    cursor = (await result_of(ctx, "prompts/list"))["nextCursor"]
    error = await error_of(ctx, "tools/list", {"cursor": cursor})
    assert error["code"] == INVALID_PARAMS


async def test_pg05_a_null_cursor_means_the_first_page(demo_a):
    result = await result_of(make_ctx(demo_a), "tools/list", {"cursor": None})
    assert result["tools"]


async def test_pg04_a_tool_added_between_pages_neither_repeats_nor_skips_the_others(demo_a, settings):
    settings.MCP_PAGE_SIZE = 2
    ctx = make_ctx(demo_a)
    first = await result_of(ctx, "tools/list")
    await sync_to_async(Tool.objects.create)(
        tenant=demo_a, name="aaa_first", handler="template", handler_config={"text": "x"}
    )
    rest, _ = await collect_from(ctx, first["nextCursor"])
    names = [t["name"] for t in first["tools"]] + [t["name"] for t in rest]
    assert "aaa_first" not in names  # sorted before the cursor
    assert len(names) == len(set(names))
    settings.MCP_PAGE_SIZE = 1000
    everything = [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]]
    assert names == [n for n in everything if n != "aaa_first"]


async def collect_from(ctx, cursor: str) -> tuple[list[dict], int]:
    items: list[dict] = []
    pages = 0
    while cursor:
        result = await result_of(ctx, "tools/list", {"cursor": cursor})
        items.extend(result["tools"])
        cursor = result.get("nextCursor")
        pages += 1
        assert pages < 50
    return items, pages
