"""A tenant's policies through the official SDK client on a real Daphne, in both eras (AMB-347): a tool
denied whatever its arguments is absent from the list and answers as a missing one; a denial that depends
on the arguments is `isError` naming the policy; saving a policy in the admin tells a held legacy session its list
changed, and the next list obeys it at once."""

from __future__ import annotations

import secrets

import pytest
from mcp import MCPError

from tests.e2e.helpers import AdminBrowser, Inbox, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def governed_tenant(server: DaphneServer) -> str:
    slug = f"governed-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Policy, Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        "for name, text in [('greet', 'Hello, {{ name }}!'), ('drop_table', 'Dropped {{ name }}.')]:\n"
        "    Tool.objects.create(tenant=t, name=name, handler='template', handler_config={'text': text},\n"
        "        annotations={'destructiveHint': name == 'drop_table'})\n"
        "for name, condition in [('no-destruction', 'target.annotations.destructiveHint == true'),\n"
        "        ('no-admins', \"target.name == 'greet' && arguments.name == 'admin'\")]:\n"
        "    p = Policy(tenant=t, name=name, condition=condition); p.full_clean(); p.save()\n",
    )
    return slug


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_sdk_client_sees_only_what_it_may_use_and_is_told_which_policy_denied(
    server: DaphneServer, mode: str
) -> None:
    slug = governed_tenant(server)
    async with mcp_client(server.mcp_url(slug), mode=mode) as client:
        listed = [tool.name for tool in (await client.list_tools()).tools]
        assert listed == ["greet"]
        with pytest.raises(MCPError) as hidden:
            await client.call_tool("drop_table", {"name": "users"})
        with pytest.raises(MCPError) as missing:
            await client.call_tool("drop_tables", {"name": "users"})
        assert str(hidden.value) == str(missing.value).replace("drop_tables", "drop_table")
        assert hidden.value.error.code == missing.value.error.code
        allowed = await client.call_tool("greet", {"name": "Ada"})
        assert allowed.content[0].text == "Hello, Ada!" and not allowed.is_error
        denied = await client.call_tool("greet", {"name": "admin"})
        assert denied.is_error and "'no-admins'" in denied.content[0].text


async def test_a_policy_published_in_the_admin_tells_a_held_session_and_its_next_list_obeys_it(
    server: DaphneServer,
) -> None:
    slug = governed_tenant(server)
    pk = (
        django_shell(
            server.env,
            f"from mcp_app.models import Policy\nprint(Policy.objects.get(tenant__slug={slug!r}, name='no-destruction').pk)",
        )
        .strip()
        .splitlines()[-1]
    )
    inbox = Inbox()
    async with mcp_client(server.mcp_url(slug), inbox) as client, AdminBrowser(server.url) as admin:
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        await inbox.wait_for_get_stream()
        assert [tool.name for tool in (await client.list_tools()).tools] == ["greet"]

        async def edit() -> None:
            # Only keys are denied destruction now: this public tenant's callers are anonymous.
            condition = "target.annotations.destructiveHint == true && caller.auth == 'api_key'"
            await admin.change(
                f"/admin/mcp_app/policy/{pk}/change/",
                "policy_form",
                {"condition": condition},
                ("_publish", "Save and publish"),  # a policy's draft ("Save draft") tells nobody (AMB-362)
            )

        await inbox.edit_until("notifications/tools/list_changed", edit)
        assert [tool.name for tool in (await client.list_tools()).tools] == ["drop_table", "greet"]
        dropped = await client.call_tool("drop_table", {"name": "users"})
        assert dropped.content[0].text == "Dropped users."


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_demo_tenants_policy_keeps_a_password_from_being_echoed(
    server: DaphneServer, mode: str
) -> None:
    async with mcp_client(server.mcp_url(), mode=mode) as client:
        echoed = await client.call_tool("echo", {"message": "hello"})
        assert echoed.content[0].text == "hello"
        denied = await client.call_tool("echo", {"message": "my Password is hunter2"})
        assert denied.is_error and "'keep-passwords-out'" in denied.content[0].text
        assert "hunter2" not in denied.content[0].text
