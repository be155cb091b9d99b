"""Tenants and who may manage them.

Longer than 400 lines: a tenant's settings are one model's fields, each with the help an owner reads.
"""

from __future__ import annotations

from typing import Any, Self

from django.conf import settings
from django.core.validators import MaxValueValidator, RegexValidator
from django.db import models
from django.db.models import F
from django.utils import timezone
from oauth2_provider.settings import oauth2_settings

from tenants import identity_provider
from tenants.audit_sampling import validate_sampling
from tenants.sso_rules import validate_domains, validate_groups


class Role(models.TextChoices):
    OWNER = "owner", "Owner"
    EDITOR = "editor", "Editor"
    VIEWER = "viewer", "Viewer"


class AuthMode(models.TextChoices):
    OAUTH = "oauth", "OAuth (bearer token of a member required)"
    PUBLIC = "public", "Public (no authorization)"


class ToolDiscovery(models.TextChoices):
    FULL = "full", "Full (tools/list lists every tool)"
    SEARCH = "search", "Search (a search, a browse and a call instead of every tool)"
    AUTO = "auto", "Automatic (search past 40 tools)"


class CacheScope(models.TextChoices):
    AUTO = "auto", "Automatic (private for OAuth tenants, public otherwise)"
    PUBLIC = "public", "Public (shared caches may serve any caller)"
    PRIVATE = "private", "Private (cached per access token only)"


class SsoRole(models.TextChoices):
    """The roles single sign-on may give: never owner (AMB-213)."""

    EDITOR = Role.EDITOR.value, "Editor"
    VIEWER = Role.VIEWER.value, "Viewer"


class GrantedBy(models.TextChoices):
    """How a membership came to be; only single sign-on's own are ever taken away by it (AMB-213)."""

    HAND = "hand", "By an owner or an administrator"
    INVITATION = "invitation", "By invitation"
    SSO = "sso", "By single sign-on"


# Roles that may change a tenant's definitions.
EDIT_ROLES = frozenset({Role.OWNER, Role.EDITOR})

slug_validator = RegexValidator(
    r"^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$",
    "Use 1-63 lower-case letters, digits and hyphens, not starting or ending with a hyphen.",
)


class Tenant(models.Model):
    """One hosted MCP server, served at /t/<slug>/mcp."""

    slug = models.CharField(max_length=63, unique=True, validators=[slug_validator])
    name = models.CharField(max_length=200, help_text="serverInfo.name sent to clients.")
    title = models.CharField(max_length=200, blank=True, help_text="serverInfo.title (human-readable).")
    description = models.TextField(
        blank=True, help_text="serverInfo.description (2025-11-25 and later clients)."
    )
    server_version = models.CharField(max_length=50, default="1.0.0", help_text="serverInfo.version.")
    website_url = models.URLField(blank=True)
    icons = models.JSONField(default=list, blank=True, help_text="List of MCP Icon objects.")
    instructions = models.TextField(
        blank=True, help_text="Sent in the initialize and server/discover results."
    )
    allowed_origins = models.TextField(
        blank=True,
        help_text="Browser origins allowed to call this endpoint, one per line (e.g. https://app.example.com).",
    )
    is_active = models.BooleanField(default=True)
    auth_mode = models.CharField(
        max_length=10,
        choices=AuthMode.choices,
        default=AuthMode.OAUTH,
        help_text="OAuth: every MCP request needs a bearer token issued to a member for this endpoint. "
        "Public: anyone who can reach the endpoint may use it.",
    )
    # Caching hints of 2026-07-28 results (ttlMs, cacheScope on lists, resources/read, server/discover).
    cache_ttl_ms = models.PositiveIntegerField(
        default=60_000,
        help_text="How long (milliseconds) 2026-07-28 clients may treat a list, a resource read or "
        "server/discover as fresh. Edits still reach listening clients at once. 0: always re-fetch.",
    )
    # Tasks (tools/call answered with a task handle, protocol/tasks.py): how long a task and its result
    # are kept; a client's requested ttl is capped by it.
    task_ttl_seconds = models.PositiveIntegerField(
        default=3600,
        help_text="How long (seconds) a tool call run as a task keeps its status and result for its "
        "caller to fetch; a client asking for longer gets this. Expired tasks are deleted.",
    )
    # Quotas (mcp_app/protocol/quotas.py): tool calls per minute, enforced across every process; 0: none.
    calls_per_minute = models.PositiveIntegerField(
        default=0,
        help_text="Tool calls per minute for the whole server, every caller and tool together. 0: no quota.",
    )
    calls_per_minute_per_tool = models.PositiveIntegerField(
        default=0, help_text="Calls per minute of any one tool, every caller together. 0: no quota."
    )
    calls_per_minute_per_caller = models.PositiveIntegerField(
        default=0,
        help_text="Tool calls per minute of one caller: an OAuth user (or client), else a session, else an "
        "address. 0: no quota.",
    )
    max_sessions = models.PositiveIntegerField(
        default=0,
        help_text="Open sessions (2025-11-25 and older clients) at once. Past it, the least recently used "
        "session of the client holding the most gives way to a client with fewer; otherwise the new one is "
        "refused with HTTP 429. Each client also has MCP_SESSIONS_PER_CLIENT. 0: no cap.",
    )
    max_background_runs = models.PositiveIntegerField(
        default=0,
        help_text="Background runs queued or running at once; a call past it is refused with a "
        "retryAfter. 0: no cap.",
    )
    max_streams = models.PositiveIntegerField(
        default=0,
        help_text="Open streams (SSE: sessions' GET streams, long answers, subscriptions/listen) at "
        "once for the whole server; a new one past it is refused with HTTP 429, and a POST answer "
        "comes as JSON without its progress. 0: no cap.",
    )
    max_streams_per_session = models.PositiveIntegerField(
        default=0,
        help_text="Open streams of one session (2025-11-25 and older clients) at once: its GET "
        "stream and its POSTs answered as SSE. Refused as above. 0: no cap.",
    )
    max_body_bytes = models.PositiveIntegerField(
        default=0,
        help_text="Largest request body in bytes (HTTP 413 above); never more than the operator's "
        "MCP_MAX_BODY_BYTES. 0: that limit.",
    )
    # Polling (streams/polling.py, AMB-128): a long answer's SSE stream closed after this long, the
    # client resuming with Last-Event-ID; for sessions of 2025-11-25 and later only.
    stream_poll_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(3600)],
        help_text="Close a long answer's stream (SSE) after this many seconds and let the client poll: "
        "it comes back for the rest with Last-Event-ID. For proxies that cut long or idle connections; "
        "2025-11-25 and later clients only (older ones keep theirs open). At most 3600. 0: never.",
    )
    stream_poll_retry_ms = models.PositiveIntegerField(
        default=1000,
        validators=[MaxValueValidator(60_000)],
        help_text="How long (milliseconds) a polling client waits before it comes back (the SSE retry "
        "field). At most 60000.",
    )
    cache_scope = models.CharField(
        max_length=10,
        choices=CacheScope.choices,
        default=CacheScope.AUTO,
        help_text="Who may cache those results. Automatic: private for OAuth tenants (what a caller "
        "sees depends on the token), public for public ones.",
    )
    identity = models.JSONField(
        default=dict,
        blank=True,
        help_text="Accept access tokens of your own identity provider (empty: only this platform's). "
        '{"issuer": "https://idp.example.com", "audience": "<the aud of tokens for this endpoint>", '
        '"jwks_uri": "https://idp.example.com/jwks"} for JWTs, or "introspection_url" and "client_id" '
        '(and the client secret) for opaque tokens; optional "scope_claim" ("scope" or "scp"), '
        '"algorithms" (["RS256"]), "keep_platform_tokens" (false). Needs auth mode OAuth.',
    )
    # Fernet-encrypted secret of the introspection client (mcp_app/handlers/secrets.py); never shown.
    identity_client_secret = models.TextField(blank=True, default="", editable=False)
    # Single sign-on (tenants/sso_memberships.py, AMB-213): who the platform's identity provider makes a member here.
    sso_email_domains = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_domains],
        help_text='E-mail domains (e.g. ["example.com"]) whose people, signed in with the platform\'s '
        "single sign-on and a verified address, become members with the role below.",
    )
    sso_groups = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_groups],
        help_text="Group names the identity provider asserts (its groups claim) whose people become members "
        "with the role below.",
    )
    sso_role = models.CharField(
        max_length=10,
        choices=SsoRole.choices,
        default=SsoRole.VIEWER,
        help_text="The role single sign-on gives (never owner). A membership it gave goes when the rule no "
        "longer matches at the person's next sign-in; one given by hand or by invitation stays.",
    )
    # The share of each kind of governance event kept (tenants/audit_sampling.py, AMB-360).
    audit_sampling = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_sampling],
        help_text='The percent of governance events kept, by kind (denied, blocked, redacted, audited, '
        'throttled); a kind not named keeps every event. E.g. {"audited": 10} keeps one audit-only '
        "finding in ten. A kept event says it was sampled.",
    )
    # The platform's MCP Registry (mcp_app/registry/, AMB-372): off, the server is in no list and its
    # server.json answers 404 like a missing tenant's; the owner decides who may discover it.
    registry_listed = models.BooleanField(
        "listed in the registry",
        default=False,
        help_text="List this server in the platform's MCP Registry (/v0.1/servers) and serve its "
        "server.json at /t/<slug>/server.json, so registry clients can find it. Anyone can read "
        "those; what the server serves still needs its auth mode.",
    )
    # How clients find its tools (mcp_app/protocol/discovery.py, AMB-376): every tool in tools/list, or
    # a search, a browse and a call in their stead; "auto" searches past SEARCH_PAST_TOOLS tools.
    tool_discovery = models.CharField(
        "tool discovery",
        max_length=8,
        choices=ToolDiscovery.choices,
        default=ToolDiscovery.FULL,
        help_text="Full: tools/list lists every tool. Search: it lists three tools instead (search_tools, "
        "browse_tools, call_tool) with which a model finds and calls any tool it may use; for catalogs too "
        "big for a model's context. Auto: search once the server has more than 40 tools. A client can ask "
        "for either with ?tools=full or ?tools=search on the MCP URL.",
    )
    # Bumped on every change to the tenant's definitions; drives caches and list_changed.
    definitions_version = models.PositiveBigIntegerField(default=1, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]

    def __str__(self) -> str:
        return self.slug

    @property
    def origin_list(self) -> list[str]:
        return [
            line.strip().rstrip("/").lower() for line in self.allowed_origins.splitlines() if line.strip()
        ]

    def clean(self) -> None:
        super().clean()
        identity_provider.check(self.identity)

    def bump_version(self) -> None:
        Tenant.objects.filter(pk=self.pk).update(definitions_version=F("definitions_version") + 1)


class Membership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    granted_by = models.CharField(max_length=10, choices=GrantedBy.choices, default=GrantedBy.HAND)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "tenant"], name="unique_membership")]

    def __str__(self) -> str:
        return f"{self.user} → {self.tenant} ({self.role})"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk and self.granted_by == GrantedBy.SSO:
            before = Membership.objects.filter(pk=self.pk).values_list("role", flat=True).first()
            if before is not None and before != self.role:
                # Single sign-on never changes a role: someone did, and the membership is theirs now (AMB-213).
                self.granted_by = GrantedBy.HAND
                if kwargs.get("update_fields") is not None:
                    kwargs["update_fields"] = {*kwargs["update_fields"], "granted_by"}
        super().save(*args, **kwargs)


class TenantQuerySet(models.QuerySet):
    """Base queryset for every tenant-owned model."""

    def for_tenant(self, tenant: Tenant | int) -> Self:
        return self.filter(tenant=tenant)


class InvitationQuerySet(TenantQuerySet):
    def pending(self) -> Self:
        return self.with_status("pending")

    def with_status(self, status: str) -> Self:
        """Invitations in one state (Invitation.Status); an unknown state matches nothing."""
        now = timezone.now()
        open_ = self.filter(accepted_at=None, revoked_at=None)
        return {
            "pending": lambda: open_.filter(expires_at__gt=now),
            "expired": lambda: open_.filter(expires_at__lte=now),
            "accepted": lambda: self.exclude(accepted_at=None),
            "revoked": lambda: self.filter(accepted_at=None).exclude(revoked_at=None),
        }.get(status, self.none)()


class Invitation(models.Model):
    """An e-mail address invited into a tenant with a role (AMB-105); its link is signed, never stored."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField(max_length=254, help_text="The address the invitation is sent to.")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.VIEWER)
    invited_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = InvitationQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["tenant", "created_at"], name="invitation_tenant_time")]

    def __str__(self) -> str:
        return f"{self.email} → {self.tenant} ({self.role})"

    @property
    def status(self) -> str:
        if self.accepted_at is not None:
            return self.Status.ACCEPTED
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if self.expires_at <= timezone.now():
            return self.Status.EXPIRED
        return self.Status.PENDING


class ServiceClient(models.Model):
    """A confidential OAuth client a tenant's owner made for a program with no browser (AMB-197).

    It uses the client credentials grant at our token endpoint and gets tokens for this tenant's
    endpoint only, acting as its application's user (a member: the token is refused the moment that
    user stops being one) with at most ``scope``. The secret is shown once and stored hashed by
    django-oauth-toolkit; deleting the row's application revokes the client and its tokens.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="service_clients")
    application = models.OneToOneField(
        oauth2_settings.APPLICATION_MODEL, on_delete=models.CASCADE, related_name="service_client"
    )
    scope = models.CharField(
        max_length=1000, help_text="The scopes its tokens may carry, space-separated (the most a token gets)."
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = TenantQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.application.name} → {self.tenant}"


class ApiKeyQuerySet(TenantQuerySet):
    def usable(self) -> Self:
        """Keys not revoked and not expired."""
        return self.filter(revoked_at=None, expires_at__gt=timezone.now())


class ApiKey(models.Model):
    """A key a headless client sends as `Authorization: Bearer mcpk_…` to one tenant's endpoint (AMB-202).

    It acts as its member ``user`` (refused the moment that user stops being one) or, with no user, as
    the tenant's own service identity; with at most ``scope``, until ``expires_at``, from the listed
    addresses only. Only the SHA-256 of the key is stored; ``prefix`` is the part shown to tell keys apart.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=100, help_text="What uses it, e.g. “nightly CI”.")
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.CASCADE,
        related_name="api_keys",
        help_text="The member it acts as; empty: the tenant's own service identity.",
    )
    prefix = models.CharField(max_length=16, editable=False, help_text="The key's first characters.")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    scope = models.CharField(
        max_length=1000, help_text="The scopes it carries, space-separated (per-tool scopes included)."
    )
    allowed_addresses = models.TextField(
        blank=True,
        help_text="Addresses or networks (CIDR) it may be used from, one per line; empty: any.",
    )
    expires_at = models.DateTimeField()
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ApiKeyQuerySet.as_manager()

    class Meta:
        verbose_name = "API key"
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.name})"

    @property
    def acts_as(self) -> str:
        return self.user.get_username() if self.user is not None else "the tenant (service identity)"

    @property
    def status(self) -> str:
        if self.revoked_at is not None:
            return "revoked"
        return "expired" if self.expires_at <= timezone.now() else "active"
