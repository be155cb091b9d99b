"""A table of every web entry point that takes a username or an e-mail address: one answer for every name.

Each row is sent once per name an owner (alice, of tenant-a) might probe: an account of another tenant
(charlie), an inactive member of her own tenant (dora) where a member is asked for, and a name no account
has (nobody). The status and the answer (the probed name replaced, and what differs between any two
requests, such as row ids, times and CSRF tokens, left out) must be the same for all: otherwise any
owner learns which usernames or addresses exist on the platform (AMB-281). Browser-facing admin forms go
through Django's test client, the API through its JSON client.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.urls import reverse

from tenants.models import ApiKey, Invitation, Membership, Role, ServiceClient
from tests.api.conftest import API, ApiClient

pytestmark = pytest.mark.django_db

BASE = f"{API}/tenant-a"
# What differs between two answers whatever the names: row ids and times (an invitation's, say).
VOLATILE_KEYS = {"id", "created_at", "expires_at"}


@dataclass(frozen=True)
class Probe:
    """One name to probe: as a username, an e-mail address and an account id (None: no account)."""

    label: str
    username: str
    email: str
    pk: int


@dataclass(frozen=True)
class World:
    """The tenant and its owner's clients, and the names to probe."""

    api: ApiClient
    admin: Client
    tenant_pk: int
    member_pk: int  # bob's membership, for a change that names another user
    probes: list[Probe]


Answer = tuple[int, str]
Send = Callable[[World, Probe], Answer]


def json_answer(response: Any, probe: Probe) -> Answer:
    body = response.json() if response.content else None

    def scrub(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: scrub(v) for k, v in value.items() if k not in VOLATILE_KEYS}
        if isinstance(value, list):
            return [scrub(v) for v in value]
        return value

    text = json.dumps(scrub(body), sort_keys=True)
    return response.status_code, text.replace(probe.email, "EMAIL").replace(probe.username, "NAME")


def page_answer(response: Any, probe: Probe) -> Answer:
    """A page's status, where it redirects to, and every error it shows (its tokens differ per request)."""
    if response.status_code in (301, 302, 303):
        return response.status_code, response["Location"]
    html = response.content.decode()
    errors = re.findall(r'<ul class="errorlist[^"]*"[^>]*>(.*?)</ul>', html, re.S)
    errors += re.findall(r'<p class="errornote">(.*?)</p>', html, re.S)
    errors += re.findall(r'<p class="error"[^>]*>(.*?)</p>', html, re.S)
    text = " | ".join(" ".join(e.split()) for e in errors)
    return response.status_code, text.replace(probe.email, "EMAIL").replace(probe.username, "NAME")


def api(method: str, path: str, body: Callable[[Probe], dict[str, Any]]) -> Send:
    def send(world: World, probe: Probe) -> Answer:
        url = path.replace("$MEMBER", str(world.member_pk))
        return json_answer(world.api.call(method, url, body(probe)), probe)

    return send


def admin_post(name: str, body: Callable[[World, Probe], dict[str, Any]]) -> Send:
    def send(world: World, probe: Probe) -> Answer:
        return page_answer(world.admin.post(reverse(name), body(world, probe)), probe)

    return send


def sign_in(path: str) -> Send:
    def send(world: World, probe: Probe) -> Answer:
        response = Client().post(path, {"username": probe.username, "password": "not-the-password-1"})
        return page_answer(response, probe)

    return send


@dataclass(frozen=True)
class Row:
    id: str
    send: Send
    status: int  # the one status every name gets
    members_only: bool = False  # asks for a member: the inactive member is probed too


ROWS: list[Row] = [
    Row("API: mint an API key acting as NAME", api("POST", f"{BASE}/api-keys/",
        lambda p: {"name": "k", "acts_as": p.username}), 400, members_only=True),
    Row("API: make a service client acting as NAME", api("POST", f"{BASE}/service-clients/",
        lambda p: {"name": "c", "acts_as": p.username}), 400, members_only=True),
    Row("API: an owner adds NAME as a member", api("POST", f"{BASE}/members/",
        lambda p: {"username": p.username, "role": "viewer"}), 400, members_only=True),
    Row("API: an owner adds EMAIL as a member (an invitation)", api("POST", f"{BASE}/members/",
        lambda p: {"email": p.email, "role": "viewer"}), 202),
    Row("API: an owner invites EMAIL", api("POST", f"{BASE}/invitations/",
        lambda p: {"email": p.email, "role": "editor"}), 201),
    Row("API: a membership's username changed to NAME (PATCH)", api("PATCH", f"{BASE}/members/$MEMBER/",
        lambda p: {"username": p.username}), 400),
    Row("API: a membership's username changed to NAME (PUT)", api("PUT", f"{BASE}/members/$MEMBER/",
        lambda p: {"username": p.username, "role": "editor"}), 400),
    Row("admin: an API key acting as account #PK", admin_post("admin:tenants_apikey_add",
        lambda w, p: {"tenant": w.tenant_pk, "name": "k", "acts_as": p.pk, "scope": "", "days": 30,
                      "allowed_addresses": ""}), 200, members_only=True),
    Row("admin: a service client acting as account #PK", admin_post("admin:tenants_serviceclient_add",
        lambda w, p: {"tenant": w.tenant_pk, "name": "c", "acts_as": p.pk, "scope": ""}), 200,
        members_only=True),
    Row("admin: an owner adds the membership of NAME", admin_post("admin:tenants_membership_add",
        lambda w, p: {"tenant": w.tenant_pk, "user": p.username, "role": "viewer"}), 302, members_only=True),
    Row("admin: an owner invites EMAIL", admin_post("admin:tenants_invitation_add",
        lambda w, p: {"tenant": w.tenant_pk, "email": p.email, "role": "viewer"}), 302),
    Row("sign-in page of the authorization server: NAME, a wrong password", sign_in("/oauth/login"), 200),
    Row("the admin's sign-in page: NAME, a wrong password", sign_in("/admin/login/"), 200),
]  # fmt: skip


@pytest.fixture
def world(tenant_a, alice, bob, charlie, django_user_model) -> World:
    tenant_a.auth_mode = "oauth"  # keys and service clients are an OAuth tenant's
    tenant_a.save()
    dora = django_user_model.objects.create_user("dora", "dora@example.com", "dora-pw-123", is_active=False)
    Membership.objects.create(user=dora, tenant=tenant_a, role=Role.VIEWER)
    admin = Client()
    admin.force_login(alice)
    nobody_pk = get_user_model().objects.order_by("-pk").first().pk + 1000
    return World(
        api=ApiClient(alice),
        admin=admin,
        tenant_pk=tenant_a.pk,
        member_pk=Membership.objects.get(user=bob).pk,
        probes=[
            Probe("another tenant's account", "charlie", "charlie@example.com", charlie.pk),
            Probe("an inactive member", "dora", "dora@example.com", dora.pk),
            Probe("no account", "nobody", "nobody@example.com", nobody_pk),
        ],
    )


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_every_name_gets_the_same_answer(world: World, row: Row) -> None:
    probes = [p for p in world.probes if row.members_only or p.username != "dora"]
    answers = {probe.label: row.send(world, probe) for probe in probes}
    first = next(iter(answers.values()))
    assert first[0] == row.status, answers
    assert all(answer == first for answer in answers.values()), answers
    # Nothing was made for an account that is no member: no key, client or membership.
    assert not ApiKey.objects.exists() and not ServiceClient.objects.exists()
    assert not Membership.objects.filter(
        user__username__in=["charlie", "nobody"], tenant_id=world.tenant_pk
    ).exists()
    assert Membership.objects.get(pk=world.member_pk).user.username == "bob"


def test_the_answers_still_name_the_probed_name(world: World) -> None:
    # The same words for every name, and those words say what went wrong.
    status, text = ROWS[0].send(world, world.probes[0])
    assert status == 400 and "No member 'NAME' of tenant-a." in text
    status, text = ROWS[5].send(world, world.probes[0])
    assert status == 400 and "A membership's user cannot change." in text
    assert Invitation.objects.count() == 0


def test_the_table_covers_each_surface_once() -> None:
    assert len({r.id for r in ROWS}) == len(ROWS) >= 13
