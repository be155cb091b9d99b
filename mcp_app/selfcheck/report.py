"""What a self-check found (AMB-240): findings per definition, each with where to fix it, and the summary.

A finding is one sentence a tenant can act on, about one definition (kind and name), with a severity:
``error`` (a client would fail: the command exits 1), ``warning`` (some clients, or some calls, would),
``info`` (worth knowing: a tool one era does not see, a capability the client must have).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.urls import NoReverseMatch, reverse

ERROR = "error"
WARNING = "warning"
INFO = "info"
SEVERITIES = (ERROR, WARNING, INFO)

# The definition kinds a finding is about, and the admin page that edits each (its change view).
ADMIN_PAGES = {
    "tool": "admin:mcp_app_tool_change",
    "prompt": "admin:mcp_app_prompt_change",
    "resource": "admin:mcp_app_resource_change",
    "template": "admin:mcp_app_resourcetemplate_change",
    "upstream": "admin:mcp_app_upstream_change",
    "tenant": "admin:tenants_tenant_change",
}


def fix_url(kind: str, pk: int | None) -> str:
    """The admin page that edits the definition ("" when it has no row of its own to edit)."""
    if pk is None or pk <= 0 or kind not in ADMIN_PAGES:
        return ""
    try:
        return reverse(ADMIN_PAGES[kind], args=[pk])
    except NoReverseMatch:
        return ""


@dataclass(frozen=True)
class Finding:
    severity: str
    kind: str  # tool, prompt, resource, template, upstream, tenant
    name: str
    check: (
        str  # which check: name, schema, example, dry-run, era, ssrf, capability, config, upstream, listing
    )
    message: str
    fix_url: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "severity": self.severity,
            "kind": self.kind,
            "name": self.name,
            "check": self.check,
            "message": self.message,
            "fix_url": self.fix_url,
        }


@dataclass(frozen=True)
class Group:
    """The findings of one definition, the worst first."""

    kind: str
    name: str
    fix_url: str
    findings: list[Finding]

    @property
    def severity(self) -> str:
        return min((f.severity for f in self.findings), key=SEVERITIES.index)


@dataclass
class Report:
    tenant: str
    findings: list[Finding] = field(default_factory=list)
    # How many definitions of each kind were checked, and which tools each revision lists.
    checked: dict[str, int] = field(default_factory=dict)
    listed: dict[str, list[str]] = field(default_factory=dict)
    # The checks that reach out (DNS, dry runs, upstream servers) ran: False on save.
    network: bool = True
    # The tools the dry run called (AMB-244), so the person knows what ran.
    dry_runs: list[str] = field(default_factory=list)
    # When the check began (time.time()), and whether this answer joined a check of the tenant already
    # running when it was asked for (AMB-276: one at a time per tenant).
    started_at: float = 0.0
    joined: bool = False

    def count(self, severity: str) -> int:
        return sum(1 for f in self.findings if f.severity == severity)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == ERROR]

    @property
    def ok(self) -> bool:
        return not self.errors

    def groups(self) -> list[Group]:
        """Findings per definition: the worst definitions first, then by kind and name."""
        by_key: dict[tuple[str, str], list[Finding]] = {}
        for finding in self.findings:
            by_key.setdefault((finding.kind, finding.name), []).append(finding)
        groups = [
            Group(
                kind,
                name,
                next((f.fix_url for f in found if f.fix_url), ""),
                sorted(found, key=lambda f: SEVERITIES.index(f.severity)),
            )
            for (kind, name), found in by_key.items()
        ]
        return sorted(groups, key=lambda g: (SEVERITIES.index(g.severity), g.kind, g.name))

    def summary(self) -> str:
        checked = ", ".join(f"{n} {kind}{'s' if n != 1 else ''}" for kind, n in self.checked.items() if n)
        counts = ", ".join(f"{self.count(s)} {s}{'s' if self.count(s) != 1 else ''}" for s in SEVERITIES)
        verdict = "clients would trip over it" if self.errors else "nothing a client would fail on"
        return f"Tenant {self.tenant}: {checked or 'no definitions'} checked; {counts}: {verdict}."

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "ok": self.ok,
            "summary": self.summary(),
            "counts": {s: self.count(s) for s in SEVERITIES},
            "checked": self.checked,
            "listed": self.listed,
            "network": self.network,
            "dry_runs": self.dry_runs,
            "started_at": self.started_at,
            "joined": self.joined,
            "definitions": [
                {
                    "kind": g.kind,
                    "name": g.name,
                    "severity": g.severity,
                    "fix_url": g.fix_url,
                    "findings": [f.as_dict() for f in g.findings],
                }
                for g in self.groups()
            ],
        }
