"""The one decision on every list and use (AMB-347), through the dispatcher: a hidden target is absent from
lists and answers exactly as a missing one; a denial that depends on the arguments names its policy."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async
from django.core.exceptions import ValidationError

from mcp_app.core.context import kept_claims
from mcp_app.models import Policy, ResourceTemplate
from tests.protocol.support import call, result_of
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)


def policy(tenant, name: str, condition: str, effect: str = "deny", applies_to: str = "all") -> Policy:
    row = Policy(tenant=tenant, name=name, condition=condition, effect=effect, applies_to=applies_to)
    row.full_clean()
    row.save()
    return row


async def tool_names(ctx) -> list[str]:
    return [t["name"] for t in (await result_of(ctx, "tools/list"))["tools"]]


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_a_tool_denied_whatever_its_arguments_is_absent_and_answers_as_a_missing_one(
    demo_a, version
) -> None:
    ctx = make_ctx(demo_a, version, session=version != "2026-07-28" or None)
    assert "greet" in await tool_names(ctx)
    await sync_to_async(policy)(demo_a, "no-greeting", "target.name == 'greet'")
    ctx = make_ctx(demo_a, version, session=version != "2026-07-28" or None)
    assert "greet" not in await tool_names(ctx) and "echo" in await tool_names(ctx)
    hidden = await call(ctx, "tools/call", {"name": "greet", "arguments": {"name": "Ada"}})
    missing = await call(ctx, "tools/call", {"name": "greeet", "arguments": {"name": "Ada"}})
    assert hidden["error"]["code"] == missing["error"]["code"]
    assert hidden["error"]["message"] == missing["error"]["message"].replace("greeet", "greet")


async def test_a_denial_that_depends_on_the_arguments_lists_the_tool_and_names_the_policy(demo_a) -> None:
    await sync_to_async(policy)(
        demo_a, "no-secrets", "target.name == 'echo' && arguments.message.contains('secret')"
    )
    ctx = make_ctx(demo_a)
    assert "echo" in await tool_names(ctx)
    allowed = await result_of(ctx, "tools/call", {"name": "echo", "arguments": {"message": "hi"}})
    assert allowed["content"][0]["text"] == "hi"
    denied = await result_of(ctx, "tools/call", {"name": "echo", "arguments": {"message": "my secret"}})
    assert denied["isError"] is True
    assert "no-secrets" in denied["content"][0]["text"] and "secret" not in denied["content"][0][
        "text"
    ].replace("no-secrets", "")


async def test_allow_policies_make_an_allow_list_and_a_deny_wins_over_them(demo_a) -> None:
    await sync_to_async(policy)(
        demo_a, "read-only", "target.annotations.readOnlyHint == true", "allow", "tools"
    )
    ctx = make_ctx(demo_a)
    assert await tool_names(ctx) == ["greet"]  # the demo's one read-only tool
    assert "prompts" in await result_of(ctx, "prompts/list")  # prompts are not in the allow-list's kind
    assert (await result_of(ctx, "prompts/list"))["prompts"]
    await sync_to_async(policy)(demo_a, "not-greet", "target.name == 'greet'", "deny", "tools")
    assert await tool_names(make_ctx(demo_a)) == []


async def test_a_condition_that_fails_to_evaluate_fails_closed(demo_a) -> None:
    # `arguments.limit` is missing from a call that leaves it out: the deny holds, the allow does not.
    await sync_to_async(policy)(demo_a, "limit-small", "target.name == 'add' && arguments.limit > 10")
    ctx = make_ctx(demo_a)
    denied = await result_of(ctx, "tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})
    assert denied["isError"] is True and "limit-small" in denied["content"][0]["text"]


async def test_prompts_resources_and_templates_are_decided_too(demo_a) -> None:
    await sync_to_async(ResourceTemplate.objects.create)(
        tenant=demo_a, name="file", uri_template="demo://files/{name}", handler="template",
        handler_config={"text": "File {{ name }}"}, version=1,
    )  # fmt: skip
    await sync_to_async(policy)(
        demo_a, "no-review", "target.kind == 'prompt' && target.name == 'code_review'"
    )
    await sync_to_async(policy)(
        demo_a, "no-readme", "target.kind == 'resource' && target.uri == 'demo://readme'"
    )
    await sync_to_async(policy)(demo_a, "no-etc", "target.kind == 'template' && arguments.name == 'passwd'")
    ctx = make_ctx(demo_a)
    prompts = [p["name"] for p in (await result_of(ctx, "prompts/list"))["prompts"]]
    assert "code_review" not in prompts and prompts
    hidden = await call(ctx, "prompts/get", {"name": "code_review", "arguments": {"code": "x"}})
    assert hidden["error"]["message"] == "Unknown prompt: code_review"
    completion = await call(
        ctx, "completion/complete",
        {"ref": {"type": "ref/prompt", "name": "code_review"}, "argument": {"name": "language", "value": ""}},
    )  # fmt: skip
    assert completion["error"]["message"] == "Unknown prompt: code_review"
    uris = [r["uri"] for r in (await result_of(ctx, "resources/list"))["resources"]]
    assert "demo://readme" not in uris
    read = await call(ctx, "resources/read", {"uri": "demo://readme"})
    missing = await call(ctx, "resources/read", {"uri": "demo://nothing"})
    assert read["error"]["code"] == missing["error"]["code"]
    templates = (await result_of(ctx, "resources/templates/list"))["resourceTemplates"]
    assert "demo://files/{name}" in [t["uriTemplate"] for t in templates]
    ok = await result_of(ctx, "resources/read", {"uri": "demo://files/notes"})
    assert ok["contents"][0]["text"] == "File notes"
    denied = await call(ctx, "resources/read", {"uri": "demo://files/passwd"})
    assert "no-etc" in denied["error"]["message"]


def test_a_policy_that_cannot_be_used_is_refused_when_saved(tenant_a) -> None:
    with pytest.raises(ValidationError) as caught:
        policy(tenant_a, "loops", "arguments.rows.exists(r, r == 1)")
    assert "comprehensions" in str(caught.value.message_dict["condition"])
    with pytest.raises(ValidationError) as caught:
        policy(tenant_a, "typo", "caler.auth == 'oauth'")
    assert "unknown name caler" in str(caught.value.message_dict["condition"])


async def test_a_hint_a_tool_leaves_out_reads_as_the_specs_default(demo_a) -> None:
    # echo has no annotations: destructiveHint reads true and readOnlyHint false, as ToolAnnotations says.
    await sync_to_async(policy)(
        demo_a, "look-only", "target.annotations.destructiveHint && !target.annotations.readOnlyHint"
    )
    listed = await tool_names(make_ctx(demo_a))
    assert "greet" in listed and "echo" not in listed


async def test_a_condition_reads_an_identity_providers_claims_and_each_set_of_claims_has_its_own_list(
    demo_a,
) -> None:
    """`caller.claims` (AMB-359): a token's claims decide, and two callers alike but for their claims
    are two callers to the cached list decision. A caller with no claims reads an empty map."""
    await sync_to_async(policy)(
        demo_a, "echo-for-finance",
        "target.name == 'echo' && !(has(caller.claims.groups) && 'finance' in caller.claims.groups)",
    )  # fmt: skip

    def as_member_of(*groups: str):
        claims = kept_claims({"sub": "sam", "groups": list(groups), "iat": 1, "exp": 2})
        return make_ctx(demo_a, subject="https://idp.example#sam", claims=claims, scopes=frozenset())

    assert "echo" in await tool_names(as_member_of("finance", "staff"))
    assert "echo" not in await tool_names(as_member_of("sales"))
    assert "echo" in await tool_names(as_member_of("finance"))
    assert "echo" not in await tool_names(make_ctx(demo_a))  # no claims: the deny holds
    hidden = await call(as_member_of("sales"), "tools/call", {"name": "echo", "arguments": {"message": "x"}})
    assert hidden["error"]["message"] == "Unknown tool: echo"
