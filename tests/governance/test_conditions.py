"""A policy's condition is checked and compiled once; what it may contain bounds what it costs (AMB-348)."""

from __future__ import annotations

import pytest

from mcp_app.governance.conditions import MAX_CONDITION_CHARS, ConditionError, Prepared, compile_condition


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
