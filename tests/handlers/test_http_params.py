"""The http kind's ``parameters``/``body``: arguments in the URL's path, the query, headers or the body."""

from __future__ import annotations

import json

import pytest
from django.core.exceptions import ValidationError

from mcp_app.handlers import registry
from tests.handlers.support import make_tool


def placed_tool(url: str, **config):
    return make_tool("http", {"url": url, **config})


async def test_path_query_and_header_parameters_go_where_they_belong_and_the_rest_is_the_body(
    ctx, upstream, allow_local
):
    tool = placed_tool(
        f"{upstream.base}/{{which}}",
        parameters={
            "which": {"in": "path"},
            "limit": {"in": "query"},
            "trace": {"in": "header", "name": "X-Trace-Id"},
        },
    )
    result = await registry.run_inline(
        ctx, tool, {"which": "echo", "limit": 5, "trace": "t-1", "name": "Kit"}
    )
    assert result["structuredContent"] == {"received": {"name": "Kit"}, "path": "/echo?limit=5"}
    [request] = upstream.requests
    assert (request["method"], request["headers"]["X-Trace-Id"]) == ("POST", "t-1")


async def test_a_path_value_is_percent_encoded_and_cannot_leave_its_segment(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/items/{{id}}", method="GET", parameters={"id": {"in": "path"}})
    await registry.run_inline(ctx, tool, {"id": "../a/b?c=1#x"})
    assert upstream.requests[0]["path"] == "/items/..%2Fa%2Fb%3Fc%3D1%23x"


@pytest.mark.parametrize("value", [".", "..", ""])
async def test_a_path_value_that_would_move_up_the_path_is_refused(ctx, upstream, allow_local, value):
    tool = placed_tool(f"{upstream.base}/items/{{id}}", method="GET", parameters={"id": {"in": "path"}})
    result = await registry.run_inline(ctx, tool, {"id": value})
    assert result["isError"] is True and upstream.requests == []


async def test_a_list_query_parameter_repeats_its_key(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/echo", method="GET", parameters={"tags": {"in": "query"}})
    result = await registry.run_inline(ctx, tool, {"tags": ["a", "b c"], "n": 2})
    assert result["structuredContent"]["path"] == "/echo?tags=a&tags=b+c&n=2"


async def test_the_body_argument_is_sent_as_the_whole_body(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/echo", body="items", parameters={})
    result = await registry.run_inline(ctx, tool, {"items": [1, 2], "dry": True})
    assert result["structuredContent"] == {"received": [1, 2], "path": "/echo?dry=true"}


async def test_a_post_with_nothing_left_for_the_body_sends_no_body(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/echo", parameters={"q": {"in": "query"}})
    result = await registry.run_inline(ctx, tool, {"q": "x"})
    assert result["structuredContent"] == {"received": None, "path": "/echo?q=x"}
    assert upstream.requests[0]["body"] == b""


async def test_a_missing_path_argument_is_an_error_result_naming_it(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/items/{{id}}", parameters={"id": {"in": "path"}})
    result = await registry.run_inline(ctx, tool, {})
    assert result["isError"] is True and "'id'" in result["content"][0]["text"]


async def test_a_header_value_with_a_line_break_is_refused(ctx, upstream, allow_local):
    tool = placed_tool(f"{upstream.base}/echo", parameters={"t": {"in": "header", "name": "X-T"}})
    result = await registry.run_inline(ctx, tool, {"t": "a\r\nHost: evil"})
    assert result["isError"] is True and upstream.requests == []


async def test_a_config_without_parameters_still_sends_every_argument_as_the_body(ctx, upstream, allow_local):
    result = await registry.run_inline(ctx, placed_tool(f"{upstream.base}/echo"), {})
    assert json.loads(upstream.requests[0]["body"]) == {} and result["structuredContent"]["received"] == {}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"url": "https://x.example/a/{id}", "parameters": {}}, "no parameter for: id"),
        ({"url": "https://x.example/a", "parameters": {"id": {"in": "path"}}}, "no placeholder for: id"),
        ({"url": "https://{h}.example/a", "parameters": {}}, "not its host"),
        ({"url": "https://x.example/a", "parameters": {"id": {"in": "cookie"}}}, "must be"),
        ({"url": "https://x.example/a", "parameters": {"id": {"in": "query", "x": 1}}}, "must be"),
        (
            {"url": "https://x.example/a", "parameters": {"k": {"in": "header", "name": "Authorization"}}},
            "secret header",
        ),
        (
            {"url": "https://x.example/a", "parameters": {"k": {"in": "header", "name": "Host"}}},
            "set by the platform",
        ),
        (
            {"url": "https://x.example/a", "parameters": {"k": {"in": "header", "name": "Bad Name"}}},
            "not a valid header",
        ),
        ({"url": "https://x.example/a", "parameters": []}, "must be an object"),
        (
            {"url": "https://x.example/a", "parameters": {"b": {"in": "query"}}, "body": "b"},
            "'body' must name",
        ),
    ],
)
def test_a_parameters_config_that_cannot_work_is_refused_at_save(config, message):
    with pytest.raises(ValidationError, match=message):
        registry.validate_config("http", config)


def test_a_well_formed_parameters_config_is_accepted():
    registry.validate_config(
        "http",
        {
            "url": "https://x.example/a/{id}",
            "method": "GET",
            "parameters": {"id": {"in": "path"}, "q": {"in": "query"}},
        },
    )
