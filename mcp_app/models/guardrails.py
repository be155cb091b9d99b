"""A tenant's guardrails: what may flow in and out of its tools, prompts and resources (AMB-354).
Run by governance/guardrails.py."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from simple_history.models import HistoricalRecords

from mcp_app.core.types import GuardrailDef
from mcp_app.definitions import rules
from mcp_app.governance.detectors import MAX_PATTERN_CHARS, PatternError, compile_pattern
from mcp_app.models.policies import policy_name_validator
from mcp_app.models.versioned import Versioned
from tenants.models import Tenant

# Each guardrail is a scan of every argument or result it guards: more would make every call slow.
MAX_GUARDRAILS_PER_TENANT = 20


class Detector(models.TextChoices):
    SECRETS = "secrets", "Secrets (API keys, tokens, private keys: detect-secrets' patterns)"
    PERSONAL_DATA = "personal_data", "Personal data (card numbers, IBANs, e-mail addresses, phone numbers)"
    CARD = "card", "Card numbers (Luhn checksum)"
    IBAN = "iban", "IBANs (ISO 13616 checksum)"
    EMAIL = "email", "E-mail addresses"
    PHONE = "phone", "Phone numbers (international, or national with separators)"
    PATTERN = "pattern", "A pattern of your own (RE2)"


class Where(models.TextChoices):
    BOTH = "both", "Arguments and results"
    ARGUMENTS = "arguments", "Arguments (of tool calls and prompts)"
    RESULTS = "results", "Results (tool results, prompt messages, resource contents)"


class Action(models.TextChoices):
    REDACT = "redact", "Redact (replace each finding by a marker naming its kind)"
    BLOCK = "block", "Block (the use fails naming this guardrail)"
    AUDIT = "audit", "Audit only (logged, nothing changed)"


class Guardrail(Versioned):
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=64, validators=[policy_name_validator])
    description = models.TextField(blank=True)
    detector = models.CharField(max_length=16, choices=Detector.choices, default=Detector.SECRETS)
    pattern = models.TextField(
        blank=True,
        help_text=f"For a pattern of your own: an RE2 expression (no look-around or back-references; at most "
        f"{MAX_PATTERN_CHARS} characters), e.g. `INT-[0-9]{{6}}`.",
    )
    where = models.CharField(max_length=16, choices=Where.choices, default=Where.BOTH)
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.REDACT)
    tool = models.CharField(
        max_length=128,
        blank=True,
        help_text="The one tool it guards; empty: every tool, prompt and resource.",
    )
    enabled = models.BooleanField(default=True)
    updated_at = models.DateTimeField(auto_now=True)

    history = HistoricalRecords(excluded_fields=["updated_at"])

    class Meta:
        ordering = ["name"]
        constraints = [
            models.UniqueConstraint(fields=["tenant", "name"], name="unique_guardrail_name_per_tenant")
        ]

    def __str__(self) -> str:
        return self.name

    def clean(self) -> None:
        if self.detector == Detector.PATTERN:
            try:
                compile_pattern(self.pattern)
            except PatternError as exc:
                raise ValidationError({"pattern": str(exc)}) from None
        elif self.pattern:
            raise ValidationError({"pattern": "Only a pattern guardrail has a pattern: leave it empty."})
        rules.governance_rule(
            self, MAX_GUARDRAILS_PER_TENANT, "guardrails", "the guardrail would guard nothing"
        )

    def to_def(self) -> GuardrailDef:
        return GuardrailDef(
            name=self.name, detector=self.detector, pattern=self.pattern, where=self.where,
            action=self.action, tool=self.tool,
        )  # fmt: skip
