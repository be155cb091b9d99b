"""A tenant's policies: who may use which tool, prompt or resource with which arguments (AMB-347)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core.types import PolicyDef
from mcp_app.definitions import checks, rules
from mcp_app.governance import reach
from mcp_app.governance.conditions import ConditionError, compile_condition
from mcp_app.governance.decision import caller_dict, compile_all, split_of, target_dict
from mcp_app.models.definitions import Prompt, Resource, ResourceTemplate, Tool
from mcp_app.models.versioned import Versioned
from tenants.models import Membership, Tenant

# More would be a tenant's way to make every list slow, not a policy: refused when saved.
MAX_POLICIES_PER_TENANT = 200
NO_TOOL_LEFT_PUBLISHED = (
    "After publishing, no member of the tenant would have a single tool in its list. Confirm that this is "
    "meant (the admin's \"Publish though no member keeps a tool\"; the API's confirm_no_tools: true) to publish it."
)
NO_TOOL_LEFT = (
    "After this policy no member of the tenant would have a single tool in its list. Confirm that this "
    "is meant (the admin's \"Save though no member keeps a tool\"; the API's confirm_no_tools: true) to save it."
)

policy_name_validator = RegexValidator(
    r"^[A-Za-z0-9_.-]{1,64}$", "Policy names are 1-64 characters of letters, digits, '_', '-' and '.'."
)


class Effect(models.TextChoices):
    ALLOW = "allow", "Allow (when allow policies exist, a use needs one that holds)"
    DENY = "deny", "Deny (wins over every allow)"


class AppliesTo(models.TextChoices):
    ALL = "all", "Tools, prompts and resources"
    TOOLS = "tools", "Tools"
    PROMPTS = "prompts", "Prompts"
    RESOURCES = "resources", "Resources and resource templates"


class Policy(Versioned):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64, validators=[policy_name_validator])
    description = models.TextField(blank=True)
    effect = models.CharField(max_length=8, choices=Effect.choices, default=Effect.DENY)
    applies_to = models.CharField(max_length=16, choices=AppliesTo.choices, default=AppliesTo.ALL)
    condition = models.TextField(
        default="true",
        help_text="A CEL expression over `caller` (auth, user, role, subject, client_id, scopes, address), `target` "
        "(kind, name, upstream, annotations, uri) and `arguments`, e.g. "
        '`target.annotations.destructiveHint == true && caller.auth == "api_key"`. A call whose arguments hold '
        "more than 1,000 values of what the policy reads fails it closed (a deny holds, an allow does not).",
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = HistoricalRecords(excluded_fields=["updated_at"])

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_policy_name_per_tenant")
        ]

    # Whether the owner confirmed a save after which no member keeps a tool (governance/reach.py): the
    # admin's form and the API ask, and refuse without it; None, not asked (an import, the shell).
    confirm_no_tools: bool | None = None

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            condition = compile_condition(self.condition)
        except ConditionError as exc:
            raise ValidationError({"condition": str(exc)}) from None
        self.condition = condition.source
        # The cap first: a tenant at it is refused before its members, targets and other policies are
        # read and evaluated for the checks below (the 201st policy cost all of them, then was refused).
        rules.governance_rule(self, MAX_POLICIES_PER_TENANT, "policies")
        asked = self.confirm_no_tools is False
        if self.tenant_id is None or not self.enabled or (condition.uses_arguments and not asked):
            return
        callers, targets = self._callers(), self._targets()  # read once for both checks below
        if not condition.uses_arguments:
            kinds = "tools, prompts and resources" if self.applies_to == AppliesTo.ALL else self.applies_to
            why = reach.problem(condition, self.effect == Effect.DENY, callers, targets, kinds)
            if why is not None:
                raise ValidationError({"condition": why})
        if asked and self._keeps_no_member_a_tool(callers, targets):
            raise ValidationError({"condition": NO_TOOL_LEFT})

    def _keeps_no_member_a_tool(self, callers: list[dict[str, Any]], targets: list[dict[str, Any]]) -> bool:
        """Whether, with this policy as saved beside the tenant's other enabled ones, no member would
        have a single tool in its list (`callers` and `targets` as `_callers` and `_targets` give them)."""
        if self.applies_to not in (AppliesTo.ALL, AppliesTo.TOOLS):
            return False
        # Beside what is live: the others' drafts are not, until they are published (AMB-362).
        others = Policy.objects.published().filter(tenant_id=self.tenant_id, enabled=True).exclude(pk=self.pk)
        return _no_tool_left([*(p.to_def() for p in others[:MAX_POLICIES_PER_TENANT]), self.to_def()], callers, targets)

    def _callers(self) -> list[dict[str, Any]]:
        """Callers a condition is tried on when saved (governance/reach.py): each member as an OAuth
        client and through an API key, anonymous, an identity provider's user."""
        callers = [caller_dict("anonymous"), caller_dict("identity_provider", subject="someone@example.com")]
        for user_id, role in Membership.objects.filter(tenant_id=self.tenant_id).values_list(
            "user_id", "role"
        )[:50]:
            callers.append(caller_dict("oauth", user_id, role, client_id="client"))
            callers.append(caller_dict("api_key", user_id, role, client_id="api-key:0"))
        return callers

    def _targets(self) -> list[dict[str, Any]]:
        """The tenant's enabled targets of the kinds this policy applies to (at most reach.MAX_TARGETS each)."""
        limit, found = reach.MAX_TARGETS, []
        everything = self.applies_to == AppliesTo.ALL
        if everything or self.applies_to == AppliesTo.TOOLS:
            rows = Tool.objects.filter(tenant_id=self.tenant_id, enabled=True).select_related("upstream")[
                :limit
            ]
            found += [
                target_dict("tool", t.name, t.upstream.name if t.upstream else "", t.annotations)
                for t in rows
            ]
            found += [
                target_dict("tool", name) for name in sorted(checks.tools_alongside())
            ]  # an import's own
        if everything or self.applies_to == AppliesTo.PROMPTS:
            found += [target_dict("prompt", name) for name in
                      Prompt.objects.filter(tenant_id=self.tenant_id, enabled=True).values_list("name", flat=True)[:limit]]  # fmt: skip
        if everything or self.applies_to == AppliesTo.RESOURCES:
            found += [target_dict("resource", name, uri=uri) for name, uri in
                      Resource.objects.filter(tenant_id=self.tenant_id, enabled=True).values_list("name", "uri")[:limit]]  # fmt: skip
            found += [target_dict("template", name, uri=uri) for name, uri in ResourceTemplate.objects.filter(
                tenant_id=self.tenant_id, enabled=True).values_list("name", "uri_template")[:limit]]  # fmt: skip
        return found

    def to_def(self) -> PolicyDef:
        return PolicyDef(
            name=self.name, effect=self.effect, applies_to=self.applies_to, condition=self.condition
        )


def _no_tool_left(defs: list[PolicyDef], callers: list[dict[str, Any]], targets: list[dict[str, Any]]) -> bool:
    members = [c for c in callers if c["auth"] in ("oauth", "api_key")]
    return reach.keeps_no_tool(split_of(compile_all(defs), "tools"), members, [t for t in targets if t["kind"] == "tool"])


def leaves_no_member_a_tool(tenant_id: int) -> bool:
    """Whether, under the tenant's published and enabled policies, no member has a single tool in its
    list: asked when drafts are published (drafts/service.py), as a policy's save asks (AMB-356, AMB-362)."""
    rows = Policy.objects.published().filter(tenant_id=tenant_id, enabled=True)[:MAX_POLICIES_PER_TENANT]
    probe = Policy(tenant_id=tenant_id, applies_to=AppliesTo.TOOLS)  # reads the tenant's members and tools
    return _no_tool_left([p.to_def() for p in rows], probe._callers(), probe._targets())
