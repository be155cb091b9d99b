"""The policy simulator (AMB-350): what the one decision says for a caller an owner describes, without a
request and without running anything, and what the guardrails would do to its arguments and to a
sample result (AMB-354). The admin's page and the API's `policy/simulate/` ask here."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from mcp_app import catalog as catalogs
from mcp_app.core.context import RequestContext, kept_claims
from mcp_app.core.types import Catalog, TenantInfo
from mcp_app.core.versions import LATEST_MODERN
from mcp_app.governance import decision, guardrails
from mcp_app.protocol import tools

AUTHS = ("anonymous", "oauth", "api_key", "identity_provider")
KINDS = ("tool", "prompt", "resource", "template")


class SimulationError(ValueError):
    """What the description of the caller or the target lacks."""


@dataclass(frozen=True)
class SimulatedCaller:
    auth: str = "anonymous"
    user_id: int | None = None
    role: str = ""
    subject: str = ""
    client_id: str = ""
    scopes: tuple[str, ...] = ()
    address: str = ""
    claims: dict[str, Any] = field(default_factory=dict)  # an identity provider's token's claims


@dataclass
class Simulation:
    allowed: bool
    policy: str | None
    hidden: bool
    message: str | None
    lists: dict[str, list[str]] = field(default_factory=dict)
    # "arguments" and, with a sample, "result": what the guardrails would do to each (see `_guarded`).
    guardrails: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "allowed": self.allowed,
            "policy": self.policy,
            "hidden": self.hidden,
            "message": self.message,
            "lists": self.lists,
            "guardrails": self.guardrails,
        }

    def guarded_texts(self) -> list[dict[str, Any]]:
        """For the admin's page: each scanned part with what passes as one text (or its block)."""
        shown = []
        for where, guarded in self.guardrails.items():
            if not guarded["found"] and not guarded["blocked"]:
                continue
            value = guarded["value"] or {}
            if where == "arguments":
                text = json.dumps(value, ensure_ascii=False)
            else:
                blocks = [*value.get("content", ()), *(m["content"] for m in value.get("messages", ())),
                          *value.get("contents", ())]  # fmt: skip
                text = "".join(str(b.get("text", "")) for b in blocks)
            shown.append({"where": where, "blocked": guarded["blocked"], "text": text, "found": guarded["found"]})
        return shown


def _guarded(outcome: guardrails.Outcome) -> dict[str, Any]:
    """A guardrails outcome as the simulator shows it: blocked (and by which), or what passes, and
    which guardrail found what how often."""
    found: dict[tuple[str, str, str], int] = {}
    for f in outcome.findings:
        found[(f.guardrail, f.action, f.kind)] = found.get((f.guardrail, f.action, f.kind), 0) + 1
    return {
        "blocked": outcome.blocked.message() if outcome.blocked is not None else None,
        "guardrail": outcome.blocked.guardrail if outcome.blocked is not None else None,
        "value": None if outcome.blocked is not None else outcome.value,
        "found": [{"guardrail": g, "action": a, "kind": k, "count": n} for (g, a, k), n in found.items()],
    }


def _sample(kind: str, text: str) -> tuple[dict[str, Any], str]:
    """A sample result of the target's kind, all its text `text`, and its shape for the scan."""
    if kind == "tool":
        return {"content": [{"type": "text", "text": text}]}, "tool"
    if kind == "prompt":
        return {"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}, "prompt"
    return {"contents": [{"uri": "sample:", "text": text}]}, "resource"


def context_for(tenant: TenantInfo, caller: SimulatedCaller) -> RequestContext:
    """The request context the transport would build for such a caller (a 2026-07-28 request)."""
    if caller.auth not in AUTHS:
        raise SimulationError(f"auth must be one of {', '.join(AUTHS)}.")
    client_id = caller.client_id
    if caller.auth == "api_key" and not client_id.startswith("api-key:"):
        client_id = "api-key:0"
    return RequestContext(
        tenant=tenant,
        protocol_version=LATEST_MODERN,
        user_id=caller.user_id if caller.auth != "anonymous" else None,
        client_id=client_id or None,
        scopes=None if caller.auth == "anonymous" else frozenset(caller.scopes),
        subject=(caller.subject or "simulated") if caller.auth == "identity_provider" else None,
        claims=kept_claims(caller.claims) if caller.auth == "identity_provider" else "",
        role=caller.role if caller.auth != "anonymous" else "",
        client_address=caller.address or None,
    )


def _target(catalog: Catalog, kind: str, name: str) -> decision.Target:
    found: decision.Target | None
    if kind == "tool":
        found = catalog.tools_by_name.get(name)
    elif kind == "prompt":
        found = catalog.prompts_by_name.get(name)
    elif kind == "resource":
        found = catalog.resources_by_uri.get(name)
    elif kind == "template":
        found = next((t for t in catalog.templates if t.uri_template == name), None)
    else:
        raise SimulationError(f"kind must be one of {', '.join(KINDS)}.")
    if found is None:
        raise SimulationError(f"The tenant serves no {kind} {name!r}.")
    return found


async def simulate(
    tenant: TenantInfo,
    caller: SimulatedCaller,
    kind: str,
    name: str,
    arguments: dict[str, Any],
    sample: str = "",
    catalog: Catalog | None = None,
) -> Simulation:
    """The decision for this caller, target and arguments, what this caller's lists hold, and what the
    guardrails would do to the arguments and to a result whose text is `sample`; with the catalog
    clients get, unless given another (the rules' drafts in place: drafts/trial.with_rule_drafts)."""
    catalog = catalog or await catalogs.get_catalog(tenant.id)
    ctx = context_for(tenant, caller)
    target = _target(catalog, kind, name)
    denial = decision.check(ctx, catalog, target, arguments)
    lists = {
        "tools": [t.name for t in await tools.offered(ctx, catalog)],
        "prompts": [p.name for p in await decision.shown(ctx, catalog, catalog.prompts)],
        "resources": [r.uri for r in await decision.shown(ctx, catalog, catalog.resources)],
        "resource_templates": [t.uri_template for t in await decision.shown(ctx, catalog, catalog.templates)],
    }
    guarded = {"arguments": _guarded(guardrails.scan_now(catalog, name, arguments, "arguments", "arguments"))}
    if sample:
        result, shape = _sample(kind, sample)
        guarded["result"] = _guarded(guardrails.scan_now(catalog, name, result, "result", shape))
    if denial is None:
        return Simulation(True, None, False, None, lists, guarded)
    return Simulation(False, denial.policy or None, denial.hidden, denial.message(kind, name), lists, guarded)
