"""A sensitive form is filled in on the platform's own page, never in the client (URL-mode elicitation).

handlers/form.py ("sensitive": true), handlers/url_forms.py, mcp_app/handlers/form_page.py. The page is driven
here with Django's test client; tests/e2e/test_sensitive_form.py drives it in a real browser.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import urlsplit

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError
from django.test import Client

from mcp_app.handlers import registry
from mcp_app.models import Tool
from mcp_app.protocol import asking
from mcp_app.protocol.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from tenants.models import Membership, Tenant
from tests.protocol.support import call, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)

MODERN = "2026-07-28"
CAN_OPEN_PAGES = {"elicitation": {"form": {}, "url": {}}}
FIELDS = {
    "type": "object",
    "properties": {
        "api_key": {"type": "string", "title": "API key", "minLength": 8},
        "region": {"type": "string", "enum": ["eu", "us"]},
        "retries": {"type": "integer", "minimum": 0},
    },
    "required": ["api_key", "region"],
}
CONFIG = {
    "message": "Connect {{ service }}",
    "fields": FIELDS,
    "sensitive": True,
    "text": "Connected in {{ region }}.",
}
CALL = {"name": "connect", "arguments": {"service": "Acme"}}


@pytest.fixture
def connect_tool(tenant_a):
    Tool.objects.create(
        tenant=tenant_a, name="connect", handler="form", handler_config=CONFIG, timeout_seconds=30
    )
    return tenant_a


def page_path(url: str) -> str:
    return urlsplit(url).path


async def submit(path: str, data: dict[str, Any], client: Client | None = None) -> Any:
    client = client or Client()
    return await sync_to_async(client.post)(path, data)


async def test_a_modern_call_sends_the_person_to_the_page_and_ends_with_what_they_submitted_there(
    connect_tool, settings
):
    settings.MCP_URL_FORM_WAIT_SECONDS = 5
    ctx = make_ctx(connect_tool, version=MODERN, session=None, client_capabilities=CAN_OPEN_PAGES)
    first = await result_of(ctx, "tools/call", CALL)
    (question,) = first["inputRequests"].values()
    params = question["params"]
    assert params["mode"] == "url" and "elicitationId" not in params  # 2026-07-28 has none
    assert params["message"].startswith("Connect Acme")
    assert page_path(params["url"]).startswith("/t/tenant-a/form/")
    page = await sync_to_async(Client().get)(page_path(params["url"]))
    assert page.status_code == 200 and b"API key" in page.content and b'type="password"' in page.content
    sent = await submit(page_path(params["url"]), {"api_key": "sk-12345678", "region": "eu", "retries": "2"})
    assert b"Sent" in sent.content
    retry = {**CALL, "requestState": first["requestState"], "inputResponses": {"q1": {"action": "accept"}}}
    done = await result_of(ctx, "tools/call", retry)
    assert done["content"] == [{"type": "text", "text": "Connected in eu."}]
    assert "structuredContent" not in done and "sk-12345678" not in str(done)


async def test_a_modern_retry_before_the_page_is_submitted_asks_again_with_the_same_page(
    connect_tool, settings
):
    settings.MCP_URL_FORM_WAIT_SECONDS = 0
    ctx = make_ctx(connect_tool, version=MODERN, session=None, client_capabilities=CAN_OPEN_PAGES)
    first = await result_of(ctx, "tools/call", CALL)
    retry = {**CALL, "requestState": first["requestState"], "inputResponses": {"q1": {"action": "accept"}}}
    again = await result_of(ctx, "tools/call", retry)
    assert again["resultType"] == "input_required"
    assert again["inputRequests"]["q2"]["params"]["url"] == first["inputRequests"]["q1"]["params"]["url"]


async def test_a_legacy_call_asks_with_an_elicitation_id_and_says_when_the_page_was_submitted(connect_tool):
    sent: list[dict[str, Any]] = []

    async def emit(message: dict[str, Any]) -> None:
        sent.append(message)

    ctx = make_ctx(connect_tool, version="2025-11-25", client_capabilities=CAN_OPEN_PAGES, emit=emit)
    running = asyncio.create_task(result_of(ctx, "tools/call", CALL))
    async with asyncio.timeout(5):
        while not sent:
            await asyncio.sleep(0.01)
    question = sent[0]
    assert question["params"]["mode"] == "url" and question["params"]["elicitationId"]
    await asking.deliver("sess-1", {"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept"}})
    await submit(page_path(question["params"]["url"]), {"api_key": "sk-12345678", "region": "us"})
    result = await asyncio.wait_for(running, 5)
    assert result["content"][0]["text"] == "Connected in us."
    assert sent[-1] == {
        "jsonrpc": "2.0",
        "method": "notifications/elicitation/complete",
        "params": {"elicitationId": question["params"]["elicitationId"]},
    }


async def test_a_client_that_cannot_open_pages_is_told_what_it_lacks_and_never_gets_an_in_client_form(
    connect_tool,
):
    modern = make_ctx(connect_tool, version=MODERN, session=None, client_capabilities={"elicitation": {}})
    reply = await call(modern, "tools/call", CALL)
    assert reply["error"]["code"] == MISSING_REQUIRED_CLIENT_CAPABILITY
    assert reply["error"]["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    legacy = make_ctx(connect_tool, version="2025-06-18", client_capabilities=CAN_OPEN_PAGES)
    result = await result_of(legacy, "tools/call", CALL)
    assert result["isError"] is True and "elicitation" in result["content"][0]["text"]


async def first_page(tenant: Tenant, **ctx_args: Any) -> str:
    ctx = make_ctx(tenant, version=MODERN, session=None, client_capabilities=CAN_OPEN_PAGES, **ctx_args)
    first = await result_of(ctx, "tools/call", CALL)
    return page_path(first["inputRequests"]["q1"]["params"]["url"])


async def test_the_page_checks_the_answers_and_takes_them_once(connect_tool):
    path = await first_page(connect_tool)
    wrong = await submit(path, {"api_key": "short", "region": "mars"})
    assert wrong.status_code == 200 and b'role="alert"' in wrong.content
    assert (await submit(path, {"api_key": "sk-12345678", "region": "eu"})).status_code == 200
    assert (await submit(path, {"api_key": "sk-other-key", "region": "eu"})).status_code == 409


async def test_a_forged_link_or_one_for_another_tenant_answers_404(connect_tool, tenant_b):
    path = await first_page(connect_tool)
    get = sync_to_async(Client().get)
    assert (await get(path[:-4] + "AAAA")).status_code == 404
    assert (await get(path.replace("/t/tenant-a/", "/t/tenant-b/"))).status_code == 404


async def test_on_an_oauth_tenant_only_the_user_the_tool_asked_for_may_fill_the_page(
    connect_tool, django_user_model
):
    connect_tool.auth_mode = "oauth"
    await connect_tool.asave()
    # A name no random token contains by chance ("ada" once appeared inside the signed token).
    ada = await django_user_model.objects.acreate_user("ada.lovelace@example.com", password="pw")
    eve = await django_user_model.objects.acreate_user("eve", password="pw")
    await Membership.objects.acreate(user=ada, tenant=connect_tool, role="viewer")
    path = await first_page(connect_tool, user_id=ada.pk, client_id="c1")
    assert "lovelace" not in path and str(ada.pk) not in path.split("/")[-1][:4]
    anonymous = await sync_to_async(Client().get)(path)
    assert anonymous.status_code == 302 and "/oauth/login" in anonymous["Location"]
    as_eve = Client()
    await sync_to_async(as_eve.force_login)(eve)
    assert (await sync_to_async(as_eve.get)(path)).status_code == 403
    as_ada = Client()
    await sync_to_async(as_ada.force_login)(ada)
    assert (await sync_to_async(as_ada.get)(path)).status_code == 200


def test_a_sensitive_form_may_not_return_its_answers_as_structured_output(tenant_a):
    registry.validate_config("form", CONFIG)
    tool = Tool(
        tenant=tenant_a, name="x", handler="form", handler_config=CONFIG, output_schema={"type": "object"}
    )
    with pytest.raises(ValidationError) as caught:
        tool.full_clean()
    assert "never returns its answers as structured output" in str(caught.value)
    with pytest.raises(ValidationError):
        registry.validate_config("form", {**CONFIG, "sensitive": "yes"})


CHOICE_FIELDS = {
    "type": "object",
    "properties": {
        "plan": {
            "type": "string",
            "oneOf": [{"const": "p1", "title": "Starter"}, {"const": "p2", "title": "Pro"}],
        },
        "bank": {"type": "string", "enum": ["b1", "b2"], "enumNames": ["First Bank", "Second Bank"]},
        "scopes": {
            "type": "array",
            "minItems": 1,
            "items": {
                "anyOf": [{"const": "read", "title": "Read all"}, {"const": "write", "title": "Write"}]
            },
        },
    },
    "required": ["plan", "scopes"],
}


async def test_the_page_shows_choices_by_their_titles_and_a_multiple_choice_as_checkboxes(tenant_a, settings):
    """AMB-120: the sensitive form's page takes every choice shape; the answers are checked as written."""
    settings.MCP_URL_FORM_WAIT_SECONDS = 5
    config = {
        "message": "Pick",
        "fields": CHOICE_FIELDS,
        "sensitive": True,
        "text": "{{ plan }} {{ scopes|join:'+' }}",
    }
    await sync_to_async(Tool.objects.create)(
        tenant=tenant_a, name="choose", handler="form", handler_config=config
    )
    ctx = make_ctx(tenant_a, version=MODERN, session=None, client_capabilities=CAN_OPEN_PAGES)
    first = await result_of(ctx, "tools/call", {"name": "choose"})
    (key,) = first["inputRequests"]
    path = page_path(first["inputRequests"][key]["params"]["url"])
    page = (await sync_to_async(Client().get)(path)).content.decode()
    for label in ("Starter", "Pro", "First Bank", "Second Bank", "Read all"):
        assert label in page
    assert page.count('type="checkbox" name="scopes"') == 2
    outside = await submit(path, {"plan": "p3", "scopes": ["read"]})
    assert b'role="alert"' in outside.content
    none_picked = await submit(path, {"plan": "p1"})
    assert b'role="alert"' in none_picked.content  # minItems 1
    sent = await submit(path, {"plan": "p2", "bank": "b2", "scopes": ["read", "write"]})
    assert b"Sent" in sent.content
    retry = {
        "name": "choose",
        "requestState": first["requestState"],
        "inputResponses": {key: {"action": "accept"}},
    }
    done = await result_of(ctx, "tools/call", retry)
    assert done["content"] == [{"type": "text", "text": "p2 read+write"}]
