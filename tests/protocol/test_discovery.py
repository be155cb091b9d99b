"""Search mode (AMB-376) through the dispatcher: the three tools listed instead of the catalog, search by
words, shortened words and exact names, browse by upstream and tag, calls through call_tool, and the one
decision over all of it (what a caller may not use is never found, browsed or called)."""

from __future__ import annotations

import json

import pytest
from asgiref.sync import sync_to_async
from django.urls import reverse

from mcp_app.catalog import search
from mcp_app.connect import page
from mcp_app.models import Policy, Tool
from mcp_app.oauth import resources
from mcp_app.portability.document import DocumentError, export_tenant
from mcp_app.portability.importer import import_document
from mcp_app.protocol import discovery
from mcp_app.selfcheck import runner
from mcp_app.transport import runner as runner_transport
from mcp_app.usage import recorder as usage
from tenants.models import Tenant
from tests.api.conftest import API, ApiClient
from tests.protocol.support import call, ctx_for, finished, result_of
from tests.support import make_ctx
from tests.tenants.test_tenant_admin import tenant_form_data

pytestmark = pytest.mark.django_db(transaction=True)

VERSIONS = ["2025-06-18", "2026-07-28"]


def ctx_of(tenant, version: str, **kwargs):
    return make_ctx(tenant, version, session=version != "2026-07-28" or None, **kwargs)


def set_mode(tenant, mode: str) -> None:
    tenant.tool_discovery = mode
    tenant.save()


def tool(tenant, name: str, description: str = "", **fields) -> Tool:
    return Tool.objects.create(
        tenant=tenant,
        name=name,
        description=description,
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        handler="python",
        handler_config={"callable": "echo"},
        **fields,
    )


async def names(ctx) -> list[str]:
    return [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]]


async def found(ctx, name: str, arguments: dict) -> dict:
    result = await result_of(ctx, "tools/call", {"name": name, "arguments": arguments})
    assert not result.get("isError"), result
    body = json.loads(result["content"][0]["text"])
    if "structuredContent" in result:
        assert result["structuredContent"] == body
    return body


@pytest.fixture
def weather(tenant_a):
    tool(tenant_a, "get_weather_forecast", "The forecast for a city, by day.", title="Weather forecast")
    tool(tenant_a, "calculator", "Adds and multiplies numbers.", meta={"tags": ["math"]})
    tool(tenant_a, "convertUnits", "Converts lengths and weights.", meta={"_fastmcp": {"tags": ["math"]}})
    tool(tenant_a, "weather", "Today's weather only.")
    for n in range(50):
        tool(tenant_a, f"filler_{n:02d}", f"A tool about nothing in particular, number {n}.")
    set_mode(tenant_a, "search")
    return tenant_a


@pytest.mark.parametrize("version", VERSIONS)
async def test_search_mode_lists_the_three_tools_and_they_find_and_call_any_tool(weather, version) -> None:
    ctx = ctx_of(weather, version)
    assert await names(ctx) == ["browse_tools", "call_tool", "search_tools"]
    hits = (await found(ctx, "search_tools", {"query": "weather forecast"}))["tools"]
    assert [t["name"] for t in hits][:2] == ["get_weather_forecast", "weather"]
    assert hits[0]["inputSchema"]["properties"] == {"message": {"type": "string"}}  # a full definition
    assert hits[0]["title"] == "Weather forecast"
    called = await result_of(
        ctx,
        "tools/call",
        {"name": "call_tool", "arguments": {"name": "weather", "arguments": {"message": "hi"}}},
    )
    assert called["content"][0]["text"] == "hi"
    # The real name works too, listed or not.
    direct = await result_of(ctx, "tools/call", {"name": "weather", "arguments": {"message": "yo"}})
    assert direct["content"][0]["text"] == "yo"


async def test_an_exact_name_comes_first_and_shortened_words_and_camel_humps_find_tools(weather) -> None:
    ctx = ctx_of(weather, "2025-11-25")
    assert (await found(ctx, "search_tools", {"query": "weather"}))["tools"][0]["name"] == "weather"
    assert (await found(ctx, "search_tools", {"query": "WEATHER"}))["tools"][0]["name"] == "weather"
    assert (await found(ctx, "search_tools", {"query": "calc"}))["tools"][0]["name"] == "calculator"
    assert (await found(ctx, "search_tools", {"query": "convert units"}))["tools"][0][
        "name"
    ] == "convertUnits"
    assert (await found(ctx, "search_tools", {"query": "filler_07"}))["tools"][0]["name"] == "filler_07"
    limited = await found(ctx, "search_tools", {"query": "tool", "limit": 3})
    assert len(limited["tools"]) == 3
    assert (await found(ctx, "search_tools", {"query": "zzzz"}))["tools"] == []


async def test_browse_pages_in_name_order_and_groups_by_tag(weather) -> None:
    ctx = ctx_of(weather, "2025-11-25")
    first = await found(ctx, "browse_tools", {})
    assert first["tags"] == [{"name": "math", "tools": 2}] and first["upstreams"] == []
    seen = [t["name"] for t in first["tools"]]
    body = first
    while "nextCursor" in body:
        body = await found(ctx, "browse_tools", {"cursor": body["nextCursor"]})
        seen += [t["name"] for t in body["tools"]]
    assert seen == sorted(seen) and len(seen) == 54
    math = await found(ctx, "browse_tools", {"tag": "math"})
    assert [t["name"] for t in math["tools"]] == ["calculator", "convertUnits"]
    # A cursor of another group is refused with a clear message, not a 500.
    bad = await result_of(
        ctx,
        "tools/call",
        {"name": "browse_tools", "arguments": {"tag": "math", "cursor": first["nextCursor"]}},
    )
    assert bad["isError"] and "Invalid cursor" in bad["content"][0]["text"]


async def test_bad_arguments_answer_as_errors_a_model_can_mend(weather) -> None:
    ctx = ctx_of(weather, "2025-11-25")
    empty = await result_of(ctx, "tools/call", {"name": "search_tools", "arguments": {"query": ""}})
    assert empty["isError"] and "query" in empty["content"][0]["text"]
    unnamed = await result_of(ctx, "tools/call", {"name": "call_tool", "arguments": {"arguments": {}}})
    assert unnamed["isError"] and "name" in unnamed["content"][0]["text"]
    missing = await call(ctx, "tools/call", {"name": "call_tool", "arguments": {"name": "nope"}})
    assert missing["error"]["message"] == "Unknown tool: nope"


@pytest.mark.parametrize("version", VERSIONS)
async def test_what_the_decision_hides_is_never_found_browsed_or_called(weather, version) -> None:
    await sync_to_async(Policy.objects.create)(
        tenant=weather, name="no-weather", condition="target.name.contains('weather')", effect="deny"
    )
    ctx = ctx_of(weather, version)
    hits = (await found(ctx, "search_tools", {"query": "weather forecast"}))["tools"]
    assert not any("weather" in t["name"] for t in hits)
    assert (await found(ctx, "search_tools", {"query": "get_weather_forecast"}))["tools"] == []
    pages = [await found(ctx, "browse_tools", {})]
    while "nextCursor" in pages[-1]:
        pages.append(await found(ctx, "browse_tools", {"cursor": pages[-1]["nextCursor"]}))
    assert not any("weather" in t["name"] for page in pages for t in page["tools"])
    hidden = await call(ctx, "tools/call", {"name": "call_tool", "arguments": {"name": "weather"}})
    missing = await call(ctx, "tools/call", {"name": "call_tool", "arguments": {"name": "weathr"}})
    assert hidden["error"]["message"] == missing["error"]["message"].replace("weathr", "weather")


async def test_a_publish_is_searchable_at_once(weather) -> None:
    ctx = ctx_of(weather, "2025-11-25")
    assert (await found(ctx, "search_tools", {"query": "translate"}))["tools"] == []
    await sync_to_async(tool)(weather, "translator", "Translate text between languages.")
    ctx = ctx_of(weather, "2025-11-25")
    assert (await found(ctx, "search_tools", {"query": "translate"}))["tools"][0]["name"] == "translator"


async def test_auto_searches_past_forty_tools_and_a_client_may_ask_for_either_mode(tenant_a) -> None:
    for n in range(discovery.SEARCH_PAST_TOOLS):
        await sync_to_async(tool)(tenant_a, f"t{n:02d}")
    await sync_to_async(set_mode)(tenant_a, "auto")
    assert len(await names(ctx_of(tenant_a, "2025-11-25"))) == discovery.SEARCH_PAST_TOOLS
    await sync_to_async(tool)(tenant_a, "one_more")
    assert await names(ctx_of(tenant_a, "2025-11-25")) == ["browse_tools", "call_tool", "search_tools"]
    full = await names(ctx_of(tenant_a, "2025-11-25", discovery="full"))
    assert len(full) == discovery.SEARCH_PAST_TOOLS + 1
    await sync_to_async(set_mode)(tenant_a, "full")
    assert len(await names(ctx_of(tenant_a, "2025-11-25", discovery="search"))) == 3
    # In full mode the three are not tools of the server.
    missing = await call(
        ctx_of(tenant_a, "2025-11-25"), "tools/call", {"name": "search_tools", "arguments": {"query": "t"}}
    )
    assert missing["error"]["message"] == "Unknown tool: search_tools"


def test_the_url_choice_reads_only_full_or_search() -> None:
    assert discovery.choice_of("tools=search") == "search"
    assert discovery.choice_of("a=1&tools=full") == "full"
    assert discovery.choice_of("tools=everything") == ""
    assert discovery.choice_of("") == ""


def test_a_hostile_description_costs_no_more_than_its_first_characters() -> None:
    words = search.words("x" * 10 + " camelCaseWord_snake-case " + "é" * 3)
    assert words == ["xxxxxxxxxx", "camelcaseword", "camel", "case", "word", "snake", "case", "ééé"]


def test_the_owner_chooses_the_mode_in_the_admin_the_api_and_the_document(client, alice, tenant_a) -> None:
    assert tenant_a.tool_discovery == "full"  # as before, unless the owner chooses
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert 'name="tool_discovery"' in client.get(url).content.decode()
    assert client.post(url, tenant_form_data(tenant_a, tool_discovery="search")).status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.tool_discovery == "search"

    api = ApiClient(alice)
    assert api.call("GET", f"{API}/tenant-a/").json()["tool_discovery"] == "search"
    changed = api.call("PATCH", f"{API}/tenant-a/", {"tool_discovery": "auto"})
    assert changed.status_code == 200 and changed.json()["tool_discovery"] == "auto"
    refused = api.call("PATCH", f"{API}/tenant-a/", {"tool_discovery": "everything"})
    assert refused.status_code == 400 and "tool_discovery" in refused.json()["error"]["fields"]

    tenant_a.refresh_from_db()
    document = export_tenant(tenant_a)
    assert document["settings"]["tool_discovery"] == "auto"
    copy = Tenant.objects.create(slug="copy", name="Copy")
    import_document(copy, document)
    copy.refresh_from_db()
    assert copy.tool_discovery == "auto"
    document["settings"]["tool_discovery"] = "everything"
    with pytest.raises(DocumentError) as refused_document:
        import_document(copy, document)
    assert "tool_discovery" in str(refused_document.value)


def test_search_as_a_client_in_the_admin_is_a_members_own_and_runs_nothing(
    client, bob, charlie, weather, tenant_b
):
    """A viewer searches (nothing runs); another tenant's slug answers as a missing one; the tenant's
    mode does not matter (it is tried as search mode)."""
    url = reverse("admin:mcp_app_tool_search")
    client.force_login(bob)
    weather.tool_discovery = "full"
    weather.save()
    page = client.get(url, {"tenant": weather.slug, "q": "forecast", "era": "2025-11-25"})
    assert page.status_code == 200
    assert [f["name"] for f in page.context["found"]][:1] == ["get_weather_forecast"]
    browsed = client.get(url, {"tenant": weather.slug, "browse": "1", "era": "2026-07-28"}).context["found"]
    assert len(browsed) == discovery.BROWSE_PAGE
    assert client.get(url, {"tenant": tenant_b.slug, "q": "x"}).status_code == 404
    assert client.get(url, {"tenant": "no-such", "q": "x"}).status_code == 404
    assert "problem" in client.get(url, {"tenant": weather.slug, "q": "x", "era": "1.0"}).context
    client.force_login(charlie)
    assert client.get(url, {"tenant": weather.slug, "q": "forecast"}).status_code == 404


async def test_the_self_check_and_the_connect_page_see_every_tool_of_a_search_mode_tenant(weather) -> None:
    report = await runner.run(weather.slug, network=False)
    assert set(report.listed["2026-07-28"]) == {
        t.name for t in await sync_to_async(list)(Tool.objects.filter(tenant=weather))
    }
    assert not [f for f in report.findings if f.check == "listing"], report.findings
    eras = await page.served(weather.slug, None)
    assert eras is not None and "get_weather_forecast" in eras[0].listings[0].names


def test_usage_counts_a_call_through_call_tool_as_the_named_tools(tenant_a, monkeypatch) -> None:
    monkeypatch.setattr(runner_transport.usage_flush, "started", lambda: True)  # no flush thread here
    tenant_a.tool_discovery = "search"
    ctx = make_ctx(tenant_a, "2026-07-28", session=None)
    message = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    usage.recorder().take()
    for params in (
        {"name": "call_tool", "arguments": {"name": "weather", "arguments": {}}},
        {"name": "search_tools", "arguments": {"query": "x"}},
        {"name": "call_tool", "arguments": {"name": 7}},  # refused by its schema: counted as itself
    ):
        runner_transport.record_usage(ctx, {**message, "params": params}, {"result": {"content": []}}, 0.0)
    counted, _ = usage.recorder().take()
    assert sorted(key[3] for key in counted) == ["call_tool", "search_tools", "weather"]


async def test_a_tool_that_runs_only_as_a_task_is_called_as_one_through_call_tool(tenant_a) -> None:
    await sync_to_async(tool)(tenant_a, "long_job", "Works a long time.", task_support="required")
    await sync_to_async(set_mode)(tenant_a, "search")
    ctx = await ctx_for(tenant_a, "2025-11-25")
    listed = {t["name"]: t for t in (await result_of(ctx, "tools/list"))["tools"]}
    assert listed["call_tool"]["execution"] == {"taskSupport": "optional"}
    plain = await call(ctx, "tools/call", {"name": "call_tool", "arguments": {"name": "long_job"}})
    assert plain["error"]["message"] == "Tool 'long_job' must be called as a task (params.task)."
    asked = {
        "name": "call_tool",
        "arguments": {"name": "long_job", "arguments": {"message": "hi"}},
        "task": {},
    }
    handle = (await result_of(ctx, "tools/call", asked))["task"]
    assert (await finished(ctx, handle["taskId"]))["status"] == "completed"
    result = await result_of(ctx, "tasks/result", {"taskId": handle["taskId"]})
    assert result["content"][0]["text"] == "hi"


def test_the_mcp_url_with_a_discovery_choice_is_the_same_oauth_resource(settings) -> None:
    settings.MCP_PUBLIC_URL = "https://mcp.example.com"
    canonical = resources.canonical_uri("tenant-a")
    for asked in ("?tools=search", "?tools=full"):
        assert resources.normalize(canonical + asked) == canonical
        assert resources.slug_for_resource(canonical + asked) == "tenant-a"
    assert resources.slug_for_resource(canonical + "?tools=search&x=1") is None  # another resource
