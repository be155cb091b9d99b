"""What a handler knows about the request it serves: passed in, never read from HTTP."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Protocol, runtime_checkable

from mcp_app.core.errors import ToolError
from mcp_app.core.types import ResourceDef, TenantInfo, ToolDef
from mcp_app.core.versions import DEFAULT_NEGOTIATED

# Sends one JSON-RPC notification related to the current request (progress, log message).
# The transport decides the stream (the request's own SSE stream).
Emit = Callable[[dict[str, Any]], Awaitable[None]]


@runtime_checkable
class RelayingEmit(Protocol):
    """An Emit that can store marks with a message, atomically: a legacy POST's (transport/exchange.py),
    whose stream outlives its process. A background relay marks each worker reply it stores (AMB-369),
    so a process taking the stream over knows the job and how far its replies reached the stream. An
    emit wrapped by anyone else is a plain Emit: nothing marked, nothing taken over."""

    async def __call__(self, message: dict[str, Any]) -> None: ...

    async def relayed(self, message: dict[str, Any], marks: dict[str, str]) -> None: ...


# The marks of a relayed reply: RELAYED_JOB + job id holds the job (JSON, its arguments left out), and
# RELAYED_AFTER + job id the entry id of its last reply stored (background/contract.py).
RELAYED_JOB, RELAYED_AFTER = "job:", "after:"


# Asks the client one question (a request object: elicitation/create, sampling/createMessage,
# roots/list) and returns its result; the transport's era decides how (protocol.asking).
Asker = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]


# Several questions asked together, each under the name its definition gives it (AMB-122): the request
# {"method": ASK_TOGETHER, "params": {"requests": {name: request, ...}}} is answered
# {"results": {name: result, ...}}. Every asker takes it: a 2026-07-28 round asks all the unanswered
# ones at once, a legacy session one after another (stopping at an elicitation not accepted, so a
# later name may have no result). Never sent on the wire.
ASK_TOGETHER = "mcp.ask/together"

# "My questions are asked: what follows may run as a task" (AMB-286), put by `RequestContext.as_task`.
# Only the asker of a 2026-07-28 call that may become a task acts on it (the call answers with the
# task, which runs the handler again with the answers); every other asker answers {} at once.
# Never sent on the wire.
AS_TASK = "mcp.ask/as-task"


async def _cannot_ask(request: dict[str, Any]) -> dict[str, Any]:
    method = request.get("method")
    if method == AS_TASK:
        return {}
    if method == ASK_TOGETHER:  # name what was asked, not the internal group
        group = (request.get("params") or {}).get("requests") or {}
        method = ", ".join(sorted({str(q.get("method")) for q in group.values() if isinstance(q, dict)}))
    raise ToolError(f"This asks the client ({method}), but it runs where no client can be asked.")


# The tenant's enabled resources by URI, for content that links or embeds one. A function, so that
# nothing is loaded for a request that never renders such content.
ResourceLookup = Callable[[], Awaitable[Mapping[str, ResourceDef]]]


async def _drop(_message: dict[str, Any]) -> None:
    return None


async def _no_resources() -> Mapping[str, ResourceDef]:
    return {}


def resources_of(by_uri: Mapping[str, ResourceDef]) -> ResourceLookup:
    """A ResourceLookup over a mapping already loaded (the catalog a method has in hand)."""

    async def lookup() -> Mapping[str, ResourceDef]:
        return by_uri

    return lookup


@dataclass
class SessionState:
    """Per-session state kept by the session store (shared by every process)."""

    id: str
    tenant_id: int
    protocol_version: str
    client_info: dict[str, Any] = field(default_factory=dict)
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    log_level: str | None = None  # None: the client has not called logging/setLevel
    initialized: bool = False  # notifications/initialized received
    subscriptions: list[str] = field(default_factory=list)
    user_id: int | None = None
    client_id: str | None = None
    created_at: float = 0.0
    owner: str = ""  # the client that opened it, as counted by streams/session_admission (AMB-100)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant_id": self.tenant_id,
            "protocol_version": self.protocol_version,
            "client_info": self.client_info,
            "client_capabilities": self.client_capabilities,
            "log_level": self.log_level,
            "initialized": self.initialized,
            "subscriptions": self.subscriptions,
            "user_id": self.user_id,
            "client_id": self.client_id,
            "created_at": self.created_at,
            "owner": self.owner,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> SessionState:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


@dataclass(frozen=True)
class ParamHeaders:
    """A 2026-07-28 request's headers (lower-case names), for the tools/call that checks its
    Mcp-Param-* headers against the arguments; `duplicated`: the names sent more than once."""

    headers: Mapping[str, str]
    duplicated: frozenset[str] = frozenset()


@dataclass(frozen=True)
class RequestContext:
    """Everything dispatch needs about one message; the same whether it came with a session or not.

    A modern (2026-07-28) request has no session: its version, capabilities and log level came in
    its own `_meta`.
    """

    tenant: TenantInfo
    protocol_version: str = DEFAULT_NEGOTIATED
    session: SessionState | None = None
    client_capabilities: dict[str, Any] = field(default_factory=dict)
    user_id: int | None = None
    client_id: str | None = None
    scopes: frozenset[str] | None = None  # None: the endpoint is public, nothing is scope-limited
    subject: str | None = None  # Caller.subject: a tenant's own identity provider's user
    claims: str = ""  # Caller.claims: that user's token's claims (a policy's caller.claims)
    role: str = ""  # Caller.role: the user's role in the tenant, "" for none (a policy's caller.role)
    request_id: str | int | None = None
    progress_token: str | int | None = None
    # The request's own log level (2026-07-28 `_meta`); a legacy session's level lives in the session.
    log_level: str | None = None
    # The peer's address, for limits on sessionless anonymous callers (behind a proxy: the proxy's).
    client_address: str | None = None
    param_headers: ParamHeaders | None = None  # 2026-07-28 only: a legacy request has no such headers
    # The tools/list a client asked for with ?tools= on the MCP URL: "full", "search", "" (the tenant's).
    discovery: str = ""
    emit: Emit = _drop
    # Set when notifications/cancelled names this request; handlers may poll it.
    cancelled: Any = None  # asyncio.Event | None
    # Set by the method that runs a handler (it holds the tenant's catalog); none by default.
    resources: ResourceLookup = _no_resources
    # Set by the method that runs a handler for a client that can be asked (protocol.asking).
    ask: Asker = _cannot_ask
    # Names this call across its 2026-07-28 rounds (carried in requestState); fresh per legacy call.
    # What a handler asks out of band (a URL-mode form) is keyed on it, so a retry finds it again.
    call_id: str = ""
    # What a handler keeps across its 2026-07-28 rounds, in the signed requestState beside the answers
    # (JSON values; small: the state travels with every round). A handler reads it on its next run
    # and may continue from there; a legacy call runs once, so it starts empty and nobody reads it.
    carried: dict[str, Any] = field(default_factory=dict)
    # The admin's Try of a draft (AMB-221): tools/call of this name runs this definition, not the
    # published one of the catalog. Never set for a client's request.
    draft_tool: ToolDef | None = None

    def but(self, **changes: Any) -> RequestContext:
        """This context with `changes`: `dataclasses.replace` without running `__init__` again, which
        checks and assigns all of its fields (~10 µs; this ~1: a call makes a few such copies)."""
        if unknown := changes.keys() - _CONTEXT_FIELDS:
            raise TypeError(f"RequestContext has no field {', '.join(sorted(unknown))}")
        copy = object.__new__(RequestContext)
        copy.__dict__.update(self.__dict__)
        copy.__dict__.update(changes)
        return copy

    async def ask_together(self, requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        """Ask several questions at once, named (ASK_TOGETHER); returns the results by name."""
        answer = await self.ask({"method": ASK_TOGETHER, "params": {"requests": requests}})
        results = answer.get("results")
        return results if isinstance(results, dict) else {}

    async def as_task(self) -> None:
        """Say that the questions are asked (AMB-286): on a 2026-07-28 call of a tool that asks before it
        becomes a task (`asks_before_task`), the call answers with the task here and the task runs
        the handler again, its questions answered from the rounds; anywhere else it returns at once."""
        await self.ask({"method": AS_TASK, "params": {}})

    async def elicit(
        self, message: str, requested_schema: dict[str, Any], key: str | None = None
    ) -> dict[str, Any]:
        """Ask the person to fill a form; returns the ElicitResult (action accept/decline/cancel, content).

        `key` names the question (a 2026-07-28 inputRequests key) instead of its number.
        """
        params = {"mode": "form", "message": message, "requestedSchema": requested_schema}
        request = {"method": "elicitation/create", "params": params}
        if key is None:
            return await self.ask(request)
        return (await self.ask_together({key: request})).get(key) or {"action": "cancel"}

    async def elicit_url(self, message: str, url: str, elicitation_id: str) -> dict[str, Any]:
        """Send the person to `url` (URL-mode elicitation); returns the ElicitResult (accept = consent)."""
        params = {"mode": "url", "message": message, "url": url, "elicitationId": elicitation_id}
        return await self.ask({"method": "elicitation/create", "params": params})

    async def sample(self, messages: list[dict[str, Any]], max_tokens: int, **params: Any) -> dict[str, Any]:
        """Ask the client's model (sampling/createMessage); returns the CreateMessageResult."""
        request = {"messages": messages, "maxTokens": max_tokens, **params}
        return await self.ask({"method": "sampling/createMessage", "params": request})

    async def list_roots(self) -> dict[str, Any]:
        """Ask for the client's roots (roots/list); returns the ListRootsResult."""
        return await self.ask({"method": "roots/list", "params": {}})


_CONTEXT_FIELDS = frozenset(f.name for f in fields(RequestContext))


@dataclass(frozen=True)
class Caller:
    """Who sent a request: the OAuth user and client, and the token's scopes (all None: public)."""

    user_id: int | None = None
    client_id: str | None = None
    scopes: frozenset[str] | None = None  # None: public endpoint, nothing scope-limited
    # "<issuer>#<sub>" of a tenant's own identity provider's token, which names no local user (AMB-204).
    subject: str | None = None
    role: str = ""  # the user's role in the tenant (owner, editor, viewer); "" for none
    # That token's verified claims as `kept_claims` keeps them (a policy's `caller.claims`); "" for none.
    claims: str = ""


PUBLIC = Caller()

# A token's claims a policy may read, in all (canonical JSON): a group list of a few hundred names
# fits; what does not is left out, claim by claim, and a condition reading it fails closed (AMB-359).
MAX_CLAIMS_BYTES = 16_384
MAX_CLAIM_DEPTH = 4
# Claims that change with every token of the same person: kept, they would make each token a caller of
# its own to every per-caller cache (lists, decisions), and no condition could use them (CEL has no clock).
PER_TOKEN_CLAIMS = frozenset({"exp", "iat", "nbf", "jti", "nonce", "at_hash", "c_hash"})


def kept_claims(claims: Mapping[str, Any]) -> str:
    """A verified token's claims as a policy reads them (`caller.claims`), as compact JSON with sorted
    keys (hashable, one spelling per set of claims): in key order, each claim but PER_TOKEN_CLAIMS that
    fits what is left of MAX_CLAIMS_BYTES and nests at most MAX_CLAIM_DEPTH deep; "" when none is kept."""
    kept: dict[str, Any] = {}
    left = MAX_CLAIMS_BYTES
    for name in sorted(k for k in claims if isinstance(k, str) and k not in PER_TOKEN_CLAIMS):
        value = claims[name]
        if _depth(value) > MAX_CLAIM_DEPTH:
            continue
        size = len(json.dumps({name: value}, separators=(",", ":")))
        if size <= left:
            kept[name], left = value, left - size
    return json.dumps(kept, separators=(",", ":"), sort_keys=True) if kept else ""


def _depth(value: Any, limit: int = MAX_CLAIM_DEPTH + 1) -> int:
    """How deep lists and objects nest in `value` (a scalar: 0), counted no further than `limit`."""
    if limit <= 0 or not isinstance(value, dict | list):
        return 0
    inner = value.values() if isinstance(value, dict) else value
    return 1 + max((_depth(v, limit - 1) for v in inner), default=0)
