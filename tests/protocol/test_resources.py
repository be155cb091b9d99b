"""Resources: list, templates, read, subscribe (checklist §5.4)."""

from __future__ import annotations

import base64
import json

import pytest

from mcp_app.protocol.jsonrpc import INVALID_PARAMS, RESOURCE_NOT_FOUND
from mcp_app.protocol.resources import MAX_SUBSCRIPTIONS
from tests.protocol.support import ICON, PNG, error_of, result_of
from tests.support import make_ctx


async def test_rs01_resources_list_describes_each_resource(demo_a):
    result = await result_of(make_ctx(demo_a), "resources/list")
    resources = {r["uri"]: r for r in result["resources"]}
    assert list(resources) == ["demo://config.json", "demo://logo.png", "demo://readme"]
    assert resources["demo://readme"] == {
        "uri": "demo://readme",
        "name": "readme",
        "title": "Read me",
        "description": "How to use the demo",
        "mimeType": "text/markdown",
        "size": len(b"# Demo\nHello."),
        "annotations": {"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-01T00:00:00Z"},
        "icons": [ICON],
    }
    assert resources["demo://logo.png"]["size"] == len(PNG)


async def test_rs02_reading_a_text_resource_returns_its_text(demo_a):
    result = await result_of(make_ctx(demo_a), "resources/read", {"uri": "demo://readme"})
    assert result == {
        "contents": [{"uri": "demo://readme", "mimeType": "text/markdown", "text": "# Demo\nHello."}]
    }


async def test_rs02_reading_a_binary_resource_returns_base64_blob(demo_a):
    result = await result_of(make_ctx(demo_a), "resources/read", {"uri": "demo://logo.png"})
    (contents,) = result["contents"]
    assert contents["mimeType"] == "image/png"
    assert "text" not in contents
    assert base64.b64decode(contents["blob"]) == PNG


async def test_rs03_templates_list_describes_each_template(demo_a):
    result = await result_of(make_ctx(demo_a, "2025-06-18"), "resources/templates/list")
    templates = {t["uriTemplate"]: t for t in result["resourceTemplates"]}
    assert templates["demo://users/{user_id}/profile"] == {
        "uriTemplate": "demo://users/{user_id}/profile",
        "name": "user-profile",
        "title": "User profile",
        "mimeType": "application/json",
    }
    assert "completions" not in json.dumps(result)


async def test_rs03_reading_an_expansion_of_a_template_works(demo_a):
    result = await result_of(make_ctx(demo_a), "resources/read", {"uri": "demo://users/42/profile"})
    (contents,) = result["contents"]
    assert contents["uri"] == "demo://users/42/profile"
    assert contents["mimeType"] == "application/json"
    assert json.loads(contents["text"]) == {"user_id": "42", "name": "User 42"}


async def test_rs03_a_reserved_expansion_may_span_several_path_segments(demo_a):
    result = await result_of(make_ctx(demo_a), "resources/read", {"uri": "file:///etc/app/config.txt"})
    assert result["contents"][0]["text"] == "file etc/app/config.txt"


async def test_rs03_a_simple_expansion_does_not_span_path_segments(demo_a):
    error = await error_of(make_ctx(demo_a), "resources/read", {"uri": "demo://users/1/2/profile"})
    assert error["code"] == RESOURCE_NOT_FOUND


async def test_rs07_an_unknown_resource_is_32002_with_its_uri(demo_a):
    error = await error_of(make_ctx(demo_a), "resources/read", {"uri": "demo://missing"})
    assert error["code"] == RESOURCE_NOT_FOUND
    assert error["data"] == {"uri": "demo://missing"}


async def test_rs10_a_uri_outside_the_tenant_definitions_is_never_fetched(demo_a):
    error = await error_of(make_ctx(demo_a), "resources/read", {"uri": "http://127.0.0.1:1/secret"})
    assert error["code"] == RESOURCE_NOT_FOUND


@pytest.mark.parametrize("params", [{}, {"uri": ""}, {"uri": 5}])
async def test_rs02_a_read_without_a_uri_is_invalid_params(demo_a, params):
    error = await error_of(make_ctx(demo_a), "resources/read", params)
    assert error["code"] == INVALID_PARAMS


async def test_rs05_subscribe_records_the_uri_in_the_session(demo_a):
    ctx = make_ctx(demo_a)
    assert await result_of(ctx, "resources/subscribe", {"uri": "demo://readme"}) == {}
    assert await result_of(ctx, "resources/subscribe", {"uri": "demo://readme"}) == {}
    assert await result_of(ctx, "resources/subscribe", {"uri": "demo://users/7/profile"}) == {}
    assert ctx.session.subscriptions == ["demo://readme", "demo://users/7/profile"]


async def test_amb21_subscribing_to_an_unknown_uri_is_32002(demo_a):
    ctx = make_ctx(demo_a)
    error = await error_of(ctx, "resources/subscribe", {"uri": "demo://nothing"})
    assert error["code"] == RESOURCE_NOT_FOUND
    assert ctx.session.subscriptions == []


async def test_amb21_a_session_holds_a_bounded_number_of_subscriptions(demo_a):
    ctx = make_ctx(demo_a)
    ctx.session.subscriptions.extend(f"demo://users/{i}/profile" for i in range(MAX_SUBSCRIPTIONS))
    error = await error_of(ctx, "resources/subscribe", {"uri": "demo://readme"})
    assert error["code"] == INVALID_PARAMS
    assert len(ctx.session.subscriptions) == MAX_SUBSCRIPTIONS


async def test_amb1_subscribe_without_a_session_is_accepted_without_effect(demo_a):
    assert (
        await result_of(make_ctx(demo_a, session=None), "resources/subscribe", {"uri": "demo://readme"}) == {}
    )


async def test_rs06_unsubscribe_removes_the_uri_and_tolerates_unknown_ones(demo_a):
    ctx = make_ctx(demo_a)
    await result_of(ctx, "resources/subscribe", {"uri": "demo://readme"})
    assert await result_of(ctx, "resources/unsubscribe", {"uri": "demo://readme"}) == {}
    assert await result_of(ctx, "resources/unsubscribe", {"uri": "demo://never"}) == {}
    assert ctx.session.subscriptions == []
