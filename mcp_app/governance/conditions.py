"""A policy's condition: a CEL expression (common-expression-language, the Rust cel-interpreter), checked
and compiled once. What an owner may write is bounded so that evaluating it is too (AMB-348): at most
MAX_CONDITION_CHARS characters, only the variables `caller`, `target` and `arguments`, no
comprehension (`all`, `exists`, `exists_one`, `map`, `filter`: the one construct of CEL whose cost grows
with the product of its inputs) and no `matches` (its pattern is compiled at every evaluation). What is
left costs at most its length times the size of its input."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import cel

MAX_CONDITION_CHARS = 2_000
VARIABLES = frozenset({"caller", "target", "arguments"})
COMPREHENSION = re.compile(r"\.\s*(all|exists|exists_one|map|filter)\s*\(")
# A use hands the interpreter at most this many values of its arguments (each item of a list, each key and
# value of a map, at any depth): the binding converts every one, holding the GIL, ~3 µs apiece in a tight
# loop, so a megabyte of short strings cost the serving loop 0.75 s a call under `size(arguments) > 1`.
# Past it the policies that would read them fail closed, as a condition that cannot be evaluated.
MAX_ARGUMENT_VALUES = 1_000
UNREAD = (
    f"Its arguments hold more than {MAX_ARGUMENT_VALUES:,} values (list items, keys and values), more than "
    "a policy reads; send fewer."
)
# Every occurrence of the word `arguments`, in code, strings and comments alike, and the key it selects
# when it is a field selection `arguments.key` that is not a method call (`arguments.size()`).
ARGUMENTS_WORD = re.compile(r"\barguments\b")
SELECTED_KEY = re.compile(r"\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)(?!\w)(?!\s*\()")


class ConditionError(ValueError):
    """A condition that cannot be used, and why (shown to the owner who wrote it)."""


class Activation:
    """The variables of one decision (`caller`, `target`, maybe `arguments`), converted to CEL once and
    shared by every condition evaluated on them: the binding's conversion from Python is most of an
    evaluation's cost (79 µs of 80 with a tool's annotations; 1.3 µs each on a shared context), so a
    list of 2,000 tools under 200 policies costs 0.5 s, not 33 (AMB-353). Used by one thread at a time,
    as `cel.Context` requires."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self._context: Any = None  # cel.Context, made on first use
        self._repaired = False
        self.borrowed: Prepared | None = None  # whose converted context this is, until given back

    def context(self) -> Any:
        if self._context is None:
            self._context = _context_of(self.values)
        return self._context

    def repaired(self) -> Any:
        """The context with every string made valid UTF-8, once: a string the interpreter cannot take
        (a lone surrogate, which JSON allows and UTF-8 does not) is read with U+FFFD in its place, as any
        UTF-8 reader of it would."""
        if not self._repaired:
            self._context, self._repaired = _context_of(_utf8(self.values)), True
        return self._context


class Prepared:
    """Variables many evaluations share (a caller and a target), converted to CEL once, and one more (a
    use's `arguments`) handed to the interpreter at each use by a variable resolver: the context is never
    modified after it is made, so the binding keeps the environment it built from it (an `add_variable`
    discards it, and the next evaluation converted `target` again). Through Daphne each call into the
    binding costs tens of microseconds (AMB-351, AMB-375): a use is one call, `execute`, not two. One use
    at a time borrows the context (`cel.Context` is not for two threads at once); a use that finds it
    borrowed, by another thread, converts its own."""

    def __init__(self, values: dict[str, Any]) -> None:
        self.values = values
        self._context: Any = None  # cel.Context, made at the first use
        self._lock = threading.Lock()
        self._lent: tuple[str, Any] | None = None  # the variable of the use that borrowed the context

    def _resolve(self, name: str) -> Any:
        # Called by the interpreter (holding the GIL) for each variable an evaluation reads; None falls
        # through to the variables the context holds. Nothing lent (no use borrows it): undefined.
        lent = self._lent
        return lent[1] if lent is not None and lent[0] == name else None

    def borrow(self, name: str, value: Any) -> Activation:
        """An activation of the shared variables and `name` = `value`; hand it back with `give_back`."""
        activation = Activation({**self.values, name: value})
        if value is None or not _valid_utf8(value) or not self._lock.acquire(blocking=False):
            # None through the resolver would read as undefined; a string UTF-8 cannot hold would fail
            # there (and be logged): the activation converts its own, and repairs it (`repaired`).
            return activation
        try:
            if self._context is None:
                context = _context_of(self.values)
                context.set_variable_resolver(self._resolve)
                self._context = context
        except ValueError:  # a string UTF-8 cannot hold in the shared ones: each activation converts its own
            self._lock.release()
            return activation
        self._lent = (name, value)
        activation._context, activation.borrowed = self._context, self
        return activation

    def give_back(self, activation: Activation, name: str) -> None:
        if activation.borrowed is self:
            activation._context = activation.borrowed = None
            self._lent = None  # the context keeps no use's value (it may be megabytes) while cached
            self._lock.release()


def _valid_utf8(value: Any) -> bool:
    """Whether every string (and key) in `value` is valid UTF-8: no lone surrogate, which JSON allows."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True


def _context_of(values: dict[str, Any]) -> Any:
    context = cel.Context()
    for name, value in values.items():
        context.add_variable(name, value)
    return context


@dataclass(frozen=True)
class Condition:
    source: str
    program: Any  # cel.Program
    uses_arguments: bool
    reads: frozenset[str] = frozenset(VARIABLES)  # the variables it reads
    # The keys of `arguments` it reads (`argument_keys`); None: the map as a whole.
    argument_keys: frozenset[str] | None = None

    def holds(self, activation: Activation | dict[str, Any]) -> bool:
        """Whether the condition is true; ConditionError when it cannot be evaluated (a missing key,
        a type mismatch) or is not a boolean."""
        if not isinstance(activation, Activation):
            activation = Activation(activation)
        if not self.reads <= activation.values.keys():
            missing = sorted(self.reads - activation.values.keys())
            raise ConditionError(f"Undefined variable: {', '.join(missing)}")
        return self.holds_in(activation)

    def holds_in(self, activation: Activation) -> bool:
        """`holds` on an activation that has every variable this condition reads (the decision's hot
        path: 380,000 of them for a list of 2,000 tools under 200 policies)."""
        try:
            value = self.program.execute(activation.context())
        except ValueError as exc:
            if "Conversion Error" not in str(exc):
                raise ConditionError(str(exc)[:300]) from None
            try:
                value = self.program.execute(activation.repaired())
            except Exception as again:
                raise ConditionError(str(again).split(". Check that")[0][:300]) from None
        except KeyError as exc:  # a map without the key read
            raise ConditionError(f"no such key: {str(exc.args[0])[:200]}") from None
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
        source=text,
        program=program,
        uses_arguments="arguments" in names,
        reads=frozenset(names),
        argument_keys=argument_keys(text) if "arguments" in names else frozenset(),
    )


def argument_keys(source: str) -> frozenset[str] | None:
    """The keys of `arguments` a condition reads, when every occurrence of the word in its text is a
    field selection `arguments.key` (a key read alone: a missing one fails the condition as before);
    None when any is not (`arguments['k']`, `'k' in arguments`, `arguments.size()`, `.?key`): the map
    as a whole. Each use then hands the interpreter only those keys, because the binding converts every
    key and string of what it is given through a cascade of failed conversions, each raising a Python
    exception: 1.3 µs a string and 1 a key in a tight loop, three to five times that in a serving
    process, where one call's CEL evaluation of a one-key map cost 6 % of a governed echo's throughput
    (AMB-377). The text is not parsed: an occurrence inside a string or a comment counts as code does,
    so a key can only be kept that is not read, never left out when it is."""
    keys: set[str] = set()
    for found in ARGUMENTS_WORD.finditer(source):
        selected = SELECTED_KEY.match(source, found.end())
        if selected is None:
            return None
        keys.add(selected.group(1))
    return frozenset(keys)


def within_values(value: Any, limit: int = MAX_ARGUMENT_VALUES) -> bool:
    """Whether `value` holds at most `limit` values (MAX_ARGUMENT_VALUES): counted a container at a
    time, so a list of a million items is refused before it is walked."""
    count = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            count += 2 * len(item)
            if count > limit:
                return False
            stack.extend(item.values())
        elif isinstance(item, list):
            count += len(item)
            if count > limit:
                return False
            stack.extend(item)
    return True


def keys_read(conditions: Iterable[Condition]) -> frozenset[str] | None:
    """The keys of `arguments` these conditions read together; None: every key."""
    keys: set[str] = set()
    for condition in conditions:
        if condition.argument_keys is None:
            return None
        keys |= condition.argument_keys
    return frozenset(keys)


def only_keys(arguments: Any, keys: frozenset[str] | None) -> Any:
    """`arguments` with only the keys a use's conditions read (`argument_keys`), or whole."""
    if keys is None or not isinstance(arguments, dict):
        return arguments
    return {key: arguments[key] for key in keys if key in arguments}
