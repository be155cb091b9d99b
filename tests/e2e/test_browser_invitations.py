"""An invitation in a real browser (AMB-105, AMB-106): an owner invites an address in the admin, the
invited person opens the link from the mail (Django's file backend on the e2e servers), creates an
account or signs in, accepts, and sees the tenant on the front page."""

from __future__ import annotations

import re
import secrets
import time
from pathlib import Path

import pytest
from playwright.async_api import Browser, Page, expect

from tests.e2e.admin_pages import body_text
from tests.e2e.browser import PAGE_MS, Screenshots, chromium, sign_in
from tests.e2e.servers import DaphneServer, django_shell, used_secret

pytestmark = [pytest.mark.e2e]

LINK = re.compile(r"http://127\.0\.0\.1:\d+/invitations/\S+")


def owner_of_a_tenant(server: DaphneServer) -> tuple[str, str, str]:
    """A tenant of this test and its owner, a staff account: (slug, username, password)."""
    slug, username = f"invite-{secrets.token_hex(3)}", f"owner-{secrets.token_hex(3)}"
    password = used_secret(f"pw-{secrets.token_urlsafe(12)}")
    django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom tenants.models import Membership, Tenant\n"
        f"tenant = Tenant.objects.create(slug={slug!r}, name='Invited team', auth_mode='public')\n"
        f"user = get_user_model().objects.create_user({username!r}, '{username}@example.com', {password!r}, is_staff=True)\n"
        "Membership.objects.create(user=user, tenant=tenant, role='owner')\n",
    )
    return slug, username, password


def link_mailed_to(server: DaphneServer, address: str, timeout: float = PAGE_MS / 1000) -> str:
    """The invitation link in the mail the server wrote for `address` (one file a connection)."""
    folder = Path(server.env["EMAIL_FILE_PATH"])
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for path in folder.glob("*.log"):
            text = path.read_text(errors="replace")
            if f"To: {address}" in text and (found := LINK.search(text)):
                return found.group(0)
        time.sleep(0.1)
    raise AssertionError(f"no invitation mail to {address} in {folder} within {timeout:.0f} s")


async def invite(page: Page, server: DaphneServer, slug: str, address: str, role: str) -> None:
    await page.goto(f"{server.url}/admin/tenants/membership/")
    async with page.expect_navigation():
        await page.get_by_role("link", name="Add membership").click()
    assert page.url.endswith("/admin/tenants/invitation/add/")  # an owner invites, never attaches
    await page.select_option("#id_tenant", label=slug)
    await page.fill("#id_email", address)
    await page.select_option("#id_role", role)
    async with page.expect_navigation():
        await page.click("input[name=_save]")
    assert f"Invitation sent to {address}" in await body_text(page)


async def new_page(browser: Browser) -> Page:
    context = await browser.new_context()  # the invited person's own browser: no cookies
    context.set_default_timeout(PAGE_MS)
    return await context.new_page()


async def test_an_invited_person_creates_an_account_or_signs_in_accepts_and_sees_the_tenant(
    server: DaphneServer, page: Page, request: pytest.FixtureRequest
) -> None:
    shots = Screenshots(request.node.name)
    slug, owner, owner_password = owner_of_a_tenant(server)
    await page.goto(f"{server.url}/admin/")
    await sign_in(page, owner, owner_password)

    newcomer = f"new-{secrets.token_hex(3)}@example.com"
    await invite(page, server, slug, newcomer, "editor")
    await shots.take(page, "invitation-sent")
    link = link_mailed_to(server, newcomer)

    async with chromium() as browser:
        person = await new_page(browser)
        await person.goto(link)
        assert "You are invited to Invited team" in await body_text(person)
        assert await person.input_value("#id_email") == newcomer
        await shots.take(person, "invitation-page")
        username, password = f"newcomer-{secrets.token_hex(3)}", used_secret(f"pw-{secrets.token_urlsafe(12)}")
        await person.fill("#id_username", username)
        await person.fill("#id_password1", password)
        await person.fill("#id_password2", password)
        async with person.expect_navigation():
            await person.click("#create")
        await expect(person.locator(".invitation")).to_have_attribute("data-status", "joined")
        assert "Your role there is editor" in await body_text(person)
        await shots.take(person, "joined")
        async with person.expect_navigation():
            await person.get_by_role("link", name="Your MCP servers").click()
        tenant = person.locator(f"li.tenant[data-slug='{slug}']")
        await expect(tenant).to_contain_text("Invited team (editor)")
        await expect(person.get_by_role("link", name="Open the admin")).to_be_visible()
        await shots.take(person, "front-page")
        # The link works once: opened again in another browser, it says so.
        stranger = await new_page(browser)
        await stranger.goto(link)
        assert "This invitation has been used" in await body_text(stranger)

        # Someone with an account: signs in from the link's page and comes back to accept.
        member, member_password = f"member-{secrets.token_hex(3)}", used_secret(f"pw-{secrets.token_urlsafe(12)}")
        django_shell(
            server.env,
            "from django.contrib.auth import get_user_model\n"
            f"get_user_model().objects.create_user({member!r}, '{member}@example.com', {member_password!r})\n",
        )
        await invite(page, server, slug, f"{member}@example.com", "viewer")
        second = await new_page(browser)
        await second.goto(link_mailed_to(server, f"{member}@example.com"))
        async with second.expect_navigation():
            await second.click("#sign-in")
        await sign_in(second, member, member_password)
        await shots.take(second, "signed-in-to-accept")
        async with second.expect_navigation():
            await second.click("#accept")
        assert "Your role there is viewer" in await body_text(second)
        await second.goto(f"{server.url}/")
        await expect(second.locator(f"li.tenant[data-slug='{slug}']")).to_contain_text("(viewer)")

    await page.goto(f"{server.url}/admin/tenants/invitation/?status=accepted")
    listed = await body_text(page)
    assert newcomer in listed and f"{member}@example.com" in listed
    await shots.take(page, "accepted-invitations")
