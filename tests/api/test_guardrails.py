"""A tenant's guardrails through the API (AMB-354): owners write, a pattern RE2 cannot run or a tool
the tenant lacks is a 400 naming why, viewers read, another tenant's guardrail is a 404 like a missing one."""

from __future__ import annotations

import pytest

from mcp_app.models import Guardrail, Tool
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
GUARDRAILS = f"{API}/tenant-a/guardrails/"


@pytest.fixture
def tool(tenant_a) -> None:
    Tool.objects.create(tenant=tenant_a, name="search", handler="template", handler_config={"text": "x"})


def test_an_owner_writes_a_guardrail_and_one_that_could_not_run_is_a_400_naming_why(as_alice, tool) -> None:
    made = as_alice.call(
        "POST",
        GUARDRAILS,
        {"name": "ids", "detector": "pattern", "pattern": "INT-[0-9]{6}", "tool": "search"},
    )
    assert made.status_code == 201, made.json()
    assert (made.json()["where"], made.json()["action"], made.json()["enabled"]) == ("both", "redact", True)
    backtracking = as_alice.call(
        "POST", GUARDRAILS, {"name": "bad", "detector": "pattern", "pattern": r"(a)\1"}
    )
    assert backtracking.status_code == 400 and "back-references" in str(
        backtracking.json()["error"]["fields"]
    )
    typo = as_alice.call("POST", GUARDRAILS, {"name": "typo", "detector": "secrets", "tool": "serach"})
    assert typo.status_code == 400 and "no tool named 'serach'" in str(typo.json())
    unknown = as_alice.call("POST", GUARDRAILS, {"name": "x", "detector": "dna"})
    assert unknown.status_code == 400 and "detector" in unknown.json()["error"]["fields"]
    every = as_alice.call("POST", GUARDRAILS, {"name": "keys", "detector": "secrets", "action": "block"})
    assert every.status_code == 201 and every.json()["tool"] == ""
    assert sorted(Guardrail.objects.values_list("name", "action")) == [("ids", "redact"), ("keys", "block")]


def test_viewers_read_and_other_tenants_see_nothing(as_alice, as_bob, as_charlie) -> None:
    made = as_alice.call("POST", GUARDRAILS, {"name": "g", "detector": "email"}).json()
    assert [g["name"] for g in as_bob.call("GET", GUARDRAILS).json()["results"]] == ["g"]
    assert as_bob.call("PATCH", f"{GUARDRAILS}{made['id']}/", {"action": "audit"}).status_code == 403
    theirs, missing = f"{API}/tenant-b/guardrails/{made['id']}/", f"{API}/tenant-b/guardrails/999999/"
    for method in ("GET", "DELETE"):
        assert as_charlie.call(method, theirs).json() == as_charlie.call(method, missing).json()
        assert as_charlie.call(method, theirs).status_code == 404
    assert Guardrail.objects.get(pk=made["id"]).action == "redact"


def test_the_simulator_shows_what_the_guardrails_do_to_arguments_and_a_sample_result(as_alice, tool) -> None:
    for body in (
        {"name": "keys", "detector": "secrets", "where": "arguments", "action": "block"},
        {"name": "mail", "detector": "email", "where": "results"},
    ):
        assert as_alice.call("POST", GUARDRAILS, body).status_code == 201
    key = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"
    simulate = f"{API}/tenant-a/policy/simulate/"
    answer = as_alice.call(
        "POST", simulate,
        {"kind": "tool", "name": "search", "arguments": {"q": key}, "sample_result": "write to bob@example.com"},
    ).json()  # fmt: skip
    assert answer["guardrails"]["arguments"] == {
        "blocked": "Blocked by guardrail 'keys': the arguments held a GitHub Token.",
        "guardrail": "keys", "value": None,
        "found": [{"guardrail": "keys", "action": "block", "kind": "GitHub Token", "count": 1}],
    }  # fmt: skip
    result = answer["guardrails"]["result"]
    assert result["blocked"] is None
    assert result["value"] == {"content": [{"type": "text", "text": "write to [redacted e-mail address]"}]}
    assert key not in str(answer) and "bob@" not in str(answer)
    plain = as_alice.call("POST", simulate, {"kind": "tool", "name": "search", "arguments": {"q": "x"}}).json()
    assert plain["guardrails"] == {"arguments": {"blocked": None, "guardrail": None, "value": {"q": "x"}, "found": []}}
