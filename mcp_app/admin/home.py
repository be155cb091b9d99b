"""The admin's home page: the signed-in person's MCP servers first (AMB-270).

For each tenant they belong to: its MCP URL (with a copy button), how many tools, prompts, resources
and resource templates it defines (with those waiting to be published), its calls and errors of the
last 24 hours, the health of its upstream servers, and the pages an owner goes to next. Django's list
of every model stays below it (`templates/admin/index.html`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import HttpRequest
from django.urls import reverse

from mcp_app.drafts import service as drafts
from mcp_app.federation import breaker
from mcp_app.models import Definition, Prompt, Resource, ResourceTemplate, Tool, Upstream
from mcp_app.oauth.resources import canonical_uri
from mcp_app.upstreams import deployment_health
from mcp_app.usage import queries
from tenants import access
from tenants.models import EDIT_ROLES, Role, Tenant

# Each kind of definition: (key, label of one, model).
DEFINITIONS: tuple[tuple[str, str, type[Definition]], ...] = (
    ("tools", "tool", Tool),
    ("prompts", "prompt", Prompt),
    ("resources", "resource", Resource),
    ("templates", "resource template", ResourceTemplate),
)
# A superuser sees every tenant; past this many the home links to the tenant list instead.
MAX_TENANTS = 12
USAGE_WINDOW = "day"


@dataclass(frozen=True, slots=True)
class DefinitionCount:
    label: str
    total: int
    drafts: int
    url: str


@dataclass(frozen=True, slots=True)
class UpstreamState:
    name: str
    state: str  # "ok", "failing", "idle" or "disabled": the page's colour
    words: str
    url: str


@dataclass(slots=True)
class TenantHome:
    tenant: Tenant
    role: str
    mcp_url: str
    definitions: list[DefinitionCount] = field(default_factory=list)
    calls: int = 0
    errors: int = 0
    upstreams: list[UpstreamState] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)

    @property
    def drafts(self) -> int:
        return sum(d.drafts for d in self.definitions)


def draft_counts(tenant: Tenant) -> dict[str, int]:
    """Per kind of definition, how many wait to be published: a pending draft, or never published (AMB-218)."""
    return {
        key: model.objects.filter(tenant=tenant).filter(drafts.WAITING).count() for key, _label, model in DEFINITIONS
    }


def _definitions(tenant: Tenant) -> list[DefinitionCount]:
    waiting = draft_counts(tenant)
    return [
        DefinitionCount(
            label,
            model.objects.filter(tenant=tenant).count(),
            waiting[key],
            f"{reverse(f'admin:mcp_app_{model._meta.model_name}_changelist')}?tenant__id__exact={tenant.pk}",
        )
        for key, label, model in DEFINITIONS
    ]


def upstream_state(upstream: Upstream) -> UpstreamState:
    """One line on an upstream server: what every process reported of it in the last hour."""
    url = reverse("admin:mcp_app_upstream_change", args=[upstream.pk])
    if not upstream.enabled:
        return UpstreamState(upstream.name, "disabled", "disabled", url)
    seen = deployment_health.of(upstream)
    totals = seen.totals
    open_in = sum(1 for c in seen.fresh if c.state == breaker.OPEN)
    if open_in:
        words = f"unreachable: calls fail fast in {open_in} process{'es' if open_in > 1 else ''}"
        return UpstreamState(upstream.name, "failing", words, url)
    if not totals.calls:
        return UpstreamState(upstream.name, "idle", "no calls in the last hour", url)
    words = f"{totals.calls} call{'s' if totals.calls != 1 else ''} in the last hour, {totals.failed} failed"
    return UpstreamState(upstream.name, "failing" if totals.failed else "ok", words, url)


def _links(tenant: Tenant, role: str) -> list[tuple[str, str]]:
    tools = f"{reverse('admin:mcp_app_tool_changelist')}?tenant__id__exact={tenant.pk}"
    links = [
        ("Connect a client", reverse("tenant-connect", kwargs={"slug": tenant.slug})),
        ("Usage dashboard", reverse("tenant-dashboard", kwargs={"slug": tenant.slug})),
        ("Tools", tools),
    ]
    if role in EDIT_ROLES:
        links += [
            ("Export", reverse("admin-portability:export", args=[tenant.pk])),
            ("Import", reverse("admin-portability:import", args=[tenant.pk])),
        ]
    links += [
        ("API tokens", reverse("api-tokens")),
        ("Settings", reverse("admin:tenants_tenant_change", args=[tenant.pk])),
    ]
    return links


def tenant_homes(request: HttpRequest) -> tuple[list[TenantHome], int]:
    """The signed-in person's tenants as the home shows them, and how many more a superuser has."""
    roles = access.roles_of(request.user)  # None: a superuser, owner of every tenant
    rows = Tenant.objects.order_by("slug")
    if roles is not None:
        rows = rows.filter(pk__in=roles)
    total = rows.count()
    tenants = list(rows[:MAX_TENANTS])
    usage = queries.per_tenant(USAGE_WINDOW)
    upstreams: dict[int, list[Upstream]] = {}
    for upstream in Upstream.objects.filter(tenant__in=tenants).order_by("name"):
        upstreams.setdefault(upstream.tenant_id, []).append(upstream)
    homes = []
    for tenant in tenants:
        role = Role.OWNER if roles is None else roles[tenant.pk]
        totals = usage.get(tenant.pk, queries.Totals())
        homes.append(
            TenantHome(
                tenant=tenant,
                role=role,
                mcp_url=canonical_uri(tenant.slug),
                definitions=_definitions(tenant),
                calls=totals.calls,
                errors=totals.failed,
                upstreams=[upstream_state(u) for u in upstreams.get(tenant.pk, [])],
                links=_links(tenant, role),
            )
        )
    return homes, total - len(tenants)
