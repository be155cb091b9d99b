"""Tenant-defined MCP tools, prompts, resources and resource templates (their rows and versions).

Longer than 400 lines: the four definitions share one abstract base and their validators, and each is short.
"""

from __future__ import annotations

from typing import Any, ClassVar

from django.core.validators import MaxValueValidator, MinValueValidator, RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core import ui_apps
from mcp_app.core.mcp_headers import param_headers
from mcp_app.core.types import PromptDef, ResourceDef, TemplateDef, ToolDef, offered_to_legacy
from mcp_app.definitions import checks, kept_results
from mcp_app.models.upstreams import Upstream
from mcp_app.models.versioned import Versioned, VersionedQuerySet
from tenants.models import Tenant

tool_name_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,64}$",
    "Tool names are 1-64 characters of letters, digits, '_', '-' and '.'.",
)
prompt_name_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,128}$",
    "Names are 1-128 characters of letters, digits, '_', '-' and '.'.",
)

# One RFC 6749 §3.3 scope token: visible ASCII except space, double quote and backslash.
scope_token_validator = RegexValidator(
    r"^[\x21\x23-\x5B\x5D-\x7E]+$",
    "A scope is one token of visible ASCII characters without spaces, quotes or backslashes.",
)


def default_input_schema() -> dict:
    return {"type": "object", "properties": {}}


class Definition(Versioned):
    """Fields every tenant-owned MCP definition shares (drafts and versions: models/versioned.py)."""

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    title = models.CharField(max_length=200, blank=True, help_text="Human-readable display name.")
    description = models.TextField(blank=True)
    icons = models.JSONField(
        default=list, blank=True, help_text="List of MCP Icon objects {src, mimeType, sizes, theme}."
    )
    meta = models.JSONField(default=dict, blank=True, help_text="Extra _meta keys sent with the definition.")
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True


class Execution(models.TextChoices):
    INLINE = "inline", "In the server process (quick tools)"
    BACKGROUND = "background", "On a Celery worker (long tools)"


class TaskSupport(models.TextChoices):
    # Automatic: a background tool is long by nature, an inline one is quick (AMB-47).
    AUTO = "auto", "Automatic: optional for background tools, forbidden for inline ones"
    FORBIDDEN = "forbidden", "Forbidden: never run as a task"
    OPTIONAL = "optional", "Optional: the client may run it as a task"
    REQUIRED = "required", "Required: the client must run it as a task"


class Approval(models.TextChoices):
    OFF = "off", "Off: the tool runs when called"
    EVERY_TIME = "every_time", "Ask every time"
    ONCE = "once", "Ask once per session (or per signed-in caller)"


class WithoutElicitation(models.TextChoices):
    REFUSE = "refuse", "Refuse the call, saying why"
    RUN = "run", "Run it without asking"


class ToolQuerySet(VersionedQuerySet):
    def needing_scopes(self, tenant: Tenant | int) -> ToolQuerySet:
        """The tenant's tools that need a scope of their own. Enabled ones only: a disabled tool cannot
        be called, so its scope is neither offered, granted, nor checked (one rule for all three)."""
        return self.for_tenant(tenant).published().filter(enabled=True).exclude(required_scope="")


# Where a configuration given by name names its upstream (Tool.take_upstream_name).
UPSTREAM_NAME_KEY = "upstream"

# The longest a call may wait for a worker (Tool.worker_wait_seconds): a day.
WORKER_WAIT_MAX_SECONDS = 86_400
# The longest a result may be kept for its caller (Tool.result_cache_seconds): a day.
RESULT_CACHE_MAX_SECONDS = 86_400


ToolManager = models.Manager.from_queryset(ToolQuerySet)


class Tool(Definition):
    name = models.CharField(max_length=64, validators=[tool_name_validator])
    input_schema = models.JSONField(
        default=default_input_schema, help_text="JSON Schema of the arguments (object)."
    )
    output_schema = models.JSONField(
        null=True, blank=True, help_text="JSON Schema of structuredContent (object)."
    )
    annotations = models.JSONField(
        default=dict,
        blank=True,
        help_text="ToolAnnotations: title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint.",
    )
    handler = models.CharField(max_length=50, help_text="What runs when the tool is called.")
    handler_config = models.JSONField(default=dict, blank=True)
    # Fernet-encrypted JSON object of secret values (e.g. HTTP headers); never shown again.
    handler_secrets = models.TextField(blank=True, default="", editable=False)
    # The upstream a tool of the "upstream" kind is published from (AMB-310): the one reference to it, so
    # a renamed upstream keeps its tools and a deleted one takes them along (they could never answer).
    # Documents, the API and the admin name it inside the configuration instead (`wire_config`).
    upstream = models.ForeignKey(
        Upstream, null=True, blank=True, editable=False, on_delete=models.CASCADE, related_name="tools"
    )
    timeout_seconds = models.PositiveIntegerField(default=30)
    execution = models.CharField(
        max_length=20,
        choices=Execution.choices,
        default=Execution.INLINE,
        help_text="Where the tool runs. Background: on a Celery worker, for long tools; progress and "
        "log messages still reach the client, and a cancellation stops the work.",
    )
    worker_wait_seconds = models.PositiveIntegerField(
        null=True,
        blank=True,
        validators=[MinValueValidator(1), MaxValueValidator(WORKER_WAIT_MAX_SECONDS)],
        help_text="Background tools: how long a call waits for a worker to start it (the caller is told it is "
        "waiting for a worker), before it ends with an error result, unrun. Blank: the server's "
        "MCP_BACKGROUND_START_SECONDS (30 s). A few seconds fails fast; minutes suit batch work.",
    )
    result_cache_seconds = models.PositiveIntegerField(
        default=0,
        validators=[MaxValueValidator(RESULT_CACHE_MAX_SECONDS)],
        help_text="Keep a result this long and answer the same caller's same arguments from it, without "
        "running the tool (0: never). Only for a tool marked readOnlyHint and idempotentHint that runs "
        "in the server process and asks nothing. Kept per caller (its key, user or client, with its "
        "scopes); a publish, a sync or a policy change starts afresh (AMB-374).",
    )
    result_cache_shared = models.BooleanField(
        default=False,
        help_text="The result is the same for every caller: keep one for all. Your word, never the "
        "tool's or its upstream's (a result that says it is public is still kept per caller).",
    )
    required_scope = models.CharField(
        max_length=100,
        blank=True,
        validators=[scope_token_validator],
        help_text="OAuth tenants: a scope the caller's token must hold, besides mcp:tools, to call this tool "
        "(e.g. billing:write). Blank: mcp:tools is enough.",
    )
    approval = models.CharField(
        max_length=20,
        choices=Approval.choices,
        default=Approval.OFF,
        help_text="Before the tool runs, ask the person to confirm its name and arguments (elicitation). "
        "A decline returns an error result and runs nothing. Every decision is recorded.",
    )
    approval_without_elicitation = models.CharField(
        max_length=20,
        choices=WithoutElicitation.choices,
        default=WithoutElicitation.REFUSE,
        help_text="When approval is on and the client cannot ask its person (no elicitation support).",
    )

    task_support = models.CharField(
        max_length=20,
        choices=TaskSupport.choices,
        default=TaskSupport.AUTO,
        help_text="2025-11-25 clients: whether a call may return a task handle at once, its result "
        "fetched later (execution.taskSupport). 2026-07-28 clients that accept tasks get one for every "
        "call of a background tool whose support is not forbidden, and for every call of a tool whose "
        "support is required; a 2026-07-28 client that does not accept tasks cannot call such a tool.",
    )

    objects: ClassVar[ToolManager] = ToolManager()
    # Secrets stay out of history: a revert keeps today's secret values (never stored twice).
    history = HistoricalRecords(excluded_fields=["handler_secrets", "updated_at", "draft"])

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="unique_tool_name_per_tenant")]

    def __str__(self) -> str:
        return self.name

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.take_upstream_name() and kwargs.get("update_fields") is not None:
            kwargs["update_fields"] = {*kwargs["update_fields"], "handler_config", "upstream"}
        super().save(*args, **kwargs)

    def clean(self) -> None:
        # The configuration is checked as it is given and shown (its upstream by name), then resolved.
        self.handler_config = self.wire_config()
        checks.clean_tool(self)
        kept_results.check(self)
        self.take_upstream_name()

    def take_upstream_name(self) -> bool:
        """Turn the upstream's name a configuration was given in (a document, the API, the admin, an old
        history record) into the `upstream` reference. Whether anything changed.

        A name no upstream of the tenant has stays in the configuration, unresolved: such a tool answers
        nothing (the catalog leaves it out) until a sync of an upstream of that name adopts it.
        """
        config = self.handler_config if isinstance(self.handler_config, dict) else {}
        if self.handler != "upstream":
            if self.upstream_id is None:
                return False
            self.upstream = None
            return True
        name = config.get(UPSTREAM_NAME_KEY)
        if not isinstance(name, str):
            return False
        # The upstream this row already holds, when the name is its (wire_config put it there): a sync
        # publishing thousands otherwise read it back once a tool.
        held = self._state.fields_cache.get("upstream")
        if isinstance(held, Upstream) and held.tenant_id == self.tenant_id and held.name == name:
            found: Upstream | None = held
        else:
            found = Upstream.objects.filter(tenant_id=self.tenant_id, name=name).first()
        if found is None:
            self.upstream = None
            return True
        self.upstream = found
        self.handler_config = {key: value for key, value in config.items() if key != UPSTREAM_NAME_KEY}
        return True

    def wire_config(self) -> dict[str, Any]:
        """The configuration as documents, the API and the admin show it: an upstream tool's names its
        upstream (``{"upstream", "tool", "fixed"}``, schema ``handler.upstream``)."""
        config = self.handler_config if isinstance(self.handler_config, dict) else {}
        if self.handler != "upstream" or self.upstream is None:
            return config
        return {UPSTREAM_NAME_KEY: self.upstream.name, **config}

    @property
    def resolved_task_support(self) -> str:
        if self.task_support != TaskSupport.AUTO:
            return self.task_support
        return TaskSupport.OPTIONAL if self.execution == Execution.BACKGROUND else TaskSupport.FORBIDDEN

    def to_def(self) -> ToolDef:
        """The immutable definition a request works with (the catalog's one mapping of a row)."""
        return ToolDef(
            id=self.pk,
            name=self.name,
            title=self.title,
            description=self.description,
            input_schema=self.input_schema or {"type": "object"},
            output_schema=self.output_schema or None,
            annotations=self.annotations or {},
            icons=list(self.icons or []),
            meta=self.meta or {},
            handler=self.handler,
            handler_config=self.handler_config or {},
            handler_secrets=self.handler_secrets or "",
            timeout_seconds=self.timeout_seconds,
            required_scope=self.required_scope,
            execution=self.execution,
            worker_wait_seconds=self.worker_wait_seconds,
            result_cache_seconds=self.result_cache_seconds,
            result_cache_shared=self.result_cache_shared,
            approval=self.approval,
            approval_without_elicitation=self.approval_without_elicitation,
            task_support=self.resolved_task_support,
            mirrors_headers=bool(param_headers(self.input_schema or {})),
            legacy=offered_to_legacy(self.output_schema or None),
            app_only=ui_apps.app_only(self.meta),
        )


class Prompt(Definition):
    name = models.CharField(max_length=128, validators=[prompt_name_validator])
    arguments = models.JSONField(
        default=list,
        blank=True,
        help_text='List of {"name", "title", "description", "required", "completions": [values], "ask"}; '
        '"ask": true asks the person for the argument when the client leaves it out.',
    )
    messages = models.JSONField(
        default=list,
        help_text='List of {"role": "user"|"assistant", "content": {content block; text is a Django template}}.',
    )
    history = HistoricalRecords(excluded_fields=["updated_at", "draft"])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_prompt_name_per_tenant")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        checks.clean_prompt(self)

    def to_def(self) -> PromptDef:
        return PromptDef(
            id=self.pk,
            name=self.name,
            title=self.title,
            description=self.description,
            arguments=list(self.arguments or []),
            messages=list(self.messages or []),
            icons=list(self.icons or []),
            meta=self.meta or {},
        )


# Uploaded resource contents are kept in the database and sent base64-encoded to clients: the most one
# upload may hold (the admin's form and the API check it).
MAX_UPLOAD_BYTES = 10 * 1024 * 1024


class Resource(Definition):
    uri = models.CharField(max_length=2000)
    name = models.CharField(max_length=200)
    mime_type = models.CharField(max_length=200, blank=True, default="text/plain")
    text = models.TextField(blank=True, help_text="Text content; leave empty for a binary resource.")
    blob = models.BinaryField(null=True, blank=True, editable=False, help_text="Binary content (uploaded).")
    annotations = models.JSONField(default=dict, blank=True, help_text="audience, priority, lastModified.")
    history = HistoricalRecords(excluded_fields=["updated_at", "draft"])

    class Meta:
        ordering = ["uri"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "uri"], name="unique_resource_uri_per_tenant")
        ]

    def __str__(self) -> str:
        return self.uri

    def clean(self) -> None:
        checks.clean_resource(self)

    @property
    def is_binary(self) -> bool:
        return self.blob is not None

    @property
    def size(self) -> int:
        return len(self.blob) if self.blob is not None else len(self.text.encode())

    def to_def(self) -> ResourceDef:
        return ResourceDef(
            id=self.pk,
            uri=self.uri,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            text=self.text,
            blob=bytes(self.blob) if self.blob is not None else None,  # PostgreSQL hands out memoryview
            annotations=self.annotations or {},
            icons=list(self.icons or []),
            meta=self.meta or {},
        )


class ResourceTemplate(Definition):
    uri_template = models.CharField(
        max_length=2000, help_text="RFC 6570 URI template, e.g. users://{id}/profile."
    )
    name = models.CharField(max_length=200)
    mime_type = models.CharField(max_length=200, blank=True, default="text/plain")
    handler = models.CharField(max_length=50, default="template", help_text="What produces the contents.")
    handler_config = models.JSONField(default=dict, blank=True)
    completions = models.JSONField(
        default=dict, blank=True, help_text='Values offered per variable: {"id": ["1", "2"]}.'
    )
    annotations = models.JSONField(default=dict, blank=True)
    history = HistoricalRecords(excluded_fields=["updated_at", "draft"])

    class Meta:
        ordering = ["uri_template"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "uri_template"], name="unique_resource_template_per_tenant"
            )
        ]

    def __str__(self) -> str:
        return self.uri_template

    def clean(self) -> None:
        checks.clean_resource_template(self)

    def to_def(self) -> TemplateDef:
        return TemplateDef(
            id=self.pk,
            uri_template=self.uri_template,
            name=self.name,
            title=self.title,
            description=self.description,
            mime_type=self.mime_type,
            handler=self.handler,
            handler_config=self.handler_config or {},
            completions=self.completions or {},
            annotations=self.annotations or {},
            icons=list(self.icons or []),
            meta=self.meta or {},
        )
