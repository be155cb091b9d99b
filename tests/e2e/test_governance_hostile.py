"""Governance against a hostile tenant, client and upstream, on a real Daphne (issue 34).

- A hostile upstream answers 30 MB (with e-mail addresses a results guardrail would redact): each call
  ends with an error naming the size bound (MCP_UPSTREAM_MAX_MESSAGE_BYTES), the reply abandoned unread,
  so no guardrail ever scans it and no byte of it (nor an address) reaches the client; while its
  tenant's clients keep calling, from a process of their own, another tenant's p99 stays within
  `isolation.RATIO` of its idle one.
- A hostile client sends arguments of 5,000 values to a tool under a policy that reads them whole: each
  call is refused naming the policy and the bound (past 1,000 values a policy fails closed rather than
  have the binding convert them on the serving loop), and another tenant's p99 stays within the ratio.
- A hostile owner, through the management API: a policy with a 100 KB condition, the 201st policy and a
  tenant document of 10,000 policies each answer 400 naming the cap, nothing saved; repeated a few at a
  time, they slow no other tenant.
- A tool a deny policy hides answers exactly as a missing one: the same JSON-RPC error (code, message,
  data) through the official SDK client in both eras and through raw HTTP, byte for byte, and the same
  time (medians of interleaved calls).
- A block guardrail's answer names the guardrail, never the secret it found; neither do the tenant's
  stored governance events nor its usage rows.
"""

from __future__ import annotations

import asyncio
import json
import random
import secrets
import statistics
import string
import time
from collections.abc import Awaitable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import pytest
from mcp import MCPError

from tests.e2e.helpers import MCP_HEADERS, REQUEST_SECONDS, mcp_client, open_legacy_session
from tests.e2e.hostile_clients import CALLERS, attacking
from tests.e2e.isolation import isolated
from tests.e2e.servers import ADMIN_USERNAME, DaphneServer, django_shell, used_secret
from tests.upstreams.running import running_upstream
from tests.upstreams.servers import BIG_LINE

pytestmark = [pytest.mark.e2e, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]

ATTACK_SECONDS = 3.0  # the hostile clients' calls, once all four are calling
# Between a hostile client's calls of the 30 MB tool: the upstream encodes 30 MB for each (its own
# process, on the same two cores as Daphne); flat out it would measure the machine, not the platform.
BIG_PAUSE = 0.3
MEGABYTES = 30
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # mcpsite/settings.py MCP_UPSTREAM_MAX_MESSAGE_BYTES
MAX_POLICIES = 200  # mcp_app/models/policies.py MAX_POLICIES_PER_TENANT
MAX_CONDITION_CHARS = 2_000  # mcp_app/governance/conditions.py
HOSTILE_OWNERS = 2  # the owner's requests in flight at once
# Calls of the hidden tool and of the missing one each, interleaved, for the timing comparison.
TIMED_CALLS = 200
# The hidden tool's median may differ from the missing one's by this much of the smaller, plus TIMING_SLACK:
# medians of 200 calls on a loaded 2-core machine move by a few tenths of a millisecond; a hidden path
# 5 ms slower (a lookup, a sleep, an evaluation of something heavy) is far past it.
TIMING_RATIO = 0.25
TIMING_SLACK = 0.0015
GREET = "Tool.objects.create(tenant={t}, name='greet', handler='template', handler_config={{'text': 'Hello, {{{{ name }}}}!'}})\n"
MODERN = "2026-07-28"
FLUSHED_SECONDS = 15.0  # the usage server flushes every second
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}}


def quiet_tenant(server: DaphneServer) -> str:
    """Another tenant, with the `greet` whose latency `isolated` measures."""
    slug = f"quiet-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"o = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        + GREET.format(t="o"),
    )
    return slug


def substrings(secret: str, length: int = 6) -> set[str]:
    return {secret[i : i + length] for i in range(len(secret) - length + 1)}


# --- a hostile upstream ------------------------------------------------------------------------------


async def test_an_upstreams_30_mb_reply_is_abandoned_at_its_bound_unscanned_and_slows_no_other_tenant(
    server: DaphneServer, tmp_path_factory: pytest.TempPathFactory
) -> None:
    with running_upstream(tmp_path_factory.mktemp("big"), stateless=True) as remote:
        hostile, other = f"flooded-{secrets.token_hex(3)}", quiet_tenant(server)
        await asyncio.to_thread(
            django_shell,
            server.env,
            "from mcp_app.models import Guardrail, Upstream, UpstreamTool\nfrom mcp_app.upstreams import service\n"
            "from tenants.models import Tenant\n"
            f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public')\n"
            f"up = Upstream(tenant=h, name='docs', url={remote.url!r}, prefix='docs_', timeout_seconds=20)\n"
            "up.full_clean(); up.save(); service.sync(up)\n"
            "service.publish(UpstreamTool.objects.get(upstream=up, remote_name='big'))\n"
            "g = Guardrail(tenant=h, name='personal-out', detector='personal_data', where='results', action='redact')\n"
            "g.full_clean(); g.save()\n",
        )
        bound = (
            f"Upstream 'docs': Upstream 127.0.0.1:{remote.port} sent a message larger than "
            f"{MAX_MESSAGE_BYTES} bytes; it was not read."
        )

        # One call alone first (the upstream's breaker closed): an isError result naming the bound.
        async with mcp_client(server.mcp_url(hostile), mode="auto") as client:
            result = await client.call_tool("docs_big", {"megabytes": MEGABYTES})
        assert result.is_error and [block.text for block in result.content] == [bound]  # type: ignore[union-attr]

        async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[float, str]]], None]:
            work = attacking(
                server.mcp_url(hostile), "docs_big", {"megabytes": MEGABYTES}, ATTACK_SECONDS, BIG_PAUSE
            )
            return work, None

        ended = await isolated(server.mcp_url(other), f"four clients calling a {MEGABYTES} MB tool", prepare)
        assert len(ended) >= CALLERS, ended[:2]
        # Each call ended at its own bound, in words: never the reply, its addresses, nor their redaction,
        # nor the pooled client the callers share (one reply abandoned ends that reply only: AMB-363).
        # Should the breaker open on those errors, paused. Never a result, never the connection lost.
        label = f"Upstream 'docs': Upstream 127.0.0.1:{remote.port}"
        texts = [text for _, text in ended]
        print({text[:60]: texts.count(text) for text in set(texts)})
        assert bound in texts, {text[:300] for text in texts}
        assert all(t == bound or t.startswith(f"{label} is unavailable; retry after ") for t in texts), {
            text[:300] for text in texts
        }
    assert "example.com" not in bound and "[redacted" not in bound and BIG_LINE[:20] not in bound


# --- a hostile client --------------------------------------------------------------------------------

# A call's arguments of this many short strings: under a policy that reads the whole map the binding
# converted each (~3 µs), 15 ms of the serving loop a call; past MAX_ARGUMENT_VALUES (1,000) the policy
# fails closed instead (AMB-377). ~25 KB a call: four clients sending 100 KB flat out measured the
# parsing of their bodies on a loaded machine (3.4-7x with the bound), not the policy.
FLOOD_ITEMS = 5_000


async def test_arguments_of_more_values_than_a_policy_reads_are_refused_in_words_and_slow_no_other_tenant(
    server: DaphneServer,
) -> None:
    hostile, other = f"flooding-{secrets.token_hex(3)}", quiet_tenant(server)
    await asyncio.to_thread(
        django_shell,
        server.env,
        "from mcp_app.models import Policy, Tool\nfrom tenants.models import Tenant\n"
        f"h = Tenant.objects.create(slug={hostile!r}, name={hostile!r}, auth_mode='public')\n"
        "Tool.objects.create(tenant=h, name='echo', handler='template', handler_config={'text': '{{ message }}'})\n"
        "p = Policy(tenant=h, name='few-arguments', effect='deny', applies_to='tools', condition='size(arguments) > 5')\n"
        "p.full_clean(); p.save(); h.bump_version()\n",
    )
    refused = (
        "Denied by policy 'few-arguments': this tool may not be used with these arguments. Its arguments hold "
        "more than 1,000 values (list items, keys and values), more than a policy reads; send fewer."
    )
    async with mcp_client(server.mcp_url(hostile), mode="auto") as client:
        assert (await client.call_tool("echo", {"message": "hi"})).content[0].text == "hi"  # type: ignore[union-attr]
        flooded = await client.call_tool("echo", {"message": "hi", "items": ["a"] * FLOOD_ITEMS})
    assert flooded.is_error and flooded.content[0].text == refused  # type: ignore[union-attr]

    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[float, str]]], None]:
        work = attacking(
            server.mcp_url(hostile), "echo", {"message": "hi", "items": ["a"] * FLOOD_ITEMS}, ATTACK_SECONDS
        )
        return work, None

    ended = await isolated(server.mcp_url(other), f"four clients sending {FLOOD_ITEMS:,} values a call", prepare)
    # Each call refused in words; flat out, some past the per-session rate limit (also in words).
    texts = {text for _, text in ended}
    assert len(ended) >= CALLERS and refused in texts, {t[:200] for t in texts}
    assert all(t == refused or t.startswith("Too many tool calls: ") for t in texts), {t[:200] for t in texts}


# --- a hostile owner ---------------------------------------------------------------------------------


def owned_tenant(server: DaphneServer) -> tuple[str, str]:
    """A tenant the admin owns, at its cap of policies (written without their checks: the setting, not
    the check under test), and a `manage` API token of the admin's."""
    slug = f"owned-{secrets.token_hex(3)}"
    out = django_shell(
        server.env,
        "from django.contrib.auth import get_user_model\nfrom mcp_app.api.tokens import issue_manage_token\n"
        "from mcp_app.models import Policy, Tool\nfrom tenants.models import Membership, Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        f"u = get_user_model().objects.get(username={ADMIN_USERNAME!r})\n"
        "Membership.objects.create(tenant=t, user=u, role='owner')\n"
        + GREET.format(t="t")
        + "Policy.objects.bulk_create([Policy(tenant=t, name=f'p{i:03d}', version=1, effect='deny', applies_to='tools',"
        f" condition=f\"arguments.name == 'x{{i}}'\") for i in range({MAX_POLICIES})])\n"
        "print(issue_manage_token(u, 1, 'hostile owner'))\n",
    )
    return slug, used_secret(out.strip().splitlines()[-1])


def policy_count(server: DaphneServer, slug: str) -> int:
    out = django_shell(
        server.env,
        f"from mcp_app.models import Policy\nprint(Policy.objects.filter(tenant__slug={slug!r}).count())\n",
    )
    return int(out.strip().splitlines()[-1])


async def test_an_owner_past_every_policy_cap_is_refused_in_words_and_slows_no_other_tenant(
    server: DaphneServer,
) -> None:
    (slug, token), other = await asyncio.to_thread(owned_tenant, server), quiet_tenant(server)
    # 100 KB of a condition that would compile: only its length is refused.
    long_condition = " || ".join(f"arguments.name == 'n{i:05d}'" for i in range(4_000))[:100_000]
    assert len(long_condition) == 100_000
    many = [
        {
            "name": f"m{i:05d}",
            "effect": "deny",
            "applies_to": "tools",
            "condition": f"arguments.name == 'y{i}'",
        }
        for i in range(10_000)
    ]
    document = {"format": "mcp-platform/tenant", "version": 1, "policies": many}
    policies, imported = f"/api/v1/tenants/{slug}/policies/", f"/api/v1/tenants/{slug}/import"
    requests = [
        ("a 100 KB condition", policies, {"name": "long", "condition": long_condition}),
        ("the 201st policy", policies, {"name": "one-more", "condition": "arguments.name == 'z'"}),
        ("10,000 policies imported", imported, document),
    ]
    says = {
        "a 100 KB condition": f"the condition is longer than {MAX_CONDITION_CHARS} characters",
        "the 201st policy": f"A tenant has at most {MAX_POLICIES} policies.",
        "10,000 policies imported": f"A tenant has at most {MAX_POLICIES} policies. This document has 10000.",
    }

    # Encoded once, and sent from threads of their own: the owner's 1 MB bodies encoded, sent and their
    # answers read on this loop would be counted as the other tenant's latency, which it measures.
    bodies = [(what, path, json.dumps(body).encode()) for what, path, body in requests]
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def owner(until: float) -> list[tuple[str, float, httpx.Response]]:
        answers = []
        with httpx.Client(base_url=server.url, timeout=REQUEST_SECONDS, headers=headers) as http:
            while time.monotonic() < until:
                for what, path, body in bodies:
                    began = time.perf_counter()
                    answer = http.post(path, content=body)
                    answers.append((what, time.perf_counter() - began, answer))
        return answers

    async def hostile_owner() -> list[tuple[str, float, httpx.Response]]:
        until = time.monotonic() + ATTACK_SECONDS
        rounds = await asyncio.gather(*(asyncio.to_thread(owner, until) for _ in range(HOSTILE_OWNERS)))
        return [answer for answers in rounds for answer in answers]

    async def prepare(_: AsyncExitStack) -> tuple[Awaitable[list[tuple[str, float, httpx.Response]]], None]:
        return hostile_owner(), None

    answers = await isolated(server.mcp_url(other), "an owner past every policy cap", prepare)
    assert {what for what, _, _ in answers} == set(says), answers[:3]
    for what, _seconds, answer in answers:
        # A readable refusal naming the cap, each alike (never a 500, never a wait at another's turn).
        assert answer.status_code == 400, (what, answer.status_code, answer.text[:300])
        body = answer.json()
        assert says[what] in json.dumps(body), (what, body)
        assert long_condition[:50] not in answer.text  # the refusal does not echo what it refused
    slowest = {what: max(s for w, s, _ in answers if w == what) for what in says}
    print("slowest refusals: " + ", ".join(f"{what} {s * 1000:.0f} ms" for what, s in slowest.items()))
    assert await asyncio.to_thread(policy_count, server, slug) == MAX_POLICIES  # nothing saved


# --- a hostile client --------------------------------------------------------------------------------


def hiding_tenants(server: DaphneServer) -> tuple[str, str]:
    """A tenant whose policy hides its destructive `drop_table` from everyone, and a twin without it."""
    hiding, twin = f"hiding-{secrets.token_hex(3)}", f"twin-{secrets.token_hex(3)}"
    django_shell(
        server.env,
        "from mcp_app.models import Policy, Tool\nfrom tenants.models import Tenant\n"
        f"h = Tenant.objects.create(slug={hiding!r}, name={hiding!r}, auth_mode='public')\n"
        f"w = Tenant.objects.create(slug={twin!r}, name={twin!r}, auth_mode='public')\n"
        + GREET.format(t="h")
        + GREET.format(t="w")
        + "Tool.objects.create(tenant=h, name='drop_table', handler='template', handler_config={'text': 'Dropped.'},"
        " annotations={'destructiveHint': True})\n"
        "p = Policy(tenant=h, name='no-destruction', condition=\"target.name == 'drop_table'\")\n"
        "p.full_clean(); p.save()\n",
    )
    return hiding, twin


HIDDEN, MISSING = "drop_table", "drop_tablf"  # the same length: the same bytes but one


def modern_call(name: str, request_id: int = 7) -> tuple[dict[str, str], dict[str, Any]]:
    headers = {**MCP_HEADERS, "MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": name}
    body = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": name, "arguments": {"name": "users"}, "_meta": META},
    }
    return headers, body


async def raw_answers(http: httpx.AsyncClient, url: str, name: str) -> list[bytes]:
    """The bodies of a 2026-07-28 call and a legacy session's call of `name`."""
    headers, body = modern_call(name)
    modern = await http.post(url, headers=headers, json=body)
    legacy_headers = await open_legacy_session(http, url)
    legacy_body = {**body, "params": {"name": name, "arguments": {"name": "users"}}}
    legacy = await http.post(url, headers=legacy_headers, json=legacy_body)
    return [modern.content, legacy.content]


async def sdk_error(url: str, mode: str, name: str) -> tuple[int, str, Any]:
    async with mcp_client(url, mode=mode) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["greet"]
        with pytest.raises(MCPError) as refused:
            await client.call_tool(name, {"name": "users"})
    return refused.value.error.code, refused.value.error.message, refused.value.error.data


async def test_a_hidden_tool_answers_exactly_as_a_missing_one_in_words_and_in_time(
    server: DaphneServer,
) -> None:
    hiding, twin = await asyncio.to_thread(hiding_tenants, server)
    url, twin_url = server.mcp_url(hiding), server.mcp_url(twin)
    for mode in ("legacy", "auto"):
        hidden = await sdk_error(url, mode, HIDDEN)
        assert hidden == await sdk_error(twin_url, mode, HIDDEN), mode  # where it does not exist at all
        missing = await sdk_error(url, mode, MISSING)
        assert hidden == (missing[0], missing[1].replace(MISSING, HIDDEN), missing[2]), mode
        assert hidden[:2] == (-32602, f"Unknown tool: {HIDDEN}"), hidden
    async with httpx.AsyncClient(timeout=REQUEST_SECONDS) as http:
        hidden_bodies = await raw_answers(http, url, HIDDEN)
        assert hidden_bodies == await raw_answers(http, twin_url, HIDDEN)
        assert hidden_bodies == [
            body.replace(MISSING.encode(), HIDDEN.encode()) for body in await raw_answers(http, url, MISSING)
        ]
        assert [json.loads(body)["error"]["message"] for body in hidden_bodies] == [
            f"Unknown tool: {HIDDEN}"
        ] * 2, hidden_bodies

        # Timing: the hidden tool and the missing name called in turn, in a random order each round, on
        # one kept-alive connection; their medians alike.
        async def timed(name: str) -> float:
            headers, body = modern_call(name)
            began = time.perf_counter()
            answer = await http.post(url, headers=headers, json=body)
            taken = time.perf_counter() - began
            assert answer.json()["error"]["message"] == f"Unknown tool: {name}"
            return taken

        for name in (HIDDEN, MISSING) * 10:  # warm both paths
            await timed(name)
        taken: dict[str, list[float]] = {HIDDEN: [], MISSING: []}
        for _ in range(TIMED_CALLS):
            for name in random.sample((HIDDEN, MISSING), 2):
                taken[name].append(await timed(name))
    hidden_median, missing_median = statistics.median(taken[HIDDEN]), statistics.median(taken[MISSING])
    print(
        f"medians of {TIMED_CALLS} calls: hidden {hidden_median * 1000:.2f} ms, missing {missing_median * 1000:.2f} ms"
    )
    bound = TIMING_RATIO * min(hidden_median, missing_median) + TIMING_SLACK
    assert abs(hidden_median - missing_median) <= bound, (hidden_median, missing_median)


# --- a guardrail's message ---------------------------------------------------------------------------


def aws_secret() -> str:
    """An AWS access key id and a secret access key, random (never a real one), as one argument."""
    alphabet = string.ascii_uppercase + string.digits
    key_id = "AKIA" + "".join(secrets.choice(alphabet) for _ in range(16))
    secret_key = "".join(secrets.choice(string.ascii_letters + string.digits) for _ in range(40))
    return used_secret(f'{key_id} aws_secret_access_key = "{secret_key}"')


def stored_rows(server: DaphneServer, slug: str) -> dict[str, Any]:
    """The tenant's governance events and usage rows (buckets and remembered errors), every field."""
    out = django_shell(
        server.env,
        "import json\nfrom django.forms.models import model_to_dict\n"
        "from mcp_app.models import GovernanceEvent\nfrom mcp_app.models.usage import UsageBucket, UsageError\n"
        "from tenants import wall\n"
        "with wall.bypass('test'):\n"
        f"    rows = {{m.__name__: [model_to_dict(r) for r in m.objects.filter(tenant__slug={slug!r})]"
        " for m in (GovernanceEvent, UsageBucket, UsageError)}\n"
        "print(json.dumps(rows, default=str))\n",
    )
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_block_guardrails_answer_and_records_never_hold_the_secret_it_found(
    usage_server: DaphneServer, mode: str
) -> None:
    slug, secret = f"keys-{secrets.token_hex(3)}", aws_secret()
    await asyncio.to_thread(
        django_shell,
        usage_server.env,
        "from mcp_app.models import Guardrail, Tool\nfrom tenants.models import Tenant\n"
        f"t = Tenant.objects.create(slug={slug!r}, name={slug!r}, auth_mode='public')\n"
        + GREET.format(t="t")
        + "g = Guardrail(tenant=t, name='no-keys', detector='secrets', where='arguments', action='block')\n"
        "g.full_clean(); g.save()\n",
    )
    async with mcp_client(usage_server.mcp_url(slug), mode=mode) as client:
        blocked = await client.call_tool("greet", {"name": f"my keys: {secret}"})
    assert blocked.is_error
    text = " ".join(block.text for block in blocked.content)  # type: ignore[union-attr]
    assert text.startswith("Blocked by guardrail 'no-keys': the arguments held "), text
    assert "AWS Access Key" in text and not substrings(secret) & substrings(text), text
    # The usage flush (every second on this server) writes the block's event and the call's usage.
    deadline = time.monotonic() + FLUSHED_SECONDS
    while not (
        (rows := await asyncio.to_thread(stored_rows, usage_server, slug))["GovernanceEvent"]
        and rows["UsageError"]
    ):
        assert time.monotonic() < deadline, f"nothing flushed within {FLUSHED_SECONDS} s: {rows}"
        await asyncio.sleep(0.25)
    assert [(e["kind"], e["rule"], e["target"]) for e in rows["GovernanceEvent"]] == [
        ("blocked", "no-keys", "greet")
    ]
    stored = json.dumps(rows)
    leaked = sorted(part for part in substrings(secret) if part in stored)
    assert not leaked, (leaked, stored[:2000])
