"""The one decision (AMB-347): may this caller use this target, with these arguments?

Every list and every call, get and read asks here, after its lookup and before anything runs, in both
eras and for every kind (protocol/tools.py, prompts.py, resources.py, completion.py). The rule:

- no policy applies to the target's kind: allowed (a tenant without policies is served as before);
- a deny policy whose condition holds: denied, by that policy;
- else, when allow policies apply to the kind, one of them must hold: denied, by none, if none does.

A condition that cannot be evaluated (a missing key, a wrong type) fails closed: a deny holds, an allow
does not. A list knows no arguments: a condition that reads them is undecided there, so a deny waits for
the call and an allow lists the target. A target denied without arguments is hidden: absent from lists
and answered exactly as a missing one; a denial that depends on the arguments names its policy.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from cachetools import LRUCache

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, PolicyDef, PromptDef, ResourceDef, TemplateDef, ToolDef
from mcp_app.governance.conditions import Condition, ConditionError, compile_condition

logger = logging.getLogger(__name__)

Target = ToolDef | PromptDef | ResourceDef | TemplateDef
KIND_OF_LIST = {ToolDef: "tools", PromptDef: "prompts", ResourceDef: "resources", TemplateDef: "resources"}
HINT_DEFAULTS = {
    "readOnlyHint": False,
    "destructiveHint": True,
    "idempotentHint": False,
    "openWorldHint": True,
}
KIND_NAME = {ToolDef: "tool", PromptDef: "prompt", ResourceDef: "resource", TemplateDef: "template"}


@dataclass(frozen=True)
class Compiled:
    name: str
    deny: bool
    applies_to: str
    condition: Condition | None  # None: it did not compile (saved before a check, or an old row): inert


@dataclass(frozen=True)
class Denial:
    policy: str  # the deny policy's name, or "" when no allow policy held
    hidden: bool  # decided without the arguments: the caller is never shown the target

    def message(self, kind: str, name: str) -> str:
        which = "whatever the arguments" if self.hidden else "with these arguments"
        if self.policy:
            return f"Denied by policy {self.policy!r}: this {kind} may not be used {which}."
        return f"No policy allows this {kind} ({name}) {which}."


# (tenant, definitions version) -> its compiled policies: compiled once a version, in each process.
_COMPILED: LRUCache[tuple[int, int], tuple[Compiled, ...]] = LRUCache(maxsize=512)
# (tenant, version, caller, target) -> its denial without arguments: the lists' hot path.
_HIDDEN: LRUCache[tuple[Any, ...], _Listed] = LRUCache(maxsize=65_536)
# (tenant, version, caller, kind, variant) -> a list without what the caller may never use.
_SHOWN: LRUCache[tuple[Any, ...], tuple[Any, ...]] = LRUCache(maxsize=4_096)
_LOCK = threading.Lock()
T = TypeVar("T")


def compiled(catalog: Catalog) -> tuple[Compiled, ...]:
    key = (catalog.tenant_id, catalog.version)
    with _LOCK:
        found = _COMPILED.get(key)
    if found is None:
        found = tuple(_compile(p) for p in catalog.policies)
        with _LOCK:
            _COMPILED[key] = found
    return found


def _compile(policy: PolicyDef) -> Compiled:
    try:
        condition: Condition | None = compile_condition(policy.condition)
    except ConditionError as exc:
        logger.warning("policy %r does not compile and decides nothing: %s", policy.name, exc)
        condition = None
    return Compiled(policy.name, policy.effect == "deny", policy.applies_to, condition)


def caller_of(ctx: RequestContext) -> dict[str, Any]:
    """`caller` in a condition: who sent the request, as the transport authenticated it."""
    if ctx.subject:
        auth = "identity_provider"
    elif ctx.client_id and ctx.client_id.startswith("api-key:"):
        auth = "api_key"
    elif ctx.scopes is not None:
        auth = "oauth"
    else:
        auth = "anonymous"
    return {
        "auth": auth,
        "user": ctx.user_id,
        "role": ctx.role,
        "subject": ctx.subject or "",
        "client_id": ctx.client_id or "",
        "scopes": sorted(ctx.scopes or ()),
        "address": ctx.client_address or "",
    }


def target_of(target: Target) -> dict[str, Any]:
    """`target` in a condition: what is asked for."""
    upstream = target.upstream.name if target.upstream is not None else ""
    found: dict[str, Any] = {"kind": KIND_NAME[type(target)], "name": target.name, "upstream": upstream}
    if isinstance(target, ToolDef):
        # Every hint present, as the spec's ToolAnnotations defaults read when a tool leaves it out: a
        # condition on one never fails on a missing key (which would deny, failing closed).
        found["annotations"] = {**HINT_DEFAULTS, **(target.annotations or {})}
    elif isinstance(target, ResourceDef):
        found["uri"] = target.uri
    elif isinstance(target, TemplateDef):
        found["uri"] = target.uri_template
    return found


def caller_key(ctx: RequestContext) -> tuple[Any, ...]:
    """What of a caller a condition may read: decisions are cached per this and the definitions version."""
    return (ctx.subject, ctx.user_id, ctx.role, ctx.client_id, ctx.scopes, ctx.client_address)


@dataclass(frozen=True)
class _Listed:
    """A target's decision without its arguments, cached: the lists' hot path, and the first half of a use."""

    denial: Denial | None  # hidden
    allowed: bool  # an allow policy that reads no arguments held (or none applies): no argument allow needed
    later: tuple[Compiled, ...]  # the policies that read the arguments: evaluated at each use
    about: dict[str, Any] | None = None  # `caller` and `target` as the conditions read them, built once


def _applying(policies: tuple[Compiled, ...], target: Target) -> list[Compiled]:
    kind = KIND_OF_LIST[type(target)]
    return [p for p in policies if p.applies_to in ("all", kind) and p.condition is not None]


def hidden(ctx: RequestContext, catalog: Catalog, target: Target) -> bool:
    """Whether the target is kept from this caller whatever the arguments: left out of its lists and
    answered as missing."""
    if not catalog.policies:
        return False
    return _listed(ctx, catalog, target).denial is not None


def shown(
    ctx: RequestContext, catalog: Catalog, items: tuple[T, ...], variant: Hashable = ""
) -> tuple[T, ...]:
    """`items` (one kind's list, as `variant` of the request chose it) without what this caller may
    never use; cached per caller and version, so a paged list filters once."""
    if not catalog.policies or not items:
        return items
    key = (catalog.tenant_id, catalog.version, caller_key(ctx), type(items[0]), variant)
    with _LOCK:
        found = _SHOWN.get(key)
    if found is None:
        found = tuple(item for item in items if not hidden(ctx, catalog, cast(Target, item)))
        with _LOCK:
            _SHOWN[key] = found
    return cast("tuple[T, ...]", found)


def _listed(ctx: RequestContext, catalog: Catalog, target: Target) -> _Listed:
    key = (
        catalog.tenant_id,
        catalog.version,
        caller_key(ctx),
        type(target),
        target.name,
        getattr(target, "uri", ""),
    )
    with _LOCK:  # the serving loop and the threads of Try and the admin share it
        found = _HIDDEN.get(key)
    if found is None:
        found = _decide_listed(ctx, catalog, target)
        with _LOCK:
            _HIDDEN[key] = found
    return found


def _decide_listed(ctx: RequestContext, catalog: Catalog, target: Target) -> _Listed:
    applying = _applying(compiled(catalog), target)
    if not applying:
        return _Listed(None, True, ())
    # A static resource takes no arguments: its list entry is its whole decision.
    static = isinstance(target, ResourceDef)
    activation: dict[str, Any] = {"caller": caller_of(ctx), "target": target_of(target)}
    if static:
        activation["arguments"] = {}
    later = tuple(
        p for p in applying if p.condition is not None and p.condition.uses_arguments and not static
    )
    now = [p for p in applying if p not in later]
    allows = [p for p in applying if not p.deny]
    allowed = not allows
    for policy in now:
        holds = _holds(policy, activation)
        if policy.deny and holds:
            return _Listed(Denial(policy.name, hidden=True), False, ())
        allowed = allowed or (not policy.deny and holds)
    if not allowed and not any(not p.deny for p in later):
        return _Listed(Denial("", hidden=True), False, ())
    return _Listed(None, allowed, later, activation if later else None)


def _holds(policy: Compiled, activation: dict[str, Any]) -> bool:
    assert policy.condition is not None
    try:
        return policy.condition.holds(activation)
    except ConditionError:
        return policy.deny  # fails closed: a deny holds, an allow does not


def check(ctx: RequestContext, catalog: Catalog, target: Target, arguments: dict[str, Any]) -> Denial | None:
    """The denial of this use of the target with these arguments, or None: allowed."""
    if not catalog.policies:
        return None
    listed = _listed(ctx, catalog, target)
    if listed.denial is not None or not listed.later:
        return listed.denial
    about = listed.about or {"caller": caller_of(ctx), "target": target_of(target)}
    activation = {**about, "arguments": arguments}
    allowed = listed.allowed
    for policy in listed.later:
        if policy.deny:
            if _holds(policy, activation):
                return Denial(policy.name, hidden=False)
        elif not allowed:
            allowed = _holds(policy, activation)
    return None if allowed else Denial("", hidden=False)
