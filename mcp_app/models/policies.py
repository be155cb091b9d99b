"""A tenant's policies: who may use which tool, prompt or resource with which arguments (AMB-347)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core.types import PolicyDef
from mcp_app.governance.conditions import ConditionError, compile_condition
from tenants.models import Tenant, TenantQuerySet

# More would be a tenant's way to make every list slow, not a policy: refused when saved.
MAX_POLICIES_PER_TENANT = 200

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


class Policy(models.Model):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64, validators=[policy_name_validator])
    description = models.TextField(blank=True)
    effect = models.CharField(max_length=8, choices=Effect.choices, default=Effect.DENY)
    applies_to = models.CharField(max_length=16, choices=AppliesTo.choices, default=AppliesTo.ALL)
    condition = models.TextField(
        default="true",
        help_text="A CEL expression over `caller` (auth, user, role, subject, client_id, scopes, address), `target` "
        "(kind, name, upstream, annotations, uri) and `arguments`, e.g. "
        "`target.annotations.destructiveHint == true && caller.auth == \"api_key\"`.",
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = TenantQuerySet.as_manager()
    history = HistoricalRecords(excluded_fields=["updated_at"])

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "policies"
        constraints = [models.UniqueConstraint(fields=["tenant", "name"], name="unique_policy_name_per_tenant")]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        try:
            self.condition = compile_condition(self.condition).source
        except ConditionError as exc:
            raise ValidationError({"condition": str(exc)}) from None
        adding = self.tenant_id is not None and self._state.adding
        if adding and Policy.objects.filter(tenant_id=self.tenant_id).count() >= MAX_POLICIES_PER_TENANT:
            raise ValidationError(f"A tenant has at most {MAX_POLICIES_PER_TENANT} policies.")

    def to_def(self) -> PolicyDef:
        return PolicyDef(name=self.name, effect=self.effect, applies_to=self.applies_to, condition=self.condition)
