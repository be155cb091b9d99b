"""A connected client learns about edits made in the admin or by another process while it stays connected."""

from __future__ import annotations

import secrets

import anyio
import pytest

from tests.e2e.helpers import AdminBrowser, Inbox, mcp_client
from tests.e2e.servers import ADMIN_PASSWORD, ADMIN_USERNAME, DaphneServer, django_shell

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


def tool_pk(env: dict[str, str], name: str) -> int:
    """Return the primary key of one of the demo tenant's tools (read by another process)."""
    out = django_shell(
        env,
        f"from mcp_app.models import Tool; print(Tool.objects.get(tenant__slug='demo', name={name!r}).pk)",
    )
    return int(out.strip().splitlines()[-1])


async def edit_resource_elsewhere(env: dict[str, str], uri: str, marker: str) -> None:
    """Change a demo resource from a `manage.py shell` process (not the server), keeping its content valid."""
    code = (
        "from mcp_app.models import Resource\n"
        f"resource = Resource.objects.get(tenant__slug='demo', uri={uri!r})\n"
        f"resource.description = resource.description.split(' [e2e')[0] + ' [e2e {marker}]'\n"
        "if resource.mime_type == 'text/markdown':\n"
        f"    resource.text = resource.text.split('\\n<!-- e2e')[0] + '\\n<!-- e2e {marker} -->'\n"
        "resource.save()\n"
    )
    await anyio.to_thread.run_sync(django_shell, env, code)


async def test_admin_stylesheet_is_served_by_daphne_through_whitenoise(server: DaphneServer) -> None:
    async with AdminBrowser(server.url) as browser:
        login = await browser.http.get("/admin/login/")
        css = await browser.http.get("/static/admin/css/base.css")
    assert "/static/admin/css/base.css" in login.text
    assert css.status_code == 200
    assert css.headers["content-type"].startswith("text/css")


async def test_tl12_editing_a_tool_in_the_admin_sends_tools_list_changed_on_the_get_stream(
    server: DaphneServer,
) -> None:
    pk = tool_pk(server.env, "add")
    description = f"Adds two integers (edited in the admin, {secrets.token_hex(4)})."
    inbox = Inbox()
    async with mcp_client(server.mcp_url(), inbox) as client, AdminBrowser(server.url) as admin:
        await admin.login(ADMIN_USERNAME, ADMIN_PASSWORD)
        await inbox.wait_for_get_stream()

        async def edit() -> None:
            await admin.change(f"/admin/mcp_app/tool/{pk}/change/", "tool_form", {"description": description})

        await inbox.edit_until("notifications/tools/list_changed", edit)
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert tools["add"].description == description


@pytest.mark.services(
    reason="the edit is made by another process and reaches Daphne through the Redis channel layer"
)
async def test_rs05_subscribed_client_gets_resources_updated_when_another_process_edits_the_resource(
    server: DaphneServer,
) -> None:
    marker = secrets.token_hex(4)
    inbox = Inbox()
    async with mcp_client(server.mcp_url(), inbox) as client:
        await client.subscribe_resource("demo://readme")
        await inbox.wait_for_get_stream()

        async def edit() -> None:
            # config.json first: the client did not subscribe to it, so no `updated` for it may arrive.
            await edit_resource_elsewhere(server.env, "demo://config.json", marker)
            await edit_resource_elsewhere(server.env, "demo://readme", marker)

        updated = await inbox.edit_until("notifications/resources/updated", edit)
        readme = await client.read_resource("demo://readme")
    assert str(updated.params.uri) == "demo://readme"
    uris = {str(n.params.uri) for n in inbox.notifications if n.method == "notifications/resources/updated"}
    assert uris == {"demo://readme"}
    assert marker in readme.contents[0].text
