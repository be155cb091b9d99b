"""A tenant's policies through the API (AMB-347) and the simulator (AMB-350): owners write, a condition
that cannot be used is a 400 naming why, viewers read, another tenant's policy is a 404 like a missing
one, and the simulator tells a described caller's decision and lists without running anything."""

from __future__ import annotations

import pytest

from mcp_app.models import Policy, Tool
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
POLICIES = f"{API}/tenant-a/policies/"
SIMULATE = f"{API}/tenant-a/policy/simulate/"


@pytest.fixture
def tools(tenant_a) -> None:
    for name, destructive in (("read_rows", False), ("drop_table", True)):
        Tool.objects.create(
            tenant=tenant_a, name=name, handler="template", handler_config={"text": name},
            annotations={"destructiveHint": destructive},
        )  # fmt: skip


def test_an_owner_writes_a_policy_and_a_condition_that_cannot_be_used_is_a_400_naming_why(as_alice) -> None:
    made = as_alice.call(
        "POST", POLICIES, {"name": "keys-read-only", "condition": "caller.auth == 'api_key'"}
    )
    assert made.status_code == 201, made.json()
    assert made.json()["effect"] == "deny" and made.json()["applies_to"] == "all"
    loops = as_alice.call("POST", POLICIES, {"name": "loops", "condition": "arguments.x.all(y, y > 0)"})
    assert loops.status_code == 400 and "comprehensions" in str(loops.json())
    typo = as_alice.call("PATCH", f"{POLICIES}{made.json()['id']}/", {"condition": "caler.auth == 'x'"})
    assert typo.status_code == 400 and "unknown name caler" in str(typo.json())
    assert Policy.objects.get(pk=made.json()["id"]).condition == "caller.auth == 'api_key'"


def test_viewers_read_and_other_tenants_see_nothing(as_alice, as_bob, as_charlie) -> None:
    made = as_alice.call("POST", POLICIES, {"name": "p", "condition": "true"}).json()
    assert as_bob.call("GET", POLICIES).status_code == 200
    assert as_bob.call("PATCH", f"{POLICIES}{made['id']}/", {"condition": "false"}).status_code == 403
    theirs, missing = f"{API}/tenant-b/policies/{made['id']}/", f"{API}/tenant-b/policies/999999/"
    for method in ("GET", "DELETE"):
        assert as_charlie.call(method, theirs).json() == as_charlie.call(method, missing).json()
        assert as_charlie.call(method, theirs).status_code == 404
    assert as_charlie.call("POST", SIMULATE, {"kind": "tool", "name": "x"}).status_code == 404


def test_the_simulator_tells_the_decision_the_policy_and_the_callers_lists(as_alice, tools) -> None:
    as_alice.call(
        "POST", POLICIES,
        {"name": "keys-never-destroy", "condition": "caller.auth == 'api_key' && target.annotations.destructiveHint == true"},
    )  # fmt: skip
    as_alice.call(
        "POST", POLICIES, {"name": "no-system-rows", "condition": "arguments.table.startsWith('sys_')"}
    )  # fmt: skip
    as_key = {"auth": "api_key"}
    hidden = as_alice.call("POST", SIMULATE, {"caller": as_key, "kind": "tool", "name": "drop_table"}).json()
    assert (
        hidden["allowed"] is False and hidden["hidden"] is True and hidden["policy"] == "keys-never-destroy"
    )
    assert hidden["lists"]["tools"] == ["read_rows"]
    person = {"auth": "oauth", "user": 1, "scopes": ["mcp:tools"]}
    allowed = as_alice.call(
        "POST",
        SIMULATE,
        {"caller": person, "kind": "tool", "name": "drop_table", "arguments": {"table": "users"}},
    ).json()
    assert allowed["allowed"] is True and allowed["lists"]["tools"] == ["drop_table", "read_rows"]
    denied = as_alice.call(
        "POST",
        SIMULATE,
        {"caller": person, "kind": "tool", "name": "read_rows", "arguments": {"table": "sys_x"}},
    ).json()
    assert denied["allowed"] is False and denied["hidden"] is False and denied["policy"] == "no-system-rows"
    unknown = as_alice.call("POST", SIMULATE, {"kind": "tool", "name": "nope"})
    assert unknown.status_code == 400 and "no tool 'nope'" in str(unknown.json())
    assert as_alice.call("POST", SIMULATE, {"kind": "table", "name": "x"}).status_code == 400


def test_a_policy_leaving_no_member_a_tool_is_a_400_until_confirmed(as_alice, tools) -> None:
    body = {"name": "members-out", "applies_to": "tools", "condition": "caller.auth in ['oauth', 'api_key']"}
    refused = as_alice.call("POST", POLICIES, body)
    assert refused.status_code == 400, refused.json()
    [why] = refused.json()["error"]["fields"]["condition"]
    assert "no member of the tenant would have a single tool" in why and "confirm_no_tools: true" in why
    assert not Policy.objects.filter(name="members-out").exists()
    made = as_alice.call("POST", POLICIES, {**body, "confirm_no_tools": True})
    assert made.status_code == 201, made.json()
    assert "confirm_no_tools" not in made.json()  # asked each time, never stored
    edited = as_alice.call("PATCH", f"{POLICIES}{made.json()['id']}/", {"description": "on purpose"})
    assert edited.status_code == 400 and "single tool" in str(edited.json())


def test_the_simulator_takes_an_identity_providers_claims(as_alice, tools) -> None:
    made = as_alice.call(
        "POST", POLICIES,
        {"name": "dba-drops", "condition": "target.name == 'drop_table' && !(has(caller.claims.team) && caller.claims.team == 'dba')"},
    )  # fmt: skip
    assert made.status_code == 201, made.json()
    for team, tools_listed in (("dba", ["drop_table", "read_rows"]), ("web", ["read_rows"])):
        caller = {"auth": "identity_provider", "subject": "sam", "claims": {"team": team, "exp": 1}}
        got = as_alice.call("POST", SIMULATE, {"caller": caller, "kind": "tool", "name": "read_rows"}).json()
        assert got["allowed"] is True and got["lists"]["tools"] == tools_listed, (team, got)
    # A claims object that is not one is a 400 saying so.
    bad = {"auth": "identity_provider", "claims": ["team"]}
    refused = as_alice.call("POST", SIMULATE, {"caller": bad, "kind": "tool", "name": "read_rows"})
    assert refused.status_code == 400 and "claims" in str(refused.json())
