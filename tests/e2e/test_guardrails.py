"""A tenant's guardrails through the official SDK client on a real Daphne (AMB-354), in both eras: a
result's personal data comes back redacted, a secret in the arguments is blocked naming the guardrail
and never echoed, a prompt's messages are redacted as a tool's result is."""

from __future__ import annotations

import secrets

import pytest

from tests.e2e.helpers import mcp_client
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
