"""Plain, immutable views of a tenant's definitions, safe to share across threads and requests.

The protocol core and the handlers work on these, never on ORM rows: the catalog loads them once
per tenant definitions_version and keeps them in process memory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import Any


@dataclass(frozen=True)
class ToolDef:
    id: int
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: dict[str, Any]
    icons: list[dict[str, Any]]
    meta: dict[str, Any]
    handler: str
    handler_config: dict[str, Any]
    # Encrypted blob as stored; handlers decrypt on use (mcp_app.handlers.secrets).
    handler_secrets: str = ""
    timeout_seconds: int = 30
    # OAuth tenants: a scope the token must hold, besides mcp:tools, to call the tool ("" = none).
    required_scope: str = ""
    # "inline" (in the server process) or "background" (a Celery worker, mcp_app.background.relay).
    execution: str = "inline"
    # Background: how long a call waits for a worker to start it; None: MCP_BACKGROUND_START_SECONDS.
    worker_wait_seconds: int | None = None
    # Results kept per caller this long (0: never), or once for all callers when shared (AMB-374).
    result_cache_seconds: int = 0
    result_cache_shared: bool = False
    # Arguments its input schema mirrors into Mcp-Param-* headers (x-mcp-header), checked per call.
    mirrors_headers: bool = False
    # Ask the person before running: "off", "every_time" or "once" (models.Approval); and what to do
    # when the client cannot ask: "refuse" or "run" (protocol/approval.py).
    approval: str = "off"
    approval_without_elicitation: str = "refuse"
    # Whether a 2025-11-25 client may (or must) call it as a task: "forbidden", "optional" or
    # "required" (models.TaskSupport resolved: "auto" is optional for background tools).
    task_support: str = "forbidden"
    # False when only 2026-07-28 can describe it (see offered_to_legacy): legacy sessions never see it.
    legacy: bool = True
    # MCP Apps: `_meta.ui.visibility` without "model", so only clients with the extension see it (AMB-273).
    app_only: bool = False
    # A tool of the "upstream" kind: where it is served from, resolved by the catalog loader (AMB-310);
    # None for every other kind, and for an upstream tool read some other way (it cannot be called).
    upstream: UpstreamRef | None = None


def offered_to_legacy(output_schema: Any) -> bool:
    """Whether a tool with this output schema fits the legacy revisions' Tool shape.

    Until 2025-11-25 an output schema (and so structuredContent) must be an object; 2026-07-28 allows
    any JSON Schema. A tool that needs more is served to modern clients only, never in a broken shape.
    """
    return output_schema is None or (isinstance(output_schema, dict) and output_schema.get("type") == "object")


@dataclass(frozen=True)
class UpstreamRef:
    """Where a tool, prompt, resource or template published from an upstream server is served from
    (AMB-192, AMB-310).

    Built from the Upstream row by `Upstream.ref` only: ``secrets`` is the row's encrypted headers,
    decrypted per request and never logged.
    """

    name: str  # the Upstream's name, which errors show (never its URL's credentials)
    upstream_id: int
    url: str
    mode: str
    transport: str
    timeout_seconds: int
    prefix: str
    # The upstream's own tool name, prompt name, resource URI or URI template ("" for the server itself).
    remote: str
    secrets: str = field(default="", repr=False)
    # Its OAuth client credentials as `Upstream.oauth()` gives them (the secret still encrypted): AMB-198.
    oauth: tuple[tuple[str, str], ...] = field(default=(), repr=False)
    # A provider of the tenant whose caller's token each request carries (AMB-216); "" for none.
    connection: str = ""
    # The upstream declared `completions`: completion/complete is passed to it.
    completions: bool = False
    # A resource's `size` as the upstream listed it (its contents are never stored here).
    size: int | None = None


@dataclass(frozen=True)
class PromptDef:
    id: int
    name: str
    title: str
    description: str
    arguments: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    icons: list[dict[str, Any]]
    meta: dict[str, Any]
    upstream: UpstreamRef | None = None


@dataclass(frozen=True)
class ResourceDef:
    id: int
    uri: str
    name: str
    title: str
    description: str
    mime_type: str
    text: str
    blob: bytes | None
    annotations: dict[str, Any]
    icons: list[dict[str, Any]]
    meta: dict[str, Any]
    upstream: UpstreamRef | None = None

    @property
    def size(self) -> int | None:
        if self.upstream is not None:
            return self.upstream.size
        return len(self.blob) if self.blob is not None else len(self.text.encode())


@dataclass(frozen=True)
class TemplateDef:
    id: int
    uri_template: str
    name: str
    title: str
    description: str
    mime_type: str
    handler: str
    handler_config: dict[str, Any]
    completions: dict[str, list[str]]
    annotations: dict[str, Any]
    icons: list[dict[str, Any]]
    meta: dict[str, Any]
    upstream: UpstreamRef | None = None


@dataclass(frozen=True)
class PolicyDef:
    """A tenant's policy as written (governance/ compiles it, once per definitions version; AMB-347)."""

    name: str
    effect: str  # "allow" | "deny"
    applies_to: str  # "all" | "tools" | "prompts" | "resources" (resources and templates)
    condition: str  # CEL over caller, target and arguments


@dataclass(frozen=True)
class QuotaDef:
    """A tenant's quota (AMB-352): `calls` per window of `seconds` for one tool ("": every tool)."""

    name: str
    tool: str
    calls: int
    seconds: int
    window: str  # "minute" | "hour" | "day", as written
    per: str  # "caller" | "tenant"


@dataclass(frozen=True)
class GuardrailDef:
    """A tenant's guardrail (AMB-354): a detector × where × an action, for one tool ("": everything)."""

    name: str
    detector: str  # "secrets" | "personal_data" | "card" | "iban" | "email" | "phone" | "pattern"
    pattern: str  # RE2, for "pattern"
    where: str  # "arguments" | "results" | "both"
    action: str  # "block" | "redact" | "audit"
    tool: str = ""


@dataclass(frozen=True)
class Catalog:
    """One tenant's enabled definitions at one definitions_version, each list sorted by its key."""

    tenant_id: int
    version: int
    tools: tuple[ToolDef, ...] = ()
    prompts: tuple[PromptDef, ...] = ()
    resources: tuple[ResourceDef, ...] = ()
    templates: tuple[TemplateDef, ...] = ()
    tools_by_name: dict[str, ToolDef] = field(default_factory=dict)
    prompts_by_name: dict[str, PromptDef] = field(default_factory=dict)
    resources_by_uri: dict[str, ResourceDef] = field(default_factory=dict)
    policies: tuple[PolicyDef, ...] = ()  # enabled ones, by name
    quotas: tuple[QuotaDef, ...] = ()  # enabled ones, by name
    guardrails: tuple[GuardrailDef, ...] = ()  # enabled ones, by name

    @cached_property
    def offered_to_all(self) -> bool:
        """Every tool is one every client sees: none only 2026-07-28 can describe, none only an app calls.
        Worked out once per catalog (a frozen dataclass keeps a cached property in its __dict__)."""
        return all(tool.legacy and not tool.app_only for tool in self.tools)


# JWS algorithms a tenant's identity provider may sign with: asymmetric only, never `none` or HS*
# (an HMAC "signed" with the issuer's public key would verify against what anyone can read).
ASYMMETRIC_ALGORITHMS = (
    "RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA",
)  # fmt: skip


@dataclass(frozen=True)
class ExternalIdentity:
    """A tenant's own authorization server, whose access tokens its endpoint accepts (AMB-203)."""

    issuer: str
    audience: str
    jwks_uri: str = ""  # JWT access tokens, checked against these keys
    introspection_url: str = ""  # or opaque tokens, asked about here (RFC 7662)
    client_id: str = ""  # the introspection client
    client_secret: str = ""  # still Fernet-encrypted (handlers/secrets.py)
    scope_claim: str = "scope"  # "scope" (space-separated) or "scp" (a list)
    # The provider's scope -> ours it grants too (AMB-217): Entra's "api://x/Tools.Use" -> ("mcp:tools",).
    scope_map: tuple[tuple[str, tuple[str, ...]], ...] = ()
    algorithms: tuple[str, ...] = ("RS256",)
    keep_platform_tokens: bool = False  # our own authorization server's tokens too


@dataclass(frozen=True)
class TenantInfo:
    """The immutable facts about a tenant a request needs (no ORM object crosses threads)."""

    id: int
    slug: str
    name: str
    title: str = ""
    description: str = ""
    server_version: str = "1.0.0"
    website_url: str = ""
    icons: tuple = ()
    instructions: str = ""
    allowed_origins: tuple[str, ...] = ()
    is_active: bool = True
    auth_mode: str = "oauth"  # "oauth" | "public" (tenants.models.AuthMode); fails closed when unset
    # (tool name, required scope) of enabled oauth-tenant tools that need a scope of their own; kept
    # here, valid under the same change token, so the transport's scope check costs no catalog read.
    tool_scopes: tuple[tuple[str, str], ...] = ()
    cache_ttl_ms: int = 60_000
    cache_scope: str = "auto"  # "auto" | "public" | "private" (tenants.models.CacheScope)
    task_ttl_seconds: int = 3600  # how long a task keeps its result (protocol/tasks.py)
    has_task_tools: bool = False  # some enabled tool may run as a task (2025-11-25 `tasks` capability)
    # Tool calls per minute (protocol/quotas.py): the whole tenant, one tool, one caller; 0: no quota.
    calls_per_minute: int = 0
    calls_per_minute_per_tool: int = 0
    calls_per_minute_per_caller: int = 0
    max_sessions: int = 0  # open legacy sessions at once; 0: no cap
    max_background_runs: int = 0  # background runs queued or running at once; 0: no cap
    max_streams: int = 0  # open SSE streams of the tenant at once (streams/stream_slots.py); 0: no cap
    max_streams_per_session: int = 0  # open SSE streams of one legacy session at once; 0: no cap
    max_body_bytes: int = 0  # largest request body, within MCP_MAX_BODY_BYTES; 0: that setting
    stream_poll_seconds: int = 0  # a legacy long answer's stream closed after this long (AMB-128); 0: never
    stream_poll_retry_ms: int = 1000  # the retry a polling client is told
    identity: ExternalIdentity | None = None  # None: only our authorization server's tokens
    # (kind, percent kept) of the governance events the tenant samples (AMB-360); a kind not named: all.
    audit_sampling: tuple[tuple[str, int], ...] = ()
    tool_discovery: str = "full"  # "full" | "search" | "auto" (tenants.models.ToolDiscovery, AMB-376)
