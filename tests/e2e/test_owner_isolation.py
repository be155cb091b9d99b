"""No owner action slows another tenant (issue 32 §3), on a real Daphne.

Each test measures another tenant's `greet` latency through the official SDK client, idle and then while
one tenant's owner does something heavy (four self-checks at once of a 2,000-tool tenant, ...), and
compares the two: the p99 while it runs stays within 3x the idle p99 measured in the same test (a ratio,
never a number of seconds: the machine may be busy with other tests).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager

import httpx
import pytest

from tests.e2e.helpers import Inbox, mcp_client
from tests.e2e.isolation import Afterwards, isolated
from tests.e2e.servers import ADMIN_USERNAME, DaphneServer, django_shell, manage, used_secret
from tests.upstreams.running import running_upstream

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

BIG = 2_000
# An import of this many tools: 1,000 rows checked and written, in a process of its own. Run in the
# serving process instead, it fails every attempt (4.7-9.4x); 500 of them failed only two of three.
MANY = 1_000
# A sync publishing this many upstream tools. Its writes leave the GIL often: even in the serving process
# a publish of 1,000 cost the other tenant 2.5x, so this test shows the bound holds rather than guarding
# the fork, and 500 show it as well as 1,000 at half the time (at 2,000 a loaded CI machine took over
# pytest's 300 s for this test alone).
PUBLISHED = 500
# Of them, template tools (a dry run calls each); the others are python tools no dry run calls.
DRY_RUN = 20
def big_and_quiet(server: DaphneServer, tools: int = BIG) -> tuple[str, str]:
    """A tenant of `tools` tools the admin owns (DRY_RUN of them templates), and another with `greet`."""
    big, quiet = f"big-{secrets.token_hex(3)}", f"quiet-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\n"
        "from mcp_app.models import Tool\nfrom tenants.models import Membership, Tenant\n"
        f"b = Tenant.objects.create(slug={big!r}, name={big!r}, auth_mode='public')\n"
        f"q = Tenant.objects.create(slug={quiet!r}, name={quiet!r}, auth_mode='public')\n"
        f"Membership.objects.create(tenant=b, user=get_user_model().objects.get(username={ADMIN_USERNAME!r}), role='owner')\n"
        "schema = {'type': 'object', 'properties': {'name': {'type': 'string', 'maxLength': 20}}, 'required': ['name']}\n"
        "def kind(i):\n"
        f"    return ('template', {{'text': 'Hello, {{{{ name }}}}!'}}) if i < {DRY_RUN} else ('python', {{'callable': 'count_slowly'}})\n"
        "Tool.objects.bulk_create([Tool(tenant=b, name=f'tool_{i:04d}', description=f'Tool number {i}.', handler=kind(i)[0],"
        f" handler_config=kind(i)[1], input_schema=schema, version=1) for i in range({tools})])\n"
        "Tool.objects.create(tenant=q, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n",
    )
    return big, quiet


@asynccontextmanager
async def owned_session(url: str) -> AsyncIterator[Callable[[set[str]], Awaitable[None]]]:
    """A legacy session of the owned tenant, open while the owner's work runs; what it yields checks,
    after the work, that the tools' change (made in a process of its own) was announced to the session
    and is served by this server at once, not after its version recheck (AMB-277)."""
    inbox = Inbox()
    async with mcp_client(url, inbox) as client:
        await inbox.wait_for_get_stream()

        async def heard_and_served(names: set[str]) -> None:
            await inbox.wait_for("notifications/tools/list_changed")
            listed: set[str] = set()
            cursor = None
            while True:
                page = await client.list_tools(cursor=cursor)
                listed |= {tool.name for tool in page.tools}
                if not (cursor := page.next_cursor):
                    break
            assert names <= listed, f"{len(names - listed)} of {len(names)} not listed yet"

        yield heard_and_served


def api_token(server: DaphneServer) -> str:
    return used_secret(manage(server.env, "api_token", ADMIN_USERNAME).strip().splitlines()[-1])


async def test_four_self_checks_of_a_big_tenant_at_once_slow_no_other_tenant(server: DaphneServer) -> None:
    big, quiet = await asyncio.to_thread(big_and_quiet, server)
    token = await asyncio.to_thread(api_token, server)

    async def four_checks() -> list[httpx.Response]:
        async with httpx.AsyncClient(timeout=300, headers={"Authorization": f"Bearer {token}"}) as http:
            url = f"{server.url}/api/v1/tenants/{big}/check/"
            return await asyncio.gather(*(http.post(url) for _ in range(4)))

    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[httpx.Response]], None]:
        return four_checks(), None

    answers = await isolated(server.mcp_url(quiet), f"four self-checks of {BIG} tools", prepare)

    bodies = [answer.json() for answer in answers]
    assert [answer.status_code for answer in answers] == [200] * 4, bodies
    # One check ran; the three asked while it ran got its report, saying so.
    assert sorted(body["joined"] for body in bodies) == [False, True, True, True], [
        b["joined"] for b in bodies
    ]
    assert len({body["started_at"] for body in bodies}) == 1
    assert all(body["checked"]["tool"] == BIG for body in bodies), bodies[0]
    assert len(bodies[0]["dry_runs"]) == DRY_RUN


def owned_and_quiet(server: DaphneServer, upstream_url: str = "") -> tuple[str, str, str]:
    """An empty tenant the admin owns (with an upstream publishing whatever it offers at `upstream_url`:
    its id), and another with `greet`."""
    owned, quiet = f"owned-{secrets.token_hex(3)}", f"quiet-{secrets.token_hex(3)}"
    out = django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\n"
        "from mcp_app.models import Tool, Upstream\nfrom tenants.models import Membership, Tenant\n"
        f"o = Tenant.objects.create(slug={owned!r}, name={owned!r}, auth_mode='public')\n"
        f"q = Tenant.objects.create(slug={quiet!r}, name={quiet!r}, auth_mode='public')\n"
        f"Membership.objects.create(tenant=o, user=get_user_model().objects.get(username={ADMIN_USERNAME!r}), role='owner')\n"
        "Tool.objects.create(tenant=q, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n"
        + (
            f"up = Upstream(tenant=o, name='many', url={upstream_url!r}, prefix='m_', timeout_seconds=60, publish_new=True)\n"
            "up.full_clean(); up.save(); print(up.pk)\n"
            if upstream_url
            else ""
        ),
    )
    return owned, quiet, out.strip()


async def test_publishing_hundreds_of_upstream_tools_slows_no_other_tenant(
    server: DaphneServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    token = await asyncio.to_thread(api_token, server)
    _, quiet, _ = await asyncio.to_thread(owned_and_quiet, server)
    with running_upstream(tmp_path_factory.mktemp("many"), many=PUBLISHED) as remote:

        async def sync_and_publish(owned: str, upstream_id: str) -> None:
            async with httpx.AsyncClient(timeout=300, headers={"Authorization": f"Bearer {token}"}) as http:
                answer = await http.post(f"{server.url}/api/v1/tenants/{owned}/upstreams/{upstream_id}/sync/")
            assert answer.status_code == 200, answer.text[:500]
            assert len(answer.json()["published"]) >= PUBLISHED

        async def prepare(stack: AsyncExitStack) -> tuple[Awaitable[None], Afterwards]:
            owned, _, upstream_id = await asyncio.to_thread(owned_and_quiet, server, remote.url)
            heard_and_served = await stack.enter_async_context(owned_session(server.mcp_url(owned)))
            names = {f"m_many_{i:04d}" for i in range(PUBLISHED)}
            return sync_and_publish(owned, upstream_id), lambda: heard_and_served(names)

        await isolated(server.mcp_url(quiet), f"publishing {PUBLISHED} upstream tools", prepare)


async def test_importing_a_thousand_tools_slows_no_other_tenant(server: DaphneServer) -> None:
    _, quiet, _ = await asyncio.to_thread(owned_and_quiet, server)
    token = await asyncio.to_thread(api_token, server)
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}
    document = {
        "format": "mcp-platform/tenant",
        "version": 1,
        "tools": [
            {"name": f"tool_{i:04d}", "description": f"Tool number {i}.", "handler": "template",
             "handler_config": {"text": "Hello, {{ name }}!"}, "input_schema": schema}
            for i in range(MANY)
        ],
    }  # fmt: skip

    async def import_it(owned: str) -> None:
        async with httpx.AsyncClient(timeout=300, headers={"Authorization": f"Bearer {token}"}) as http:
            answer = await http.post(f"{server.url}/api/v1/tenants/{owned}/import", json=document)
        assert answer.status_code == 200, answer.text[:500]
        assert answer.json()["counts"]["create"] == MANY, answer.text[:300]

    async def prepare(stack: AsyncExitStack) -> tuple[Awaitable[None], Afterwards]:
        owned, _, _ = await asyncio.to_thread(owned_and_quiet, server)
        heard_and_served = await stack.enter_async_context(owned_session(server.mcp_url(owned)))
        names = {f"tool_{i:04d}" for i in range(MANY)}
        return import_it(owned), lambda: heard_and_served(names)

    await isolated(server.mcp_url(quiet), f"importing {MANY} tools", prepare)


async def test_trying_drafts_of_a_background_tool_slows_no_other_tenant(server: DaphneServer) -> None:
    """A draft of a background tool is tried in the serving process (workers run published versions
    only): four Try runs at once, three times, each counting for a second with a progress and a log
    message per step."""
    owned, quiet, _ = await asyncio.to_thread(owned_and_quiet, server)
    tool_id = (
        await asyncio.to_thread(
            django_shell,
            server.env,
            "from mcp_app.drafts.service import stage\nfrom mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
            f"t = Tool.objects.create(tenant=Tenant.objects.get(slug={owned!r}), name='count', handler='python',"
            " handler_config={'callable': 'count_slowly'}, execution='background')\n"
            "t.description = 'Counts, a new draft.'\nstage(t)\nprint(t.pk)\n",
        )
    ).strip()
    token = await asyncio.to_thread(api_token, server)

    async def tries() -> list[httpx.Response]:
        answers: list[httpx.Response] = []
        async with httpx.AsyncClient(timeout=120, headers={"Authorization": f"Bearer {token}"}) as http:
            url = f"{server.url}/api/v1/tenants/{owned}/tools/{tool_id}/try/"
            for _ in range(3):
                body = {"arguments": {"n": 20, "delay": 0.05}}
                answers += await asyncio.gather(*(http.post(url, json=body) for _ in range(4)))
        return answers

    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[httpx.Response]], None]:
        return tries(), None

    answers = await isolated(server.mcp_url(quiet), "twelve draft Try runs of a background tool", prepare)
    assert [a.status_code for a in answers] == [200] * 12, answers[0].text[:500]
    assert all(a.json()["definition"] == "draft" for a in answers), answers[0].text[:600]
    texts = [(a.json()["result"] or {}).get("content", [{}])[0].get("text", a.text[:300]) for a in answers]
    assert all(text == "Counted to 20." for text in texts), texts
