"""A policy's condition: a CEL expression (common-expression-language, the Rust cel-interpreter), checked
and compiled once. What an owner may write is bounded so that evaluating it is too (AMB-348): at most
MAX_CONDITION_CHARS characters, only the variables `caller`, `target` and `arguments`, no
comprehension (`all`, `exists`, `exists_one`, `map`, `filter`: the one construct of CEL whose cost grows
with the product of its inputs) and no `matches` (its pattern is compiled at every evaluation). What is
left costs at most its length times the size of its input."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import cel

MAX_CONDITION_CHARS = 2_000
VARIABLES = frozenset({"caller", "target", "arguments"})
COMPREHENSION = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")


class ConditionError(ValueError):
    """A condition that cannot be used, and why (shown to the owner who wrote it)."""


@dataclass(frozen=True)
class Condition:
    source: str
    program: Any  # cel.Program
    uses_arguments: bool
    # The variables it reads: only those are handed to the interpreter, which converts each whole from
    # Python at every evaluation (a caller's dict it never reads cost 16 of 26 µs).
    reads: frozenset[str] = frozenset(VARIABLES)

    def holds(self, activation: dict[str, Any]) -> bool:
        """Whether the condition is true; ConditionError when it cannot be evaluated (a missing key,
        a type mismatch) or is not a boolean."""
        given = {k: v for k, v in activation.items() if k in self.reads}
        try:
            value = self.program.execute(given)
        except ValueError as exc:
            if "Conversion Error" not in str(exc):
                raise ConditionError(str(exc)[:300]) from None
            # A string the interpreter cannot take (a lone surrogate, which JSON allows and UTF-8 does
            # not) is read with U+FFFD in its place, as any UTF-8 reader of it would.
            try:
                value = self.program.execute(_utf8(given))
            except Exception as again:
                raise ConditionError(str(again).split(". Check that")[0][:300]) from None
        except Exception as exc:  # the binding raises RuntimeError, TypeError
            raise ConditionError(str(exc).split(". Check that")[0][:300]) from None
        if not isinstance(value, bool):
            raise ConditionError(f"the condition gave {type(value).__name__}, not true or false")
        return value


def _utf8(value: Any) -> Any:
    """`value` with every string made valid UTF-8 (a lone surrogate becomes U+FFFD)."""
    if isinstance(value, str):
        return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {_utf8(k): _utf8(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_utf8(v) for v in value]
    return value


def compile_condition(source: str) -> Condition:
    """The compiled condition, or ConditionError saying what is wrong with it."""
    text = source.strip()
    if not text:
        raise ConditionError("the condition is empty (write `true` for every request)")
    if len(text) > MAX_CONDITION_CHARS:
        raise ConditionError(f"the condition is longer than {MAX_CONDITION_CHARS} characters")
    try:
        program = cel.compile(text)
    except Exception as exc:
        raise ConditionError(f"it does not compile: {str(exc)[:500]}") from None
    names = set(program.variables())
    # A macro shows in neither list when its loop variable goes unused (`xs.map(x, 1)`): the text says it.
    if COMPREHENSION.search(text) or "@not_strictly_false" in program.functions():
        raise ConditionError(
            "comprehensions (all, exists, exists_one, map, filter) are not allowed: their cost grows "
            "with the product of their inputs"
        )
    if "matches" in program.functions():
        raise ConditionError(
            "matches() is not allowed: the interpreter compiles its pattern at every evaluation (0.1 ms "
            "for a short one, more for a long one, on the serving loop); use contains, startsWith or endsWith"
        )
    if unknown := sorted(names - VARIABLES):
        raise ConditionError(
            f"unknown name {', '.join(unknown)}: a condition reads only caller, target and arguments"
        )
    return Condition(
        source=text, program=program, uses_arguments="arguments" in names, reads=frozenset(names)
    )
