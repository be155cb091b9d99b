"""The template sandbox: a Django engine that cannot read files, and a budget no render can outrun.

Templates run in a dedicated engine: no loaders (nothing reads files), only the default tags and
filters minus those that reach outside the template (``include``, ``extends``, ``load``, ``ssi``,
``debug``, ...); autoescape is off because the output is not HTML. Arguments are only ever context
data, so template syntax inside an argument value stays literal text.

Every render runs under a ``Budget`` (AMB-97): each node of a compiled template and each filter is
wrapped, so time, the characters produced and the size of any one value are checked while the
template runs, not after. Where the render runs (inline, or in a render process) is
``content/rendering.py``'s choice; this module only renders, synchronously.
"""

from __future__ import annotations

import contextvars
import functools
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.template import Context, Engine, Library, TemplateSyntaxError, Variable, VariableDoesNotExist
from django.template.base import FilterExpression, Lexer, Node, TokenType
from django.template.defaulttags import ForNode, RegroupNode

from mcp_app.core.errors import ContentError

# Largest text one template may render; more is an error, not a truncation.
MAX_RENDERED_CHARS = 1024 * 1024
# Widest padding, format width or precision a filter may produce (ljust:10**9 would exhaust memory).
MAX_FILTER_WIDTH = 10_000
MAX_TEMPLATE_CHARS = 100_000

FORBIDDEN_TAGS = frozenset(
    {
        "include",
        "extends",
        "block",
        "load",
        "ssi",
        "debug",
        "csrf_token",
        "url",
        "lorem",
        "static",
        "get_static_prefix",
        "get_media_prefix",
    }
)
# Filters whose cost grows fast with their input: never run inline (AMB-98; urlize took 210 ms on 16 kB).
SLOW_FILTERS = frozenset(
    {
        "urlize",
        "urlizetrunc",
        "striptags",
        "truncatewords_html",
        "truncatechars_html",
        "wordwrap",
        "slugify",
        "dictsort",
        "dictsortreversed",
        "unordered_list",
        "pprint",
    }
)
_SIZED = (str, list, tuple, dict)


class Exceeded(Exception):
    """An inline budget ran out: the render must be done again where it may take longer (AMB-98)."""


@dataclass(slots=True)
class Budget:
    """What one render may spend; ``final`` budgets end it with a ContentError, inline ones with Exceeded."""

    deadline: float  # on ``clock``
    max_chars: int
    max_value: int
    final: bool
    seconds: float = 0.0  # what the deadline allowed, for the message
    allow_slow: bool = True
    chars: int = 0
    source: str = ""  # the template being rendered, so an inline miss can be remembered by it
    # Wall time where a process is killed at the deadline anyway; the thread's CPU time inline, so a
    # render the machine merely descheduled is not sent elsewhere.
    clock: Callable[[], float] = time.monotonic

    def stop(self, message: str) -> None:
        if self.final:
            raise ContentError(message)
        raise Exceeded(message)

    def tick(self) -> None:
        if self.clock() > self.deadline:
            self.stop(f"The template did not finish rendering within {self.seconds:g} seconds.")

    def grow(self, n: int) -> None:
        self.chars += n
        if self.chars > self.max_chars:
            self.stop(f"The rendered text is longer than {self.max_chars} characters; rendering was stopped.")

    def check_value(self, value: Any) -> None:
        if isinstance(value, _SIZED) and len(value) > self.max_value:
            self.stop(f"A template value is longer than {self.max_value} characters or items.")


def template_seconds() -> float:
    """How long one render may take (prompts and resources have no timeout of their own)."""
    return float(settings.MCP_TEMPLATE_SECONDS)


def full_budget(seconds: float | None = None) -> Budget:
    """The budget of a render that may use everything a template is allowed."""
    seconds = template_seconds() if seconds is None else seconds
    return Budget(
        deadline=time.monotonic() + seconds,
        seconds=seconds,
        max_chars=MAX_RENDERED_CHARS,
        max_value=MAX_RENDERED_CHARS,
        final=True,
    )


_BUDGET: contextvars.ContextVar[Budget | None] = contextvars.ContextVar("mcp_template_budget", default=None)


def _bounded(name: str, func: Callable[..., Any], precheck: Callable[..., None] | None) -> Callable[..., Any]:
    @functools.wraps(func)  # keeps is_safe, needs_autoescape, expects_localtime and the signature check
    def bounded(value: Any, *args: Any, **kwargs: Any) -> Any:
        budget = _BUDGET.get()
        if budget is None:
            return func(value, *args, **kwargs)
        if not budget.allow_slow and name in SLOW_FILTERS:
            raise Exceeded(f"the {name} filter does not run inline")
        budget.check_value(value)
        for arg in args:
            budget.check_value(arg)
        if precheck is not None:
            precheck(budget, value, *args)
        result = func(value, *args, **kwargs)
        budget.check_value(result)
        return result

    return bounded


def _int_arg(name: str, arg: Any) -> None:
    widths = [int(n) for n in re.findall(r"\d+", str(arg))]
    if any(n > MAX_FILTER_WIDTH for n in widths):
        raise ContentError(f"The {name} width may be at most {MAX_FILTER_WIDTH}.")


def _width_check(name: str) -> Callable[..., None]:
    def check(budget: Budget, value: Any, arg: Any = None) -> None:
        _int_arg(f"{name} filter", arg)

    return check


def _join_check(budget: Budget, value: Any, sep: Any = "") -> None:
    # The one filter whose output is quadratic in its inputs (items × separator): estimate first.
    if isinstance(value, (list, tuple)):
        estimate = len(str(sep)) * max(len(value) - 1, 0)
        for item in value:
            estimate += len(str(item))
            if estimate > budget.max_value:
                budget.stop(f"The joined text would be longer than {budget.max_value} characters.")


def _list_size(value: Any, depth: int) -> int:
    # unordered_list indents each item by its depth: the output is about items × depth.
    if not isinstance(value, (list, tuple)):
        return len(str(value)) + depth
    return sum(_list_size(item, depth + 1) for item in value) + depth


def _unordered_list_check(budget: Budget, value: Any, *args: Any) -> None:
    if _list_size(value, 1) > budget.max_value:
        budget.stop(f"The list would render longer than {budget.max_value} characters.")


_PRECHECKS: dict[str, Callable[..., None]] = {
    "center": _width_check("center"),
    "ljust": _width_check("ljust"),
    "rjust": _width_check("rjust"),
    "stringformat": _width_check("stringformat"),
    "floatformat": _width_check("floatformat precision"),
    "join": _join_check,
    "unordered_list": _unordered_list_check,
}


def _json_filter(value: Any) -> str:
    """Serialise a value as JSON (handy in JSON-producing templates)."""
    return json.dumps(value, ensure_ascii=False, default=str)


class SandboxEngine(Engine):
    """A template engine that cannot read files, load libraries or dump its context."""

    # loader_tags (include/extends/block) is left out entirely.
    default_builtins = ["django.template.defaulttags", "django.template.defaultfilters"]

    def __init__(self) -> None:
        super().__init__(dirs=[], app_dirs=False, loaders=[], libraries={}, autoescape=False, debug=False)
        library = Library()
        for builtin in self.template_builtins:
            for name, tag in builtin.tags.items():
                if name not in FORBIDDEN_TAGS:
                    library.tags[name] = tag
            for name, filt in builtin.filters.items():
                library.filters[name] = _bounded(name, filt, _PRECHECKS.get(name))
        library.filters["json"] = _bounded("json", _json_filter, None)
        self.template_builtins = [library]


_engine: SandboxEngine | None = None


def engine() -> SandboxEngine:
    """Return the shared sandboxed engine."""
    global _engine
    if _engine is None:
        _engine = SandboxEngine()
    return _engine


class _CheckedSequence:
    """A ``{% for %}``/``{% regroup %}`` sequence whose length the budget sees before the loop runs."""

    def __init__(self, inner: FilterExpression) -> None:
        self.inner = inner

    def resolve(self, context: Context, ignore_failures: bool = False) -> Any:
        value = self.inner.resolve(context, ignore_failures=ignore_failures)
        budget = _BUDGET.get()
        if budget is not None:
            budget.check_value(value)
        return value

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def _instrument(node: Node) -> None:
    inner = node.render_annotated

    def render_annotated(context: Context) -> int | str:
        budget = _BUDGET.get()
        if budget is None:
            return inner(context)
        budget.tick()
        before = budget.chars
        out = inner(context)
        # Count only what this node made beyond its children (they counted theirs), so a loop's
        # output is counted once, as it grows.
        grown = (len(out) if isinstance(out, str) else 0) - (budget.chars - before)
        if grown > 0:
            budget.grow(grown)
        return out

    # This node's own render counts against the budget: a deliberate patch of one instance's method.
    node.render_annotated = render_annotated  # type: ignore[method-assign]
    # The proxy stands in for the node's FilterExpression (it forwards every other attribute to it).
    if isinstance(node, ForNode) and isinstance(node.sequence, FilterExpression):
        vars(node)["sequence"] = _CheckedSequence(node.sequence)
    elif isinstance(node, RegroupNode):
        vars(node)["target"] = _CheckedSequence(node.target)


def _check_tags(source: str) -> int:
    """Refuse forbidden tags; return how many tags and variables the template has."""
    count = 0
    for token in Lexer(source).tokenize():
        if token.token_type is TokenType.BLOCK:
            count += 1
            parts = token.split_contents()
            if parts and parts[0] in FORBIDDEN_TAGS:
                raise ContentError(
                    f"The template tag {{% {parts[0]} %}} is not allowed (line {token.lineno})."
                )
        elif token.token_type is TokenType.VAR:
            count += 1
    return count


def count_tokens(source: str) -> int:
    """A cheap upper bound of a template's tags and variables, without compiling it."""
    return source.count("{{") + source.count("{%")


@functools.lru_cache(maxsize=1024)
def compile_template(source: str) -> Any:
    """Compile ``source`` in the sandbox; ContentError on forbidden tags, syntax errors or deep nesting."""
    if len(source) > MAX_TEMPLATE_CHARS:
        raise ContentError(f"The template is longer than {MAX_TEMPLATE_CHARS} characters.")
    _check_tags(source)
    try:
        template = engine().from_string(source)
    except TemplateSyntaxError as exc:
        raise ContentError(f"Template syntax error: {exc}") from None
    except RecursionError:
        raise ContentError("The template nests its tags too deeply.") from None
    for node in template.nodelist.get_nodes_by_type(Node):
        _instrument(node)
    return template


def validate_template(source: Any, where: str = "template") -> None:
    """Raise ContentError when ``source`` is not a usable template, compiling it here."""
    if not isinstance(source, str):
        raise ContentError(f"The {where} must be a string.")
    compile_template(source)


def render_text(source: str, variables: dict[str, Any], budget: Budget | None = None) -> str:
    """Render a template string with ``variables`` as plain data under ``budget`` (default: the full one)."""
    if "{" not in source:
        return source  # nothing to render; skip the engine for literal text
    if budget is None:
        budget = full_budget()
    template = compile_template(source)
    budget.source = source
    token = _BUDGET.set(budget)
    try:
        text = template.render(Context(dict(variables), autoescape=False))
    except (ContentError, Exceeded):
        raise
    except (TemplateSyntaxError, VariableDoesNotExist, ValueError, TypeError, ArithmeticError) as exc:
        raise ContentError(f"Template error: {exc}") from None
    except RecursionError:
        raise ContentError("The template's values nest too deeply to render.") from None
    except MemoryError:
        raise ContentError("The template needed more memory than a render may use.") from None
    finally:
        _BUDGET.reset(token)
    if len(text) > MAX_RENDERED_CHARS:
        raise ContentError(f"The rendered text is longer than {MAX_RENDERED_CHARS} characters.")
    return text


_BARE_VARIABLE = re.compile(r"^\{\{\s*([A-Za-z0-9_][A-Za-z0-9_.]*)\s*\}\}$")


def render_value(value: Any, variables: dict[str, Any], budget: Budget | None = None) -> Any:
    """Render string templates inside a JSON value; ``"{{ name }}"`` alone keeps the variable's JSON type."""
    if budget is None:
        budget = full_budget()
    if isinstance(value, str):
        match = _BARE_VARIABLE.match(value.strip())
        if match:
            try:
                resolved = Variable(match.group(1)).resolve(variables)
            except VariableDoesNotExist:
                return None
            except TemplateSyntaxError:
                resolved = ...  # e.g. a leading underscore: let render_text report it
            if resolved is None or isinstance(resolved, (str, int, float, bool, list, dict)):
                return resolved
        return render_text(value, variables, budget)
    if isinstance(value, dict):
        return {k: render_value(v, variables, budget) for k, v in value.items()}
    if isinstance(value, list):
        return [render_value(v, variables, budget) for v in value]
    return value


def sources_in(value: Any) -> list[str]:
    """Every template string inside a JSON value (what ``render_value`` would render)."""
    if isinstance(value, str):
        return [value] if "{" in value else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in sources_in(v)]
    if isinstance(value, list):
        return [s for v in value for s in sources_in(v)]
    return []
