"""A tenant's guardrails through the official SDK client on a real Daphne (AMB-354), in both eras: a
result's personal data comes back redacted, a secret in the arguments is blocked naming the guardrail
and never echoed, a prompt's messages are redacted as a tool's result is."""

from __future__ import annotations

import secrets
from collections.abc import Awaitable
from contextlib import AsyncExitStack

import pytest

from tests.e2e.helpers import mcp_client
from tests.e2e.hostile_clients import CALLERS, attacking
from tests.e2e.isolation import isolated
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]
GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"


def guarded_tenant(server: DaphneServer) -> str:
    slug = f"guarded-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Guardrail, Prompt, Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=t, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n"
        "Prompt.objects.create(tenant=t, name='letter', arguments=[{'name': 'to', 'required': True}],\n"
        "    messages=[{'role': 'user', 'content': {'type': 'text', 'text': 'Write to {{ to }}.'}}])\n"
        "for fields in ({'name': 'personal-out', 'detector': 'personal_data', 'where': 'results'},\n"
        "               {'name': 'no-keys', 'detector': 'secrets', 'where': 'arguments', 'action': 'block'}):\n"
        "    g = Guardrail(tenant=t, **fields); g.full_clean(); g.save()\n",
    )
    return slug


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_guardrails_redact_and_block_for_the_sdk_client_in_both_eras(
    server: DaphneServer, mode: str
) -> None:
    slug = guarded_tenant(server)
    async with mcp_client(server.mcp_url(slug), mode=mode) as client:
        greeted = await client.call_tool("greet", {"name": "bob@example.com, +44 20 7946 0958"})
        assert not greeted.is_error
        assert greeted.content[0].text == "Hello, [redacted e-mail address], [redacted phone number]!"
        blocked = await client.call_tool("greet", {"name": GITHUB})
        assert blocked.is_error
        assert blocked.content[0].text == "Blocked by guardrail 'no-keys': the arguments held a GitHub Token."
        letter = await client.get_prompt("letter", {"to": "IBAN GB82 WEST 1234 5698 7654 32"})
        assert letter.messages[0].content.text == "Write to IBAN [redacted IBAN]."


async def test_a_background_tools_result_is_guarded_where_it_runs_and_its_record_holds_that(
    server: DaphneServer, worker_if_any: ServerProcess | None
) -> None:
    """On the Celery worker when there is one (in Daphne on embedded defaults): the client gets the
    redacted result and the run's record in the admin holds the same, never the text found."""
    slug = f"counted-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Guardrail, Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=t, name='count', handler='python', handler_config={'callable': 'count_slowly'},\n"
        "    execution='background', timeout_seconds=20,\n"
        "    input_schema={'type': 'object', 'properties': {'n': {'type': 'integer'}, 'delay': {'type': 'number'}}})\n"
        "g = Guardrail(tenant=t, name='no-totals', detector='pattern', pattern='Counted to [0-9]+', where='results')\n"
        "g.full_clean(); g.save()\n",
    )
    async with mcp_client(server.mcp_url(slug), mode="auto") as client:
        result = await client.call_tool("count", {"n": 2, "delay": 0.01})
    assert not result.is_error and result.content[0].text.startswith("[redacted match of no-totals]")
    if worker_if_any is not None:
        stored = django_shell(
            server.env,
            "import json\nfrom mcp_app.models import ToolRun\nfrom tenants import wall\n"
            f"with wall.bypass('test'):\n    r = ToolRun.objects.filter(tenant__slug={slug!r}).get()\n"
            "print(r.worker, json.dumps(r.result))\n",
        )
        assert "[redacted match of no-totals]" in stored and "Counted to 2" not in stored, stored


# What a hostile tenant's clients send and get back: 1,900 e-mail addresses and as many phone numbers in
# 100 KB, under the scanner's bounds (MAX_CONFIRMATIONS, MAX_CANDIDATES), so each call is scanned whole:
# the arguments by every secret pattern, the result by every personal-data detector, each confirmed.
WORST = "write to ann.lee@example.com or call +44 20 7946 0958. " * 1_900


async def test_a_tenant_whose_calls_are_all_scanned_to_their_bounds_slows_no_other_tenant(
    server: DaphneServer,
) -> None:
    """Guardrails scan a value over 64 KB on their scanning thread, off the event loop: while four
    clients of one tenant keep calling a tool with such a value in and out, another tenant's p99 keeps
    within RATIO of its idle one (tests/e2e/isolation.py)."""
    hostile, other = f"scanned-{secrets.token_hex(3)}", f"quiet-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Guardrail, Tool\nfrom tenants.models import Tenant\n"
        f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public')\n"
        f"o = Tenant.objects.create(slug={other!r}, name={other!r}, auth_mode='public')\n"
        "for t in (h, o):\n"
        "    Tool.objects.create(tenant=t, name='greet', handler='template', handler_config={'text': 'Hello, {{ name }}!'})\n"
        "for fields in ({'name': 'personal-out', 'detector': 'personal_data', 'where': 'results'},\n"
        "               {'name': 'no-keys', 'detector': 'secrets', 'where': 'arguments', 'action': 'block'}):\n"
        "    g = Guardrail(tenant=h, **fields); g.full_clean(); g.save()\n",
    )
    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[float, str]]], None]:
        return attacking(server.mcp_url(hostile), "greet", {"name": WORST}, 4.0), None

    # 5x, not 3x: four clients' 100 KB renders and scans share the 2 cores with CI's other workers and
    # Chromium: 3.0-4.3x seen there with the scans off the loop (3.0 alone); 20-29x with them on it.
    ended = await isolated(
        server.mcp_url(other), "four clients' calls scanned to their bounds", prepare, ratio=5.0
    )
    assert len(ended) >= CALLERS, ended[:2]
    texts = {text for _, text in ended}
    redacted = "write to [redacted e-mail address] or call [redacted phone number]. "
    assert texts == {f"Hello, {redacted * 1_900}!"}, [t[:200] for t in texts]
