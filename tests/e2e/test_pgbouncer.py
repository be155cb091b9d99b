"""The tenant wall behind PgBouncer in transaction pooling (issue 35 §2, AMB-365), on a real Daphne.

One server connection for every client: two tenants' requests take turns on it, transaction by
transaction. The wall set a connection's scope once per session and skipped it when the client believed
its session held it already; behind the pooler, of 400 reads of two tenants' tools through the
management API, 239 answered 404 and 96 the wrong rows. With `DATABASE_POOLING=transaction` every
transaction sets its own scope and role: each read answers its own tenant's rows, none of the other's.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator

import httpx
import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.servers import DaphneServer, django_shell, manage, require_services, start_daphne, used_secret
from tests.fleet.pgbouncer import PgBouncer, binary, start_pgbouncer

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

READS = 400
TOOLS = 6


@pytest.fixture(scope="module")
def pooler(e2e_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[PgBouncer]:
    require_services("PgBouncer pools PostgreSQL's connections", postgres=True)
    if binary() is None:
        message = "needs Debian's pgbouncer (apt-get install pgbouncer): the pooler under test"
        if e2e_env.get("MCP_E2E_REQUIRE_SERVICES") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    bouncer = start_pgbouncer(e2e_env["DATABASE_URL"], tmp_path_factory.mktemp("pgbouncer"), pool=1)
    yield bouncer
    bouncer.stop()


@pytest.fixture(scope="module")
def pooled(
    e2e_env: dict[str, str], pooler: PgBouncer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[DaphneServer]:
    """A Daphne whose every connection goes through the pooler, which has one server connection."""
    env = {
        **e2e_env,
        "DATABASE_URL": pooler.url(e2e_env["DATABASE_URL"]),
        "DATABASE_POOLING": "transaction",
        "MCP_BACKGROUND_TOOLS": "inline",
    }
    daphne = start_daphne("daphne-pgbouncer", env, tmp_path_factory.mktemp("daphne-pgbouncer"))
    yield daphne
    daphne.stop()


def two_owned_tenants(server: DaphneServer) -> dict[str, tuple[str, set[str]]]:
    """Two public tenants with tools of their own, each owned by a user of its own: slug → (token, names)."""
    made: dict[str, tuple[str, set[str]]] = {}
    for letter in "ab":
        slug, user = f"pool-{letter}-{secrets.token_hex(3)}", f"owner_{letter}_{secrets.token_hex(3)}"
        names = {f"{letter}_tool_{i}" for i in range(TOOLS)}
        django_shell(
            server.env,
            "from django.contrib.auth import get_user_model\n"
            "from mcp_app.models import Tool\nfrom tenants.models import Membership, Tenant\n"
            f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
            f"u = get_user_model().objects.create_user({user!r}, is_staff=True)\n"
            "Membership.objects.create(tenant=t, user=u, role='owner')\n"
            f"for name in {sorted(names)!r}:\n"
            "    Tool.objects.create(tenant=t, name=name, handler='template', handler_config={'text': name})\n",
        )
        token = used_secret(manage(server.env, "api_token", user).strip().splitlines()[-1])
        made[slug] = (token, names)
    return made


async def test_two_tenants_reads_on_one_pooled_server_connection_each_get_their_own_rows(
    pooled: DaphneServer,
) -> None:
    tenants = await asyncio.to_thread(two_owned_tenants, pooled)
    gate = asyncio.Semaphore(16)

    async def read(http: httpx.AsyncClient, slug: str) -> tuple[str, int, set[str]]:
        token = tenants[slug][0]
        async with gate:
            answer = await http.get(
                f"{pooled.url}/api/v1/tenants/{slug}/tools/?page_size=100",
                headers={"Authorization": f"Bearer {token}"},
            )
        if answer.status_code != 200:
            return slug, answer.status_code, set()
        body = answer.json()
        rows = body["results"] if isinstance(body, dict) else body
        return slug, 200, {row["name"] for row in rows}

    slugs = list(tenants)
    async with httpx.AsyncClient(timeout=60) as http:
        answers = await asyncio.gather(*(read(http, slugs[i % 2]) for i in range(READS)))

    statuses = [status for _, status, _ in answers]
    wrong = [
        (slug, sorted(names))
        for slug, status, names in answers
        if status == 200 and names != tenants[slug][1]
    ]
    assert statuses.count(200) == READS, f"{READS - statuses.count(200)} of {READS} not 200: {set(statuses)}"
    assert not wrong, f"{len(wrong)} of {READS} reads answered other rows, e.g. {wrong[:2]}"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_two_tenants_sdk_clients_on_one_pooled_server_connection_list_and_call_only_their_own(
    pooled: DaphneServer, mode: str
) -> None:
    tenants = await asyncio.to_thread(two_owned_tenants, pooled)

    async def use(slug: str) -> None:
        names = tenants[slug][1]
        async with mcp_client(pooled.mcp_url(slug), mode=mode) as client:
            for round_ in range(10):
                listed = {tool.name for tool in (await client.list_tools()).tools}
                assert listed == names, (slug, round_, sorted(listed))
                name = sorted(names)[round_ % TOOLS]
                assert (await client.call_tool(name, {})).content[0].text == name

    await asyncio.gather(*(use(slug) for slug in tenants for _ in range(3)))
