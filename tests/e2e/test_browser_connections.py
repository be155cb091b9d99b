"""Connected accounts against a real provider: Daphne B's own OAuth 2.1 authorization server
(django-oauth-toolkit: authorization code with PKCE, rotated refresh tokens with reuse protection,
RFC 7009 revocation), found by RFC 8414 discovery from its issuer URL.

Daphne A holds the vault: a person connects in Chromium through A's start page, B's consent page and
A's callback; the vault refreshes an expired token once however many processes ask at the same moment
(B counts the refresh grants); Disconnect revokes at B, which then refuses the token; a grant B
dropped (`invalid_grant`) deletes the connection and the next call is sent to connect again. Both
servers share one database (as server_b does everywhere), so B's user is A's: the person signs in
once. The hostile table: replayed state, another user's state, another user's link, another
tenant's provider, a tampered link, another user's connection.
"""

from __future__ import annotations

import asyncio
import json
import re
import secrets
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.async_api import Page

from tests.e2e.browser import Screenshots, sign_in
from tests.e2e.helpers import INITIALIZE_PARAMS, MCP_HEADERS, REQUEST_SECONDS
from tests.e2e.servers import ROOT, DaphneServer, django_shell, used_secret

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.services(reason="one refresh across processes is held by a Redis lease"),
]

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INITIALIZE_PARAMS}


def setup(server: DaphneServer, server_b: DaphneServer) -> dict[str, str]:
    """Tenant `acct` (A's, with provider `gh` = B), tenant `prov` (B's resource), a person and an
    outsider (both members of `acct`), tenant `other` with a provider also named `gh`, and B's client."""
    tag = secrets.token_hex(3)
    names = {
        "acct": f"acct-{tag}",
        "prov": f"prov-{tag}",
        "other": f"other-{tag}",
        "person": f"person-{tag}",
        "outsider": f"outsider-{tag}",
        "password": used_secret(f"pw-{secrets.token_urlsafe(12)}"),
        "secret": used_secret(secrets.token_urlsafe(32)),
    }
    callback = f"{server.url}/t/{names['acct']}/connections/gh/callback"
    out = django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\n"
        "from oauth2_provider.models import Application\n"
        "from mcp_app.handlers.secrets import encrypt_secrets\n"
        "from mcp_app.models import Provider\nfrom tenants.models import Membership, Tenant\n"
        f"n = {names!r}\n"
        "acct = Tenant.objects.create(slug=n['acct'], name=n['acct'], auth_mode='oauth')\n"
        "prov = Tenant.objects.create(slug=n['prov'], name=n['prov'], auth_mode='oauth')\n"
        "other = Tenant.objects.create(slug=n['other'], name=n['other'], auth_mode='oauth')\n"
        "User = get_user_model()\n"
        "person = User.objects.create_user(n['person'], password=n['password'])\n"
        "outsider = User.objects.create_user(n['outsider'], password=n['password'])\n"
        "for user in (person, outsider):\n"
        "    Membership.objects.create(user=user, tenant=acct, role='viewer')\n"
        "Membership.objects.create(user=person, tenant=prov, role='viewer')\n"
        "Membership.objects.create(user=person, tenant=other, role='viewer')\n"
        "app = Application.objects.create(name='connected accounts of A', client_type='confidential',"
        " authorization_grant_type='authorization-code', client_secret=n['secret'],"
        f" redirect_uris={callback!r}, skip_authorization=False)\n"
        "for tenant in (acct, other):\n"
        "    p = Provider(tenant=tenant, name='gh', display_name='Provider B',"
        f" discovery_url={server_b.url!r}, client_id=app.client_id,"
        " client_secret=encrypt_secrets({'client_secret': n['secret']}), scopes='mcp:tools',"
        f" resource={server_b.mcp_url(names['prov'])!r})\n"
        "    p.full_clean(); p.save()\n"
        "print('CLIENT', app.client_id)\n",
    )
    names["client_id"] = re.search(r"CLIENT (\S+)", out)[1]  # type: ignore[index]
    return names


def start_link(server: DaphneServer, names: dict[str, str], who: str, elicitation: str | None = None) -> str:
    out = django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom mcp_app.connected_accounts import vault\n"
        "from tenants.models import Tenant\n"
        f"t = Tenant.objects.get(slug={names['acct']!r})\n"
        f"u = get_user_model().objects.get(username={names[who]!r})\n"
        "print(vault.start_link(tenant_slug=t.slug, tenant_id=t.pk, user_id=u.pk, provider_name='gh',"
        f" elicitation_id={elicitation!r}))\n",
    )
    return out.strip().splitlines()[-1]


def vault_call(
    server: DaphneServer, names: dict[str, str], code: str, env: dict[str, str] | None = None
) -> Any:
    """Run ``code`` (an expression awaited in the shell, with t, u and vault bound); its value as JSON."""
    out = django_shell(
        {**server.env, **(env or {})},
        "import asyncio, json, time\nfrom django.contrib.auth import get_user_model\n"
        "from mcp_app.connected_accounts import vault\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.get(slug={names['acct']!r})\n"
        f"u = get_user_model().objects.get(username={names['person']!r})\n"
        "async def main():\n"
        "    try:\n"
        f"        return {code}\n"
        "    except vault.NotConnected as exc:\n"
        "        return {'not_connected': exc.start_url}\n"
        "print('RESULT', json.dumps(asyncio.run(main())))\n",
    )
    return json.loads(out.split("RESULT ", 1)[1])


RACER = """
import asyncio, sys
from django.contrib.auth import get_user_model
from mcp_app.connected_accounts import vault
from tenants.models import Tenant
t = Tenant.objects.get(slug=sys.argv[-2])
u = get_user_model().objects.get(username=sys.argv[-1])
print("READY", flush=True)
sys.stdin.readline()
print("TOKEN", asyncio.run(vault.access_token(t.pk, u.pk, "gh")), flush=True)
"""


def race(server: DaphneServer, names: dict[str, str]) -> list[str]:
    """Two processes of their own, each ready with Django loaded, told to go at once; their tokens."""
    script = Path(tempfile.mkstemp(prefix="racer-", suffix=".py")[1])
    script.write_text(f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nimport django\ndjango.setup()\n" + RACER)
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), names["acct"], names["person"]],
            cwd=ROOT, env=server.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        for _ in range(2)
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None and racer.stdout.readline().strip() == "READY"
        for racer in racers:
            assert racer.stdin is not None
            racer.stdin.write("go\n")
            racer.stdin.flush()
        out = [racer.communicate(timeout=60)[0] for racer in racers]
    finally:
        for racer in racers:
            racer.kill()
        script.unlink()
    return [re.search(r"TOKEN (\S+)", text)[1] if "TOKEN" in text else text for text in out]  # type: ignore[index]


def connection_row(server: DaphneServer, names: dict[str, str]) -> dict[str, Any] | None:
    out = django_shell(
        server.env,
        "import json\nfrom mcp_app.models import Connection\n"
        f"c = Connection.objects.filter(tenant__slug={names['acct']!r}, user__username={names['person']!r}).first()\n"
        "row = None if c is None else {'pk': c.pk, **c.token_set()}\n"
        "if row:\n"
        "    row['sealed'] = row['access_token'] not in c.tokens and row['refresh_token'] not in c.tokens\n"
        "print('ROW', json.dumps(row))\n",
    )
    return json.loads(out.split("ROW ", 1)[1])


def expire(server: DaphneServer, names: dict[str, str]) -> None:
    """Expire the connection behind the vault's back (no signal); the shell process, which calls the
    vault here, forgets the token it handed out, as it would within MCP_TOKEN_CACHE_SECONDS."""
    django_shell(
        server.env,
        "import datetime\nfrom django.utils import timezone\nfrom mcp_app.connected_accounts import vault\n"
        "from mcp_app.models import Connection\n"
        f"Connection.objects.filter(tenant__slug={names['acct']!r}).update("
        "expires_at=timezone.now() - datetime.timedelta(seconds=5))\nvault.forget()\n",
    )


def refresh_grants(server: DaphneServer, names: dict[str, str]) -> int:
    """How many refresh tokens B issued to A's client (one per code exchange, one per refresh)."""
    out = django_shell(
        server.env,
        "from oauth2_provider.models import RefreshToken\n"
        f"print(RefreshToken.objects.filter(application__client_id={names['client_id']!r}).count())\n",
    )
    return int(out.strip().splitlines()[-1])


def audit_actions(server: DaphneServer, names: dict[str, str]) -> list[tuple[str, str]]:
    out = django_shell(
        server.env,
        "import json\nfrom audit.models import AuditEvent\n"
        f"rows = AuditEvent.objects.filter(tenant_slug={names['acct']!r}, action__startswith='connection')"
        ".order_by('id')\n"
        "print('AUDIT', json.dumps([(r.action, r.detail.get('reason', '')) for r in rows]))\n",
    )
    return [tuple(pair) for pair in json.loads(out.split("AUDIT ", 1)[1])]


def provider_takes(server_b: DaphneServer, names: dict[str, str], token: str) -> int:
    """B's answer to an MCP request of its tenant `prov` carrying ``token``."""
    headers = {**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    return httpx.post(
        server_b.mcp_url(names["prov"]), json=INITIALIZE, headers=headers, timeout=REQUEST_SECONDS
    ).status_code


async def connect_in_browser(page: Page, link: str, names: dict[str, str], shots: Screenshots) -> str:
    """Start page → (sign in) → Connect → B's consent → Allow → A's callback → done; the callback URL."""
    callbacks: list[str] = []
    page.on("request", lambda request: callbacks.append(request.url) if "/callback?" in request.url else None)
    await page.goto(link)
    await shots.take(page, "start")
    if await page.locator("a.button.primary").count():
        assert names["person"] in await page.inner_text("main")  # whom the link is for
        await page.click("a.button.primary")
        await sign_in(page, names["person"], names["password"])
    await shots.take(page, "connect")
    async with page.expect_navigation():
        await page.click("#connect")
    await shots.take(page, "provider-consent")
    async with page.expect_navigation():
        await page.click("button[name=allow]")
    await shots.take(page, "done")
    assert "Provider B is connected" in await page.inner_text("h1"), await page.content()
    assert "return to your client" in await page.inner_text("main")
    return callbacks[-1]


async def test_a_person_connects_refreshes_once_and_disconnects_and_a_dropped_grant_asks_again(
    server: DaphneServer, server_b: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    names = await asyncio.to_thread(setup, server, server_b)
    shots = Screenshots(request.node.name)
    elicitation = f"elicit-{secrets.token_hex(4)}"
    link = await asyncio.to_thread(start_link, server, names, "person", elicitation)
    assert names["person"] not in link  # the link names nobody readably
    callback_url = await connect_in_browser(page, link, names, shots)

    # The tool waiting on the elicitation hears of it (then it sends notifications/elicitation/complete).
    assert await asyncio.to_thread(
        vault_call, server, names, f"await vault.wait_connected({elicitation!r}, 5)"
    )
    first = await asyncio.to_thread(connection_row, server, names)
    assert first is not None and first["access_token"] and first["refresh_token"]
    assert first["sealed"]  # neither token in clear at rest
    used_secret(first["access_token"]), used_secret(first["refresh_token"])  # and never in a server's log
    token = await asyncio.to_thread(vault_call, server, names, "await vault.access_token(t.pk, u.pk, 'gh')")
    assert token == first["access_token"]
    assert await asyncio.to_thread(provider_takes, server_b, names, token) == 200
    assert await asyncio.to_thread(refresh_grants, server, names) == 1

    # Replayed state: the callback that just worked, once more, in the same browser.
    await page.goto(callback_url)
    assert "cannot be used" in await page.inner_text("h1")

    # Expired: refreshed before it is handed out, with the same rotation B counts.
    await asyncio.to_thread(expire, server, names)
    refreshed = await asyncio.to_thread(
        vault_call, server, names, "await vault.access_token(t.pk, u.pk, 'gh')"
    )
    assert refreshed != token
    assert await asyncio.to_thread(refresh_grants, server, names) == 2
    assert await asyncio.to_thread(provider_takes, server_b, names, refreshed) == 200

    # Two processes asking at the same moment for an expired token: one refresh (B's reuse protection
    # would have revoked the whole grant at a second refresh with the same token), the same new token.
    await asyncio.to_thread(expire, server, names)
    both = await asyncio.to_thread(race, server, names)
    assert both[0] == both[1] and both[0] != refreshed, both
    assert await asyncio.to_thread(refresh_grants, server, names) == 3
    assert await asyncio.to_thread(provider_takes, server_b, names, both[0]) == 200

    # Another member of the tenant cannot disconnect it: their answer is a missing connection's.
    row = await asyncio.to_thread(connection_row, server, names)
    assert row is not None
    async with httpx.AsyncClient(base_url=server.url, timeout=REQUEST_SECONDS) as outsider:
        await login(outsider, names["outsider"], names["password"])
        for pk in (row["pk"], 999999999):
            refused = await outsider.post(
                f"/connections/{pk}/disconnect",
                data={"csrfmiddlewaretoken": outsider.cookies["csrftoken"]},
                headers={"Referer": f"{server.url}/connections/"},
            )
            assert refused.status_code == 404
        assert names["person"] not in (await outsider.get("/connections/")).text
    assert await asyncio.to_thread(connection_row, server, names) is not None

    # My connections: Disconnect revokes at B, which refuses the token from then on.
    await page.goto(f"{server.url}/connections/")
    await shots.take(page, "my-connections")
    assert "Provider B" in await page.inner_text("table")
    async with page.expect_navigation():
        await page.click("button:text-is('Disconnect')")
    await shots.take(page, "disconnected")
    assert "Provider B is disconnected" in await page.inner_text("main")
    assert await asyncio.to_thread(connection_row, server, names) is None
    assert await asyncio.to_thread(provider_takes, server_b, names, both[0]) == 401

    # Connect again, then B drops the grant: the next call deletes the connection and asks to connect.
    await connect_in_browser(page, await asyncio.to_thread(start_link, server, names, "person"), names, shots)
    again = await asyncio.to_thread(connection_row, server, names)
    assert again is not None
    await asyncio.to_thread(
        django_shell,
        server.env,
        "from oauth2_provider.models import RefreshToken\n"
        f"for rt in RefreshToken.objects.filter(application__client_id={names['client_id']!r}, revoked=None):\n"
        "    rt.revoke()\n",
    )
    await asyncio.to_thread(expire, server, names)
    answer = await asyncio.to_thread(vault_call, server, names, "await vault.access_token(t.pk, u.pk, 'gh')")
    assert f"/t/{names['acct']}/connections/gh/start?link=" in answer["not_connected"]
    assert await asyncio.to_thread(connection_row, server, names) is None

    actions = await asyncio.to_thread(audit_actions, server, names)
    assert actions == [
        ("connection_made", ""),
        ("connection_removed", "disconnected"),
        ("connection_made", ""),
        ("connection_removed", "invalid_grant"),
    ], actions


async def login(http: httpx.AsyncClient, username: str, password: str) -> None:
    page = await http.get("/oauth/login")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)[1]  # type: ignore[index]
    response = await http.post(
        "/oauth/login",
        data={"csrfmiddlewaretoken": token, "username": username, "password": password, "next": "/"},
        headers={"Referer": f"{http.base_url}/oauth/login"},
    )
    assert response.status_code == 302, response.text[:1000]


async def press_connect(http: httpx.AsyncClient, link: str) -> httpx.Response:
    """Press Connect with a good CSRF token (the session's cookie), whether or not the page offers it."""
    await http.get(link)
    return await http.post(
        link,
        data={"csrfmiddlewaretoken": http.cookies["csrftoken"]},
        headers={"Referer": f"{http.base_url}{link}"},
    )


async def test_hostile_table_of_connection_links_and_states(
    server: DaphneServer, server_b: DaphneServer
) -> None:
    names = await asyncio.to_thread(setup, server, server_b)
    link = await asyncio.to_thread(start_link, server, names, "person")
    path = link.removeprefix(server.url)
    other_tenant_path = path.replace(f"/t/{names['acct']}/", f"/t/{names['other']}/")
    signed = path.split("link=", 1)[1]
    tampered = path.replace(signed, signed[:-2] + ("AA" if not signed.endswith("AA") else "BB"))
    kwargs: dict[str, Any] = {"base_url": server.url, "timeout": REQUEST_SECONDS}
    async with httpx.AsyncClient(**kwargs) as person, httpx.AsyncClient(**kwargs) as outsider:
        # Signed out: whom it is for and a sign-in link, no way to connect.
        signed_out = await person.get(path)
        assert signed_out.status_code == 200 and names["person"] in signed_out.text
        assert "/oauth/login?next=" in signed_out.text and 'id="connect"' not in signed_out.text
        await login(person, names["person"], names["password"])
        await login(outsider, names["outsider"], names["password"])

        # Another user's link: shown for whom it is, refused, and never sent to the provider.
        shown = await outsider.get(path)
        assert shown.status_code == 403 and names["person"] in shown.text and 'id="connect"' not in shown.text
        posted = await press_connect(outsider, path)
        assert posted.status_code == 403 and "location" not in posted.headers

        # Another tenant's provider (of the same name), a missing one, a tampered link: 404 alike.
        for bad in (other_tenant_path, path.replace("/gh/start", "/nope/start"), tampered):
            answer = await person.get(bad)
            assert answer.status_code == 404 and "This link is not valid" in answer.text, (
                bad,
                answer.status_code,
            )

        # The person's own link sends them to B with a state bound to their session.
        sent = await press_connect(person, path)
        assert sent.status_code == 302, sent.text[:500]
        to_provider = httpx.URL(sent.headers["location"])
        assert str(to_provider).startswith(server_b.url)
        state = to_provider.params["state"]
        assert to_provider.params["code_challenge_method"] == "S256"
        assert to_provider.params["resource"] == server_b.mcp_url(names["prov"])
        callback = f"/t/{names['acct']}/connections/gh/callback"

        # The person's state in the outsider's browser: refused (and still good for the person).
        stolen = await outsider.get(callback, params={"state": state, "code": "x"})
        assert stolen.status_code == 400 and "cannot be used" in stolen.text
        # The person's state at another tenant's callback: refused, and used up.
        elsewhere = await person.get(
            f"/t/{names['other']}/connections/gh/callback", params={"state": state, "code": "x"}
        )
        assert elsewhere.status_code == 400
        replayed = await person.get(callback, params={"state": state, "code": "x"})
        assert replayed.status_code == 400 and "cannot be used" in replayed.text

        # A forged code with a fresh state: B refuses it, said in our words, nothing stored.
        issuer = server_b.url
        sent = await press_connect(person, path)
        state = httpx.URL(sent.headers["location"]).params["state"]
        forged = await person.get(callback, params={"state": state, "code": "forged", "iss": issuer})
        assert forged.status_code == 502 and "invalid_grant" in forged.text
        # A code said to come from another authorization server (RFC 9207 mix-up), or from nobody: refused
        # before any exchange.
        for iss in ({"iss": "https://evil.example.com"}, {}):
            sent = await press_connect(person, path)
            state = httpx.URL(sent.headers["location"]).params["state"]
            mixed = await person.get(callback, params={"state": state, "code": "x", **iss})
            assert mixed.status_code == 502 and "(iss)" in mixed.text, iss
        # The person pressed Deny at B: B sends the person back with an error, and nothing is stored.
        sent = await press_connect(person, path)
        state = httpx.URL(sent.headers["location"]).params["state"]
        denied = await person.get(callback, params={"state": state, "error": "access_denied", "iss": issuer})
        assert denied.status_code == 400 and "did not give access" in denied.text
        assert await asyncio.to_thread(connection_row, server, names) is None

        # Nothing of anyone's to see or disconnect: the done page and a connection id answer 404.
        assert (await person.get(f"/t/{names['acct']}/connections/gh/done")).status_code == 404
        mine = await person.get("/connections/")
        assert mine.status_code == 200 and "You have connected no accounts" in mine.text
        gone = await person.post(
            "/connections/999999999/disconnect",
            data={"csrfmiddlewaretoken": person.cookies["csrftoken"]},
            headers={"Referer": f"{server.url}/connections/"},
        )
        assert gone.status_code == 404
