"""Upstream MCP servers a tenant federates, and the remote tools each one offers (issue 22).

Imported by mcp_app/models.py (Django wants one app's models found through `models`), so
that module stays short. A published upstream tool is an ordinary `Tool` row (handler "upstream");
`UpstreamTool` keeps what the upstream offers now (`offered`) beside what the owner published
(`pinned`), so a changed remote definition waits for review (AMB-161).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core.types import UpstreamRef
from tenants.models import Tenant, TenantQuerySet

# Prefixed onto a remote tool's name, so the result must still be a legal tool name (no colons:
# some clients split on them).
prefix_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{0,32}$",
    "A prefix is up to 32 letters, digits, '_', '-' and '.' (no colons or spaces), e.g. 'github_'.",
)
upstream_name_validator = RegexValidator(
    r"^[a-z0-9][a-z0-9_-]{0,62}$",
    "Names are 1-63 lowercase letters, digits, '_' and '-', starting with a letter or digit.",
)

# The longest a call to an upstream may take before it is abandoned (the federation's per-call timeout).
UPSTREAM_TIMEOUT_MAX_SECONDS = 600

# The remote definition's fields an owner reviews before they reach clients (`_meta`: an MCP Apps
# tool's UI resource and the UI's permissions are there).
REVIEWED_FIELDS = ("title", "description", "inputSchema", "outputSchema", "annotations", "_meta")

# An upstream's prompts, resources and resource templates, by the switch that publishes them and the
# key of the list in `offered_extras` / `pinned_extras` (the wire's list names) (AMB-190).
EXTRA_KINDS = {"publish_prompts": ("prompts",), "publish_resources": ("resources", "resourceTemplates")}
# What names an item of each list (the key a review and the catalog match items by).
EXTRA_KEYS = {"prompts": "name", "resources": "uri", "resourceTemplates": "uriTemplate"}
# Fields of an item that change without its definition changing: not reviewed, not compared.
UNREVIEWED_EXTRA_FIELDS = ("size",)


class UpstreamMode(models.TextChoices):
    AUTO = "auto", "Automatic: try 2026-07-28, fall back to a legacy session"
    LEGACY = "legacy", "Legacy: always open a 2025-11-25 (or older) session"


class UpstreamTransport(models.TextChoices):
    STREAMABLE_HTTP = "streamable-http", "Streamable HTTP"
    SSE = "sse", "HTTP+SSE (2024-11-05)"


class Upstream(models.Model):
    """An MCP server the tenant's team already runs, whose tools the tenant publishes as its own."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(
        max_length=63,
        validators=[upstream_name_validator],
        help_text="The upstream's name in this tenant; its published tools name it in their handler configuration.",
    )
    url = models.URLField(
        max_length=2000,
        help_text="Its Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp (for HTTP+SSE: its SSE stream).",
    )
    prefix = models.CharField(
        max_length=32,
        blank=True,
        validators=[prefix_validator],
        help_text="Put before each published tool's name (e.g. 'gh_' publishes 'search' as 'gh_search').",
    )
    mode = models.CharField(max_length=10, choices=UpstreamMode.choices, default=UpstreamMode.AUTO)
    transport = models.CharField(
        max_length=20,
        choices=UpstreamTransport.choices,
        default=UpstreamTransport.STREAMABLE_HTTP,
        help_text="HTTP+SSE: the URL is the server's SSE stream (e.g. https://mcp.example.com/sse); "
        "it always opens a legacy session.",
    )
    # Fernet-encrypted JSON object of header name -> value (handlers/secrets.py); never shown again.
    secret_headers = models.TextField(blank=True, default="", editable=False)
    # OAuth client credentials (AMB-198): the upstream's own client of its authorization server; with
    # a client id set, every request carries a token got by the client credentials grant.
    oauth_client_id = models.CharField(
        "OAuth client id",
        max_length=255,
        blank=True,
        help_text="Set to authenticate with OAuth client credentials: a client the upstream's authorization "
        "server issued to this tenant (never the caller's token).",
    )
    oauth_token_url = models.URLField(
        "OAuth token URL",
        max_length=2000,
        blank=True,
        help_text="Its authorization server's token endpoint. Blank: found from the upstream's protected "
        "resource metadata (RFC 9728) and its server's metadata (RFC 8414).",
    )
    oauth_scope = models.CharField(
        "OAuth scope",
        max_length=1000,
        blank=True,
        help_text="Space-separated scopes to ask for (blank: the server's default).",
    )
    # Fernet-encrypted {"client_secret": ...} (handlers/secrets.py); never shown again.
    oauth_client_secret = models.TextField(blank=True, default="", editable=False)
    # Connected accounts (AMB-216): each call carries its caller's own token at this provider of the
    # tenant; discovery, sync and the watcher keep using the upstream's own credentials above.
    connection = models.CharField(
        "act as the caller through",
        max_length=63,
        blank=True,
        validators=[RegexValidator(r"^[a-z0-9][a-z0-9_-]{0,62}$", "Name one of this tenant's providers.")],
        help_text="A provider of this tenant (its name): every call sends the calling person's own token "
        "there as Authorization: Bearer, asking them to connect first. Test connection, Sync and the "
        "watcher use the credentials above. Blank: calls use those too.",
    )
    timeout_seconds = models.PositiveIntegerField(
        default=30,
        validators=[MinValueValidator(1), MaxValueValidator(UPSTREAM_TIMEOUT_MAX_SECONDS)],
        help_text="How long one call to the upstream may take.",
    )
    enabled = models.BooleanField(
        default=True, help_text="Off: its tools are left out of the tenant's lists and cannot be called."
    )
    publish_new = models.BooleanField(
        default=False,
        help_text="Publish tools the upstream adds automatically. Off: they wait, unpublished, for an owner.",
    )
    publish_prompts = models.BooleanField(
        default=False,
        help_text="Publish the upstream's prompts under the prefix. Their definitions are pinned: a change "
        "the upstream makes waits for an owner's review.",
    )
    publish_resources = models.BooleanField(
        default=False,
        help_text="Publish the upstream's resources and resource templates, their URIs as "
        "scheme://<prefix>/… (pinned, as prompts are).",
    )
    # What the upstream offered of prompts, resources and templates at the last sync (wire dicts, lists
    # keyed as EXTRA_KEYS); status, written by an update as the other last_* fields are.
    offered_extras = models.JSONField(default=dict, blank=True, editable=False)
    # What clients are served: the lists an owner published or last accepted; a kind is present only
    # while its switch is on (AMB-190).
    pinned_extras = models.JSONField(default=dict, blank=True, editable=False)
    # What the upstream said the last time it was asked (sync, Test connection).
    last_protocol_version = models.CharField(max_length=20, blank=True, editable=False)
    last_server_info = models.JSONField(default=dict, blank=True, editable=False)
    last_capabilities = models.JSONField(default=dict, blank=True, editable=False)
    last_synced_at = models.DateTimeField(null=True, blank=True, editable=False)
    last_error = models.TextField(blank=True, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()
    # Secrets stay out of history as a tool's do; what a sync saw is status, not a definition.
    history = HistoricalRecords(
        excluded_fields=[
            "secret_headers",
            "oauth_client_secret",
            "updated_at",
            "last_protocol_version",
            "last_server_info",
            "last_capabilities",
            "last_synced_at",
            "last_error",
            "offered_extras",
        ]
    )

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_upstream_name_per_tenant")
        ]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        self.pin_published()
        if kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "pinned_extras"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        if self._state.adding and self.tenant_id is not None:
            cap = settings.MCP_UPSTREAMS_PER_TENANT
            if Upstream.objects.filter(tenant_id=self.tenant_id).count() >= cap:
                raise ValidationError(too_many_upstreams(cap))

    def oauth(self) -> dict[str, str]:
        """What a call needs of its OAuth client credentials ({} without): the secret still encrypted."""
        if not self.oauth_client_id:
            return {}
        return {
            "client_id": self.oauth_client_id,
            "token_url": self.oauth_token_url,
            "scope": self.oauth_scope,
            "secret": self.oauth_client_secret,
        }

    def ref(self, remote: str = "", size: Any = None) -> UpstreamRef:
        """Where a definition it publishes (``remote``: the upstream's own name or URI of it; "" for the
        server itself) is served from: the one mapping of this row to what a call needs (AMB-310)."""
        return UpstreamRef(
            name=self.name,
            upstream_id=self.pk,
            url=self.url,
            mode=self.mode,
            transport=self.transport,
            timeout_seconds=self.timeout_seconds,
            prefix=self.prefix,
            remote=remote,
            secrets=self.secret_headers,
            oauth=tuple(sorted(self.oauth().items())),
            connection=self.connection,
            completions="completions" in (self.last_capabilities or {}),
            size=size if isinstance(size, int) and not isinstance(size, bool) else None,
        )

    def pin_published(self) -> bool:
        """Match the pins to the switches: a kind turned on pins what was offered (once something was);
        a kind turned off drops its pin. Whether the pins changed.

        Here, so the admin's form, the API, an import and the sync all pin the same way.
        """
        pinned = dict(self.pinned_extras or {})
        offered = self.offered_extras or {}
        for switch, kinds in EXTRA_KINDS.items():
            for kind in kinds:
                if not getattr(self, switch):
                    pinned.pop(kind, None)
                elif kind not in pinned and isinstance(offered.get(kind), list):
                    pinned[kind] = offered[kind]
        changed = pinned != (self.pinned_extras or {})
        self.pinned_extras = pinned
        return changed

    def extras_pending(self) -> dict[str, list[str]]:
        """Per published kind, the items (by name or URI) the upstream now offers otherwise than pinned."""
        pending: dict[str, list[str]] = {}
        offered = self.offered_extras or {}
        for kind, pinned in (self.pinned_extras or {}).items():
            if not isinstance(offered.get(kind), list):
                continue  # not offered since it was pinned (a sync failed, or never ran): nothing to say
            old, new = extras_by_key(kind, pinned), extras_by_key(kind, offered[kind])
            changed = [
                key
                for key in sorted(old.keys() | new.keys())
                if comparable_extra(old.get(key)) != comparable_extra(new.get(key))
            ]
            if changed:
                pending[kind] = changed
        return pending


# What an owner sets of an upstream, in the order it is shown: the admin's form (after its tenant) and a
# tenant document's entry (portability/document.py) carry these and no other (AMB-314).
UPSTREAM_SETTINGS = (
    "name", "url", "transport", "prefix", "mode", "timeout_seconds", "enabled", "publish_new", "publish_prompts",
    "publish_resources", "oauth_client_id", "oauth_token_url", "oauth_scope", "connection",
)  # fmt: skip


def too_many_upstreams(cap: int) -> str:
    return f"A tenant may have at most {cap} upstream servers (MCP_UPSTREAMS_PER_TENANT); remove one first."


class UpstreamTool(models.Model):
    """One tool an upstream offers (or offered): its current definition and, once published, the pinned one."""

    # The tenant again (it is the upstream's), so the tenant wall's policy binds these rows too.
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    upstream = models.ForeignKey(Upstream, on_delete=models.CASCADE, related_name="remote_tools")
    remote_name = models.CharField(max_length=128)
    offered = models.JSONField(default=dict, help_text="The upstream's current Tool definition (wire shape).")
    pinned = models.JSONField(
        null=True,
        blank=True,
        help_text="The definition as published or last accepted (wire shape, remote name).",
    )
    tool = models.OneToOneField(
        "mcp_app.Tool", null=True, blank=True, on_delete=models.SET_NULL, related_name="upstream_tool"
    )
    first_seen_at = models.DateTimeField(auto_now_add=True)
    last_seen_at = models.DateTimeField()
    # Set when the upstream stopped offering it; its published tool is then disabled (AMB-162).
    gone_at = models.DateTimeField(null=True, blank=True)
    # Its published tool was disabled by a sync because it was gone; a sync that sees it again enables it.
    withdrawn = models.BooleanField(default=False)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["upstream", "remote_name"]
        constraints = [
            models.UniqueConstraint(
                fields=["upstream", "remote_name"], name="unique_remote_tool_per_upstream"
            )
        ]

    def __str__(self) -> str:
        return f"{self.upstream.name}/{self.remote_name}"

    def clean(self) -> None:
        if self.upstream_id and self.tenant_id != self.upstream.tenant_id:
            raise ValidationError("A remote tool belongs to its upstream's tenant.")

    @property
    def published(self) -> bool:
        return self.tool_id is not None

    @property
    def pending_review(self) -> bool:
        """Published, and the upstream now offers another definition than the pinned one."""
        return (
            self.published and self.gone_at is None and _comparable(self.offered) != _comparable(self.pinned)
        )


# One column per bucket of the federation's latency histogram (federation/health.py BOUNDS_MS: 13
# bounds, one more bucket for the rest); fixed, so every process's counts add into the same columns.
HEALTH_LATENCY_FIELDS = tuple(f"h_{i:02d}" for i in range(14))
FAILURE_FIELDS = ("unavailable", "error", "timeout", "busy")


class UpstreamHealth(models.Model):
    """One upstream's exchanges in one UTC minute, summed over every serving and worker process (AMB-185).

    Written by the usage flush as increments (INSERT .. ON CONFLICT DO UPDATE SET x = x + new), so
    processes add into the same row without reading it; pruned after a day.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    upstream = models.ForeignKey(Upstream, on_delete=models.CASCADE, related_name="+")
    minute = models.BigIntegerField(help_text="Start of the minute, in minutes since the Unix epoch (UTC).")
    calls = models.BigIntegerField(default=0)
    unavailable = models.BigIntegerField(default=0)
    error = models.BigIntegerField(default=0)
    timeout = models.BigIntegerField(default=0)
    busy = models.BigIntegerField(default=0)
    duration_ms = models.FloatField(default=0, help_text="Sum of the latencies of the answered exchanges.")
    h_00 = models.BigIntegerField(default=0)
    h_01 = models.BigIntegerField(default=0)
    h_02 = models.BigIntegerField(default=0)
    h_03 = models.BigIntegerField(default=0)
    h_04 = models.BigIntegerField(default=0)
    h_05 = models.BigIntegerField(default=0)
    h_06 = models.BigIntegerField(default=0)
    h_07 = models.BigIntegerField(default=0)
    h_08 = models.BigIntegerField(default=0)
    h_09 = models.BigIntegerField(default=0)
    h_10 = models.BigIntegerField(default=0)
    h_11 = models.BigIntegerField(default=0)
    h_12 = models.BigIntegerField(default=0)
    h_13 = models.BigIntegerField(default=0)
    last_success = models.DateTimeField(null=True, blank=True, help_text="The latest any process saw.")

    objects = TenantQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["upstream", "minute"], name="upstream_health_key")]
        indexes = [models.Index(fields=["minute"], name="upstream_health_minute")]

    def __str__(self) -> str:
        return f"{self.upstream_id} @{self.minute}"


class UpstreamCircuit(models.Model):
    """One serving process's breaker state for one upstream, as it last reported it (AMB-185)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    upstream = models.ForeignKey(Upstream, on_delete=models.CASCADE, related_name="+")
    process = models.CharField(max_length=200)
    state = models.CharField(max_length=10)
    reported_at = models.DateTimeField()

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["process"]
        constraints = [
            models.UniqueConstraint(fields=["upstream", "process"], name="upstream_circuit_per_process")
        ]
        indexes = [models.Index(fields=["reported_at"], name="upstream_circuit_reported")]

    def __str__(self) -> str:
        return f"{self.upstream_id} {self.process}: {self.state}"


def extras_by_key(kind: str, items: Any) -> dict[str, dict[str, Any]]:
    """A list of prompts, resources or templates keyed by what names each (malformed items left out)."""
    key = EXTRA_KEYS[kind]
    if not isinstance(items, list):
        return {}
    return {item[key]: item for item in items if isinstance(item, dict) and isinstance(item.get(key), str)}


def comparable_extra(item: Any) -> Any:
    if not isinstance(item, dict):
        return item
    return {k: v for k, v in item.items() if k not in UNREVIEWED_EXTRA_FIELDS}


def _comparable(definition: Any) -> Any:
    # The fields a review compares; `execution`, `_meta` and the rest pass as the upstream sends them.
    if not isinstance(definition, dict):
        return definition
    return {key: definition.get(key) for key in REVIEWED_FIELDS}
