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
from dataclasses import dataclass
from typing import Any, cast

from cachetools import LRUCache

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, PolicyDef, PromptDef, ResourceDef, TemplateDef, ToolDef
from mcp_app.governance.conditions import Condition, ConditionError, compile_condition

logger = logging.getLogger(__name__)

Target = ToolDef | PromptDef | ResourceDef | TemplateDef
KIND_OF_LIST = {ToolDef: "tools", PromptDef: "prompts", ResourceDef: "resources", TemplateDef: "resources"}
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
        if self.policy:
            return f"Denied by policy {self.policy!r}: this {kind} may not be used with these arguments."
        return f"No policy allows this {kind} ({name}) with these arguments."


# (tenant, definitions version) -> its compiled policies: compiled once a version, in each process.
_COMPILED: LRUCache[tuple[int, int], tuple[Compiled, ...]] = LRUCache(maxsize=512)
# (tenant, version, caller, target) -> its denial without arguments: the lists' hot path.
_HIDDEN: LRUCache[tuple[Any, ...], Denial | None] = LRUCache(maxsize=65_536)
_LOCK = threading.Lock()
_UNKNOWN = object()


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
        found["annotations"] = dict(target.annotations or {})
    elif isinstance(target, ResourceDef):
        found["uri"] = target.uri
    elif isinstance(target, TemplateDef):
        found["uri"] = target.uri_template
    return found


def _caller_key(ctx: RequestContext) -> tuple[Any, ...]:
    return (ctx.subject, ctx.user_id, ctx.role, ctx.client_id, ctx.scopes, ctx.client_address)


def _applying(policies: tuple[Compiled, ...], target: Target) -> list[Compiled]:
    kind = KIND_OF_LIST[type(target)]
    return [p for p in policies if p.applies_to in ("all", kind)]


def hidden(ctx: RequestContext, catalog: Catalog, target: Target) -> bool:
    """Whether the target is kept from this caller whatever the arguments: left out of its lists and
    answered as missing."""
    if not catalog.policies:
        return False
    denial = _without_arguments(ctx, catalog, target)
    return denial is not None


def _without_arguments(ctx: RequestContext, catalog: Catalog, target: Target) -> Denial | None:
    key = (
        catalog.tenant_id,
        catalog.version,
        _caller_key(ctx),
        type(target),
        target.name,
        getattr(target, "uri", ""),
    )
    with _LOCK:  # the serving loop and the threads of Try and the admin share it
        found = _HIDDEN.get(key, _UNKNOWN)
    if found is not _UNKNOWN:
        return cast("Denial | None", found)
    # A static resource takes no arguments: its list entry is its whole decision.
    denial = _decide(ctx, catalog, target, {} if isinstance(target, ResourceDef) else None)
    if denial is not None:
        denial = Denial(denial.policy, hidden=True)
    with _LOCK:
        _HIDDEN[key] = denial
    return denial


def check(ctx: RequestContext, catalog: Catalog, target: Target, arguments: dict[str, Any]) -> Denial | None:
    """The denial of this use of the target with these arguments, or None: allowed."""
    if not catalog.policies:
        return None
    return _without_arguments(ctx, catalog, target) or _decide(ctx, catalog, target, arguments)


def _decide(
    ctx: RequestContext, catalog: Catalog, target: Target, arguments: dict[str, Any] | None
) -> Denial | None:
    applying = _applying(compiled(catalog), target)
    if not applying:
        return None
    activation = {"caller": caller_of(ctx), "target": target_of(target)}
    if arguments is not None:
        activation["arguments"] = arguments
    undecided_allow = False
    allows = False
    for policy in applying:
        if policy.condition is None:
            continue
        if arguments is None and policy.condition.uses_arguments:
            undecided_allow = undecided_allow or not policy.deny
            continue
        try:
            holds = policy.condition.holds(activation)
        except ConditionError:
            holds = policy.deny  # fails closed
        if policy.deny and holds:
            return Denial(policy.name, hidden=arguments is None)
        allows = allows or (not policy.deny and holds)
    if any(not p.deny and p.condition is not None for p in applying) and not (allows or undecided_allow):
        return Denial("", hidden=arguments is None)
    return None
