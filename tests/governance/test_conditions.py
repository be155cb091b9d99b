"""A policy's condition is checked and compiled once; what it may contain bounds what it costs (AMB-348)."""

from __future__ import annotations

from typing import Any

import pytest

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, PolicyDef, TenantInfo, ToolDef
from mcp_app.governance import decision
from mcp_app.governance.conditions import (
    MAX_ARGUMENT_VALUES,
    MAX_CONDITION_CHARS,
    ConditionError,
    Prepared,
    argument_keys,
    compile_condition,
    only_keys,
    within_values,
)

ECHO = ToolDef(
    id=1, name="echo", title="", description="", input_schema={}, output_schema=None, annotations={},
    icons=[], meta={}, handler="template", handler_config={},
)  # fmt: skip


def test_a_condition_compiles_once_and_says_whether_it_reads_the_arguments() -> None:
    condition = compile_condition(' caller.auth == "api_key" && arguments.table.startsWith("sys_") ')
    assert condition.source == 'caller.auth == "api_key" && arguments.table.startsWith("sys_")'
    assert condition.uses_arguments
    assert condition.holds({"caller": {"auth": "api_key"}, "target": {}, "arguments": {"table": "sys_users"}})
    assert not condition.holds(
        {"caller": {"auth": "oauth"}, "target": {}, "arguments": {"table": "sys_users"}}
    )
    assert not compile_condition("target.name == 'x'").uses_arguments


@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ("", "empty"),
        ("target.name ==", "does not compile"),
        ("request.name == 'x'", "unknown name request"),
        ("arguments.items.exists(i, i == 'x')", "comprehensions"),
        ("[1, 2].all(x, x > 0)", "comprehensions"),
        ("arguments.rows.map(r, arguments.rows.map(s, 1)).size() > 0", "comprehensions"),
        ("arguments.rows.filter(r, true).size() > 0", "comprehensions"),
        ("arguments.path.matches('^/etc')", "matches"),
        ("target.name == '" + "x" * MAX_CONDITION_CHARS + "'", "longer than"),
    ],
)
def test_a_condition_that_cannot_be_used_is_refused_with_its_reason(source: str, reason: str) -> None:
    with pytest.raises(ConditionError, match=reason):
        compile_condition(source)


def test_a_condition_that_cannot_be_evaluated_or_is_not_a_boolean_says_so() -> None:
    with pytest.raises(ConditionError, match="arguments"):
        compile_condition("arguments.path == '/'").holds({"caller": {}, "target": {}})
    with pytest.raises(ConditionError, match="not true or false"):
        compile_condition("target.name").holds({"caller": {}, "target": {"name": "x"}})


def test_a_string_utf_8_cannot_hold_is_read_with_the_replacement_character() -> None:
    # JSON allows a lone surrogate; the interpreter takes UTF-8 only. Read as any UTF-8 reader would.
    condition = compile_condition(
        "arguments.message.contains('pass') && arguments.message.endsWith('\\ufffd')"
    )
    assert condition.holds({"arguments": {"message": "pass\ud800"}})


def test_a_prepared_caller_and_target_are_converted_once_and_each_use_adds_its_arguments() -> None:
    condition = compile_condition("target.name == 'echo' && arguments.message.contains('password')")
    prepared = Prepared({"target": {"name": "echo", "annotations": {"readOnlyHint": True}}})
    first = prepared.borrow("arguments", {"message": "my password"})
    assert condition.holds_in(first) and first.borrowed is prepared
    # Borrowed meanwhile (another thread): the second use converts its own, and decides the same.
    second = prepared.borrow("arguments", {"message": "hello"})
    assert second.borrowed is None and not condition.holds_in(second)
    prepared.give_back(second, "arguments")
    prepared.give_back(first, "arguments")
    shared = prepared._context
    again = prepared.borrow("arguments", {"message": "hello"})
    assert again._context is shared and not condition.holds_in(again)
    prepared.give_back(again, "arguments")
    # A string UTF-8 cannot hold: read with U+FFFD on a context of its own; the shared one stays usable.
    odd = prepared.borrow("arguments", {"message": "password \ud800"})
    assert condition.holds_in(odd)
    prepared.give_back(odd, "arguments")
    assert condition.holds_in(prepared.borrow("arguments", {"message": "password"}))


def test_a_prepared_context_keeps_no_use_s_arguments_once_given_back() -> None:
    prepared = Prepared({})
    used = prepared.borrow("arguments", {"message": "x" * 1_000_000})
    assert compile_condition("size(arguments.message) == 1000000").holds_in(used)
    prepared.give_back(used, "arguments")
    assert prepared._lent is None
    with pytest.raises(RuntimeError, match="Undefined variable"):
        compile_condition("arguments == null").program.execute(prepared._context)


def test_a_prepared_context_is_not_modified_by_a_use() -> None:
    # Each use hands its arguments through the resolver: an add_variable would make the binding
    # convert the caller and target again at the next evaluation (AMB-375). And each use reads its own.
    condition = compile_condition("target.name == 'echo' && arguments.message.contains('password')")
    prepared = Prepared({"target": {"name": "echo"}})
    seen = []
    for message in ("hello", "my password", "hello again", "password"):
        used = prepared.borrow("arguments", {"message": message})
        seen.append(condition.holds_in(used))
        prepared.give_back(used, "arguments")
    assert seen == [False, True, False, True]
    assert prepared._context.variables.keys() == {"target"}


@pytest.mark.parametrize(
    ("source", "keys"),
    [
        ("arguments.message.contains('password')", {"message"}),
        ("arguments . table == 'x' && has(arguments.limit)", {"table", "limit"}),
        ("arguments.filter_1.kind == 'x'", {"filter_1"}),
        (".arguments.secret == 'x'", {"secret"}),  # a root-scoped name (refused when saved, all the same)
        ("caller.role == 'viewer'", set()),
        # Anything but a plain field selection reads the map as a whole.
        ("arguments['table'] == 'x'", None),
        ("'table' in arguments", None),
        ("arguments.size() > 3", None),
        ("arguments.size () > 3", None),
        ("arguments.?table.orValue('') == 'x'", None),
        ("arguments == {}", None),
        ("arguments.table == 'x' || 'arguments' == caller.role", None),  # in a string: counted as code
        ("arguments.`table-name` == 'x'", None),
    ],
)
def test_a_condition_knows_which_keys_of_the_arguments_it_reads(source: str, keys: set[str] | None) -> None:
    expected = None if keys is None else frozenset(keys)
    assert argument_keys(source) == expected
    if not source.startswith(".") and "`" not in source and "?" not in source:
        assert compile_condition(source).argument_keys == expected


@pytest.mark.parametrize(
    "source",
    [
        "arguments.table == 'sys'",
        "has(arguments.limit) && arguments.limit > 10",
        "!has(arguments.approved)",
        "arguments.table.startsWith('sys') || arguments.rows.size() > 2",
        "size(arguments) == 3",
        "arguments.missing == 1",
    ],
)
def test_a_condition_decides_the_same_on_the_keys_it_reads_as_on_the_whole_arguments(source: str) -> None:
    # A use hands the interpreter only the keys its conditions read (AMB-377): each decision, and each
    # failure to decide (a missing key), is the one the whole arguments give.
    condition = compile_condition(source)
    for arguments in (
        {"table": "sys", "limit": 20, "rows": [1, 2, 3], "note": "x" * 1000},
        {"table": "users", "limit": 5, "approved": True},
        {"rows": []},
        {},
    ):
        outcomes = []
        for given in (arguments, only_keys(arguments, condition.argument_keys)):
            try:
                outcomes.append(condition.holds({"arguments": given}))
            except ConditionError as exc:
                outcomes.append(type(exc))
        assert outcomes[0] == outcomes[1], (source, arguments, outcomes)


def test_a_use_converts_only_the_keys_its_policies_read() -> None:
    catalog = Catalog(
        tenant_id=-7, version=1, tools=(ECHO,), tools_by_name={"echo": ECHO},
        policies=(PolicyDef(name="no-passwords", effect="deny", applies_to="tools",
                            condition="arguments.message.contains('password')"),),
    )  # fmt: skip
    ctx = RequestContext(tenant=TenantInfo(id=-7, slug="t", name="t"))
    listed = decision._listed(ctx, catalog, ECHO)
    assert listed.argument_keys == frozenset({"message"})
    lent = []
    resolve = listed.prepared._resolve if listed.prepared is not None else None
    assert resolve is not None

    def spy(name: str) -> Any:
        lent.append(listed.prepared._lent)
        return resolve(name)

    listed.prepared._resolve = spy  # type: ignore[method-assign]
    listed.prepared._context = None  # made again at the next use, with the spy as its resolver
    bulky = {"message": "my password", "attachment": ["x" * 100] * 1_000}
    denial = decision.check(ctx, catalog, ECHO, bulky)
    assert denial is not None and denial.policy == "no-passwords"
    assert decision.check(ctx, catalog, ECHO, {"message": "hello", "attachment": []}) is None
    assert [value for _, value in lent if value is not None] == [{"message": "my password"}, {"message": "hello"}]


def test_a_value_is_counted_a_container_at_a_time_up_to_its_limit() -> None:
    assert within_values({"rows": [{"a": 1, "b": "x"}] * 10}, limit=52)  # 2 + 10 + 10 x 4
    assert not within_values({"rows": [{"a": 1, "b": "x"}] * 10}, limit=51)
    assert within_values("x" * 1_000_000, limit=0) and within_values({}, limit=0)
    assert not within_values(["x"] * 1_000_001)


def governed(condition: str, effect: str = "deny", tenant_id: int = -8) -> Catalog:
    return Catalog(
        tenant_id=tenant_id, version=1, tools=(ECHO,), tools_by_name={"echo": ECHO},
        policies=(PolicyDef(name="reader", effect=effect, applies_to="tools", condition=condition),),
    )  # fmt: skip


def test_arguments_of_more_values_than_a_policy_reads_fail_it_closed_saying_why() -> None:
    # Converting a megabyte of short strings cost the loop 0.75 s a call (AMB-377): past
    # MAX_ARGUMENT_VALUES the policies that would read them fail closed, as an unreadable condition does.
    ctx = RequestContext(tenant=TenantInfo(id=-8, slug="t", name="t"))
    flood = {"message": "hello", "items": ["a"] * 250_000}
    fits = {"message": "hello", "items": ["a"] * (MAX_ARGUMENT_VALUES - 4)}
    deny = governed("size(arguments) > 3")
    denial = decision.check(ctx, deny, ECHO, flood)
    assert denial is not None and denial.policy == "reader" and not denial.hidden
    message = denial.message("tool", "echo")
    assert message.startswith("Denied by policy 'reader': this tool may not be used with these arguments.")
    assert f"more than {MAX_ARGUMENT_VALUES:,} values" in message
    assert decision.check(ctx, deny, ECHO, fits) is None  # two keys: size 2, read whole
    allow = governed("size(arguments) < 3", effect="allow", tenant_id=-9)
    ctx_allow = RequestContext(tenant=TenantInfo(id=-9, slug="u", name="u"))
    refused = decision.check(ctx_allow, allow, ECHO, flood)
    assert refused is not None and refused.policy == "" and "more than" in refused.message("tool", "echo")
    assert decision.check(ctx_allow, allow, ECHO, fits) is None
    # A policy that reads one key counts that key's values only: the flood beside it is never handed over.
    keyed = governed("arguments.message.contains('password')", tenant_id=-10)
    ctx_keyed = RequestContext(tenant=TenantInfo(id=-10, slug="v", name="v"))
    assert decision.check(ctx_keyed, keyed, ECHO, flood) is None
    assert decision.check(ctx_keyed, keyed, ECHO, {**flood, "message": "my password"}) is not None
