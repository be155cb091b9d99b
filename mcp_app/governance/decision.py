"""The one decision (AMB-347): may this caller use this target, with these arguments? (Longer than 400
lines: the decision, its caches and its thread are one concept, read together.)

Every list and every call, get and read asks here, after its lookup and before anything runs, in both
eras and for every kind (protocol/tools.py, prompts.py, resources.py, completion.py). The rule:

- no policy applies to the target's kind: allowed (a tenant without policies is served as before);
- a deny policy whose condition holds: denied, by that policy;
- else, when allow policies apply to the kind, one of them must hold: denied, by none, if none does.

A condition that cannot be evaluated (a missing key, a wrong type, arguments of more values than a policy
reads: conditions.MAX_ARGUMENT_VALUES) fails closed: a deny holds, an allow does not. A list knows no
arguments: a condition that reads them is undecided there, so a deny waits for the call and an allow
lists the target. A target denied without arguments is hidden: absent from lists and answered exactly
as a missing one; a denial that depends on the arguments names its policy.

A list is filtered once per caller and version. A filtering that costs more than INLINE_EVALUATIONS
condition evaluations (a tenant of thousands of tools under hundreds of policies: 0.7 s for 2,000 x 200)
runs on this process's one decision thread, not on the serving loop, one at a time per tenant, so that
a tenant's lists wait for its own policies and no other tenant's requests do (AMB-353).
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import threading
import time
from collections.abc import Hashable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from cachetools import LRUCache

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, PolicyDef, PromptDef, ResourceDef, TemplateDef, ToolDef
from mcp_app.governance import audit, conditions
from mcp_app.governance.conditions import Activation, Condition, ConditionError, Prepared, compile_condition

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
    why: str = ""  # why the policies could not read the arguments (they failed closed), or ""

    def message(self, kind: str, name: str) -> str:
        which = "whatever the arguments" if self.hidden else "with these arguments"
        why = f" {self.why}" if self.why else ""
        if self.policy:
            return f"Denied by policy {self.policy!r}: this {kind} may not be used {which}.{why}"
        return f"No policy allows this {kind} ({name}) {which}.{why}"


# (tenant, definitions version) -> its compiled policies: compiled once a version, in each process.
_COMPILED: LRUCache[tuple[int, int], tuple[Compiled, ...]] = LRUCache(maxsize=512)
# (tenant, version, caller, target) -> its denial without arguments: the lists' hot path.
_HIDDEN: LRUCache[tuple[Any, ...], _Listed] = LRUCache(maxsize=65_536)
# The same, in front of it: a call asks twice (hidden, then check), and through Daphne each locked LRU
# read cost microseconds. Emptied whole past FAST_ENTRIES; the LRU stays the bounded truth.
_FAST: dict[tuple[Any, ...], _Listed] = {}
FAST_ENTRIES = 16_384
# (tenant, version, caller, kind, variant) -> a list without what the caller may never use.
_SHOWN: LRUCache[tuple[Any, ...], tuple[Any, ...]] = LRUCache(maxsize=4_096)
_LOCK = threading.Lock()
T = TypeVar("T")
# A list whose filtering would cost more evaluations than this (about 1.5 µs each: 7 ms) is filtered on
# the decision thread (AMB-353); the lists being filtered there, and each tenant's one at a time.
INLINE_EVALUATIONS = 5_000
YIELD_EVALUATIONS = 200  # about 0.3 ms of work between two turns of the GIL on the decision thread
_DECIDER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-decision")
_PENDING: dict[tuple[Any, ...], Future[Any]] = {}
_BUSY: dict[int, Future[Any]] = {}


def compiled(catalog: Catalog) -> tuple[Compiled, ...]:
    key = (catalog.tenant_id, catalog.version)
    with _LOCK:
        found = _COMPILED.get(key)
    if found is None:
        found = compile_all(catalog.policies)
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
    return caller_dict(auth, ctx.user_id, ctx.role, ctx.subject or "", ctx.client_id or "", ctx.scopes or (),
                       ctx.client_address or "", claims_of(ctx.claims))  # fmt: skip


def caller_dict(
    auth: str, user: int | None = None, role: str = "", subject: str = "", client_id: str = "",
    scopes: Iterable[str] = (), address: str = "", claims: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """`caller` as a condition reads it."""
    return {
        "auth": auth, "user": user, "role": role, "subject": subject, "client_id": client_id,
        "scopes": sorted(scopes), "address": address, "claims": claims or {},
    }  # fmt: skip


@functools.lru_cache(maxsize=1_024)
def claims_of(kept: str) -> dict[str, Any]:
    """`caller.claims`: a token's claims as `core.context.kept_claims` kept them, parsed once per set
    (shared: never changed by a reader)."""
    return json.loads(kept) if kept else {}


def target_of(target: Target) -> dict[str, Any]:
    """`target` in a condition: what is asked for."""
    upstream = target.upstream.name if target.upstream is not None else ""
    uri = target.uri if isinstance(target, ResourceDef) else getattr(target, "uri_template", "")
    annotations = target.annotations if isinstance(target, ToolDef) else None
    return target_dict(KIND_NAME[type(target)], target.name, upstream, annotations, uri)


def target_dict(
    kind: str, name: str, upstream: str = "", annotations: dict[str, Any] | None = None, uri: str = ""
) -> dict[str, Any]:
    """`target` as a condition reads it, for a `kind` of "tool", "prompt", "resource" or "template"."""
    found: dict[str, Any] = {"kind": kind, "name": name, "upstream": upstream}
    if kind == "tool":
        # Every hint present, as the spec's ToolAnnotations defaults read when a tool leaves it out: a
        # condition on one never fails on a missing key (which would deny, failing closed).
        found["annotations"] = {**HINT_DEFAULTS, **(annotations or {})}
    elif kind in ("resource", "template"):
        found["uri"] = uri
    return found


def caller_key(ctx: RequestContext) -> tuple[Any, ...]:
    """What of a caller a condition may read: decisions are cached per this and the definitions version."""
    return (ctx.subject, ctx.claims, ctx.user_id, ctx.role, ctx.client_id, ctx.scopes, ctx.client_address)


@dataclass(frozen=True)
class _Listed:
    """A target's decision without its arguments, cached: the lists' hot path, and the first half of a use."""

    denial: Denial | None  # hidden
    allowed: bool  # an allow policy that reads no arguments held (or none applies): no argument allow needed
    later: tuple[Compiled, ...]  # the policies that read the arguments: evaluated at each use
    # `caller` and `target` as `later` read them, converted once for every use (conditions.Prepared).
    prepared: Prepared | None = None
    # The keys of a use's arguments `later` read; None: every key (conditions.argument_keys, AMB-377).
    argument_keys: frozenset[str] | None = None


@dataclass(frozen=True)
class Split:
    """The policies that apply to one type of target, split once a version: those decided for its
    list entry (`now`) and those that read the arguments of each use (`later`)."""

    now: tuple[Compiled, ...]
    later: tuple[Compiled, ...]
    has_allow: bool  # an allow policy applies: a use needs one that holds
    later_allows: bool


_SPLITS: LRUCache[tuple[int, int, type], Split] = LRUCache(maxsize=2_048)


def _split(catalog: Catalog, target: Target) -> Split:
    key = (catalog.tenant_id, catalog.version, type(target))
    with _LOCK:
        found = _SPLITS.get(key)
    if found is None:
        # A static resource takes no arguments: its list entry is its whole decision.
        found = split_of(compiled(catalog), KIND_OF_LIST[type(target)], static=type(target) is ResourceDef)
        with _LOCK:
            _SPLITS[key] = found
    return found


def split_of(policies: Iterable[Compiled], kind: str, static: bool = False) -> Split:
    """The policies that apply to a list of `kind` ("tools", "prompts", "resources"), split."""
    applying = [p for p in policies if p.applies_to in ("all", kind) and p.condition is not None]
    later = tuple(p for p in applying if p.condition is not None and p.condition.uses_arguments and not static)
    return Split(
        now=tuple(p for p in applying if p not in later),
        later=later,
        has_allow=any(not p.deny for p in applying),
        later_allows=any(not p.deny for p in later),
    )


def compile_all(policies: Iterable[PolicyDef]) -> tuple[Compiled, ...]:
    return tuple(_compile(p) for p in policies)


def hidden(ctx: RequestContext, catalog: Catalog, target: Target, method: str = "") -> bool:
    """Whether the target is kept from this caller whatever the arguments: left out of its lists and
    answered as missing. A use (`method`) of one is a governance event (AMB-355)."""
    if not catalog.policies:
        return False
    denial = _listed(ctx, catalog, target).denial
    if denial is not None and method:
        audit.record(ctx, "denied", denial.policy, _name(target), method, {"hidden": True})
    return denial is not None


def _name(target: Target) -> str:
    return target.uri if isinstance(target, ResourceDef) else target.name


async def shown(
    ctx: RequestContext, catalog: Catalog, items: tuple[T, ...], variant: Hashable = ""
) -> tuple[T, ...]:
    """`items` (one kind's list, as `variant` of the request chose it) without what this caller may
    never use; cached per caller and version, so a paged list filters once."""
    if not catalog.policies or not items:
        return items
    key = (catalog.tenant_id, catalog.version, caller_key(ctx), type(items[0]), variant)
    if len(items) * len(catalog.policies) <= INLINE_EVALUATIONS:
        return _filtered(ctx, catalog, items, key)
    while True:
        with _LOCK:
            found = _SHOWN.get(key)
            if found is not None:
                return cast("tuple[T, ...]", found)
            future = _PENDING.get(key)
            busy = None if future is not None else _BUSY.get(catalog.tenant_id)
            if future is None and busy is None:
                future = _DECIDER.submit(_filtered, ctx, catalog, items, key, True)
                _PENDING[key] = _BUSY[catalog.tenant_id] = future
                future.add_done_callback(lambda done: _done(key, catalog.tenant_id, done))
        if future is not None:
            return cast("tuple[T, ...]", await asyncio.wrap_future(future))
        assert busy is not None
        # The tenant's decision thread work for another caller first: one at a time per tenant.
        await asyncio.wait([asyncio.wrap_future(busy)])


def _filtered(
    ctx: RequestContext, catalog: Catalog, items: tuple[T, ...], key: tuple[Any, ...], yielding: bool = False
) -> tuple[T, ...]:
    with _LOCK:
        found = _SHOWN.get(key)
    if found is None:
        kept = []
        every = max(1, YIELD_EVALUATIONS // len(catalog.policies))
        for index, item in enumerate(items):
            if yielding and index % every == 0:
                # Hand the GIL to the serving loop now rather than when it is taken (every 5 ms): each
                # of a request's socket reads and writes waits for it, so a 5 ms turn cost the
                # other tenants' requests 100-300 ms.
                time.sleep(0)
            if not hidden(ctx, catalog, cast(Target, item)):
                kept.append(item)
        found = tuple(kept)
        with _LOCK:
            _SHOWN[key] = found
    return cast("tuple[T, ...]", found)


def _done(key: tuple[Any, ...], tenant_id: int, future: Future[Any]) -> None:
    with _LOCK:
        if _PENDING.get(key) is future:
            del _PENDING[key]
        if _BUSY.get(tenant_id) is future:
            del _BUSY[tenant_id]


def _listed(ctx: RequestContext, catalog: Catalog, target: Target) -> _Listed:
    key = (
        catalog.tenant_id,
        catalog.version,
        caller_key(ctx),
        type(target),
        target.name,
        getattr(target, "uri", ""),
    )
    found = _FAST.get(key)  # a dict's get is atomic: no lock, no LRU bookkeeping (AMB-375)
    if found is not None:
        return found
    with _LOCK:  # the serving loop and the threads of Try and the admin share it
        found = _HIDDEN.get(key)
    if found is None:
        found = _decide_listed(ctx, catalog, target)
        with _LOCK:
            _HIDDEN[key] = found
    if len(_FAST) >= FAST_ENTRIES:
        _FAST.clear()
    _FAST[key] = found
    return found


def _decide_listed(ctx: RequestContext, catalog: Catalog, target: Target) -> _Listed:
    split = _split(catalog, target)
    if not split.now and not split.later:
        return _Listed(None, True, ())
    about: dict[str, Any] = {"caller": caller_of(ctx), "target": target_of(target)}
    if type(target) is ResourceDef:
        about["arguments"] = {}
    denial, allowed = _listing(split, about)
    if denial is not None:
        return _Listed(denial, False, ())
    if not split.later:
        return _Listed(None, allowed, ())
    keys = conditions.keys_read(p.condition for p in split.later if p.condition is not None)
    return _Listed(None, allowed, split.later, Prepared(_read_by(about, split.later)), keys)


def _unread(listed: _Listed) -> Denial | None:
    """The decision when the arguments are more than a policy reads: each of `later` fails closed, as a
    condition that cannot be evaluated does (a deny holds, an allow does not)."""
    for policy in listed.later:
        if policy.deny:
            return Denial(policy.name, hidden=False, why=conditions.UNREAD)
    return None if listed.allowed else Denial("", hidden=False, why=conditions.UNREAD)


def _listing(split: Split, about: dict[str, Any]) -> tuple[Denial | None, bool]:
    """A list entry's denial (None: listed), and whether an allow that reads no arguments held."""
    activation = _activation(about, split.now)  # converted once for every policy below
    allowed = not split.has_allow
    for policy in split.now:
        holds = _holds(policy, activation)
        if policy.deny and holds:
            return Denial(policy.name, hidden=True), False
        allowed = allowed or (not policy.deny and holds)
    if not allowed and not split.later_allows:
        return Denial("", hidden=True), False
    return None, allowed


def listed(split: Split, caller: dict[str, Any], target: dict[str, Any]) -> bool:
    """Whether `caller`'s list shows `target` under `split`'s policies (as `caller_dict`, `target_dict`
    give them): the decision a list makes, for a check made when a policy is saved (reach.py)."""
    return _listing(split, {"caller": caller, "target": target})[0] is None


def _activation(values: dict[str, Any], policies: Iterable[Compiled]) -> Activation:
    return Activation(_read_by(values, policies))


def _read_by(values: dict[str, Any], policies: Iterable[Compiled]) -> dict[str, Any]:
    """The variables these policies read, and only those: the binding converts each whole from Python
    (a caller's dict no condition reads cost 16 of 26 µs a call)."""
    reads = set().union(*(p.condition.reads for p in policies if p.condition is not None))
    return {name: value for name, value in values.items() if name in reads}


def _holds(policy: Compiled, activation: Activation) -> bool:
    assert policy.condition is not None
    try:
        return policy.condition.holds_in(activation)  # _activation gave it what it reads
    except ConditionError:
        return policy.deny  # fails closed: a deny holds, an allow does not


def check(
    ctx: RequestContext, catalog: Catalog, target: Target, arguments: dict[str, Any], method: str = ""
) -> Denial | None:
    """The denial of this use of the target with these arguments, or None: allowed. A denied use
    (`method`; the simulator names none) is a governance event (AMB-355)."""
    if not catalog.policies:
        return None
    denial = _decided(ctx, catalog, target, arguments)
    if denial is not None and method:
        unread = {"unread": f"more than {conditions.MAX_ARGUMENT_VALUES} values"} if denial.why else {}
        audit.record(ctx, "denied", denial.policy, _name(target), method, {"hidden": denial.hidden, **unread})
    return denial


def _decided(ctx: RequestContext, catalog: Catalog, target: Target, arguments: dict[str, Any]) -> Denial | None:
    listed = _listed(ctx, catalog, target)
    if listed.denial is not None or listed.prepared is None:
        return listed.denial
    read = conditions.only_keys(arguments, listed.argument_keys)
    if not conditions.within_values(read):
        return _unread(listed)
    activation = listed.prepared.borrow("arguments", read)
    try:
        allowed = listed.allowed
        for policy in listed.later:
            if policy.deny:
                if _holds(policy, activation):
                    return Denial(policy.name, hidden=False)
            elif not allowed:
                allowed = _holds(policy, activation)
    finally:
        listed.prepared.give_back(activation, "arguments")
    return None if allowed else Denial("", hidden=False)
