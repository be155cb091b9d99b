"""List equals call, proven (AMB-347): for every surface (tools, prompts, resources, resource templates),
both eras, every kind of tool (template, python, background, upstream) and every kind of caller
(anonymous, OAuth as an owner and as a viewer, an API key, an identity provider's user with and without
a claim a policy reads), what a list
shows can be used, and what it leaves out answers exactly as a missing target does.

The tenant's policies give each caller a different view: generated from them, not written per case, so
a surface, an era, a kind or a caller the decision forgot fails here. Through the dispatcher, as the
transports call it; the upstream tool is published from a real SDK server.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_app.core.context import RequestContext, kept_claims
from mcp_app.models import Policy, Prompt, Resource, ResourceTemplate, Tool, UpstreamTool
from mcp_app.upstreams import service
from tenants import wall
from tenants.models import Tenant
from tests.protocol.support import call
from tests.support import make_ctx
from tests.upstreams.conftest import legacy_upstream  # noqa: F401 - the module's SDK upstream
from tests.upstreams.running import make_upstream
from tests.upstreams.servers import UpstreamServer

pytestmark = pytest.mark.django_db(transaction=True)

ERAS = {"2025-11-25": True, "2026-07-28": None}  # the era and its session (the current one has none)
CALLERS = {
    "anonymous": {},
    "owner-oauth": {"user": "alice", "role": "owner", "client_id": "client-1", "scopes": frozenset({"mcp"})},
    "viewer-oauth": {"user": "bob", "role": "viewer", "client_id": "client-2", "scopes": frozenset({"mcp"})},
    "owner-api-key": {"user": "alice", "role": "owner", "client_id": "api-key:1", "scopes": frozenset()},
    "idp-user": {"subject": "sam@idp.example", "scopes": frozenset()},
    "idp-writer": {"subject": "kim@idp.example", "scopes": frozenset(), "claims": kept_claims({"groups": ["writers"]})},
}
# Each caller sees a different part of the tenant; greet's deny reads the arguments, so it stays listed.
POLICIES = [
    ("no-risk-for-strangers", "deny", "tools", "caller.auth == 'anonymous' && target.annotations.destructiveHint"),
    ("no-plans-for-viewers", "deny", "prompts", "caller.role == 'viewer' && target.name == 'secret_plan'"),
    ("public-for-strangers", "allow", "resources", "caller.auth != 'anonymous' || target.uri.startsWith('demo://public')"),
    ("no-upstreams-for-idp", "deny", "all", "caller.auth == 'identity_provider' && target.upstream != ''"),
    ("letters-for-writers", "deny", "prompts", "caller.auth == 'identity_provider' && target.name == 'letter' "
     "&& !(has(caller.claims.groups) && 'writers' in caller.claims.groups)"),
    ("no-background-for-keys", "deny", "tools", "caller.auth == 'api_key' && target.name == 'count'"),
    ("no-root", "deny", "tools", "target.name == 'greet' && arguments.name == 'root'"),
]  # fmt: skip
# A use that is allowed, for what each target takes.
ARGUMENTS = {"greet": {"name": "Ada"}, "wipe": {}, "count": {"n": 1, "delay": 0}, "docs_echo": {"message": "hi"}}
PROMPT_ARGUMENTS = {"letter": {"to": "Ada"}, "secret_plan": {}}


@pytest.fixture
def governed(
    tenant_a: Tenant, alice: Any, bob: Any, legacy_upstream: UpstreamServer, settings: Any  # noqa: F811
) -> Iterator[Tenant]:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    settings.MCP_BACKGROUND_TOOLS = "inline"
    text = {"text": "Hello, {{ name }}!"}
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config=text, version=1,
                        annotations={"readOnlyHint": True, "destructiveHint": False})  # fmt: skip
    Tool.objects.create(tenant=tenant_a, name="wipe", handler="template", handler_config={"text": "wiped"}, version=1)
    Tool.objects.create(tenant=tenant_a, name="count", handler="python", handler_config={"callable": "count_slowly"},
                        execution="background", version=1)  # fmt: skip
    row = make_upstream(tenant_a, legacy_upstream.url, timeout_seconds=10)
    with wall.tenant(tenant_a.id):
        service.sync(row)
        service.publish(UpstreamTool.objects.get(upstream=row, remote_name="echo"))
    message = [{"role": "user", "content": {"type": "text", "text": "Write to {{ to }}."}}]
    Prompt.objects.create(tenant=tenant_a, name="letter", arguments=[{"name": "to", "required": True}],
                          messages=message, version=1)  # fmt: skip
    plan = [{"role": "user", "content": {"type": "text", "text": "The plan."}}]
    Prompt.objects.create(tenant=tenant_a, name="secret_plan", messages=plan, version=1)
    for uri in ("demo://public/readme", "demo://private/keys"):
        Resource.objects.create(tenant=tenant_a, name=uri.rsplit("/", 1)[1], uri=uri, text="contents", version=1)
    ResourceTemplate.objects.create(tenant=tenant_a, name="file", uri_template="demo://files/{name}",
                                    handler="template", handler_config={"text": "File {{ name }}"}, version=1)  # fmt: skip
    for name, effect, applies_to, condition in POLICIES:
        policy = Policy(tenant=tenant_a, name=name, effect=effect, applies_to=applies_to, condition=condition)
        policy.full_clean()
        policy.save()
    yield tenant_a


async def listed(ctx: RequestContext, method: str, key: str) -> list[dict[str, Any]]:
    """Every page of one list."""
    items: list[dict[str, Any]] = []
    params: dict[str, Any] = {}
    while True:
        reply = await call(ctx, method, params)
        assert "result" in reply, reply
        items += reply["result"][key]
        if not (cursor := reply["result"].get("nextCursor")):
            return items
        params = {"cursor": cursor}


def same_as_missing(hidden: dict[str, Any], missing: dict[str, Any], name: str, missing_name: str) -> None:
    assert "error" in hidden, hidden
    assert hidden["error"]["code"] == missing["error"]["code"], (hidden, missing)
    assert hidden["error"]["message"] == missing["error"]["message"].replace(missing_name, name), (hidden, missing)
    data, missing_data = (json.dumps(reply["error"].get("data"), sort_keys=True) for reply in (hidden, missing))
    assert data == missing_data.replace(missing_name, name), (hidden, missing)


async def used(ctx: RequestContext, surface: str, name: str) -> dict[str, Any]:
    if surface == "tools":
        return await call(ctx, "tools/call", {"name": name, "arguments": ARGUMENTS.get(name, {})})
    if surface == "prompts":
        return await call(ctx, "prompts/get", {"name": name, "arguments": PROMPT_ARGUMENTS.get(name, {})})
    if surface == "resources":
        return await call(ctx, "resources/read", {"uri": name})
    return await call(ctx, "resources/read", {"uri": name.replace("{name}", "notes")})  # a template


EVERYTHING = {
    "tools": ["greet", "wipe", "count", "docs_echo"],
    "prompts": ["letter", "secret_plan"],
    "resources": ["demo://public/readme", "demo://private/keys"],
    "templates": ["demo://files/{name}"],
}
MISSING = {"tools": "zz_missing", "prompts": "zz_missing", "resources": "demo://zz/missing", "templates": "demo://zz/{name}"}
LISTS = {
    "tools": ("tools/list", "tools", "name"),
    "prompts": ("prompts/list", "prompts", "name"),
    "resources": ("resources/list", "resources", "uri"),
    "templates": ("resources/templates/list", "resourceTemplates", "uriTemplate"),
}
# What the policies leave each caller (the generated checks below hold whatever they are; these say the
# policies did give the callers different views, so the test cannot pass on a tenant that hides nothing).
EXPECTED_HIDDEN = {
    "anonymous": {"wipe", "count", "docs_echo", "demo://private/keys", "demo://files/{name}"},
    "owner-oauth": set(),
    "viewer-oauth": {"secret_plan"},
    "owner-api-key": {"count"},
    "idp-user": {"docs_echo", "letter"},
    "idp-writer": {"docs_echo"},
}


@pytest.mark.parametrize("era", list(ERAS))
@pytest.mark.parametrize("who", list(CALLERS))
async def test_what_a_caller_is_listed_it_can_use_and_what_it_is_not_answers_as_missing(
    governed: Tenant, alice: Any, bob: Any, era: str, who: str
) -> None:
    caller = dict(CALLERS[who])
    user = {"alice": alice, "bob": bob}.get(caller.pop("user", ""))
    context = await sync_to_async(make_ctx)(
        governed, era, session=ERAS[era], user_id=user.pk if user else None, **caller
    )
    hidden: set[str] = set()
    for surface, names in EVERYTHING.items():
        method, key, field = LISTS[surface]
        shown = {item[field] for item in await listed(context, method, key)}
        assert shown <= set(names), shown
        missing = await used(context, surface, MISSING[surface])
        for name in names:
            answer = await used(context, surface, name)
            if name in shown:
                assert "result" in answer, (who, era, name, answer)
                assert not answer["result"].get("isError"), (who, era, name, answer)
            else:
                hidden.add(name)
                if surface == "templates":  # the URI read, not the template's own
                    same_as_missing(answer, missing, "demo://files/notes", "demo://zz/notes")
                else:
                    same_as_missing(answer, missing, name, MISSING[surface])
    assert hidden == EXPECTED_HIDDEN[who]
    # A denial that reads the arguments: listed, used, and named when its arguments match.
    denied = await call(context, "tools/call", {"name": "greet", "arguments": {"name": "root"}})
    assert denied["result"]["isError"] is True and "no-root" in denied["result"]["content"][0]["text"]
