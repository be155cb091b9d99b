"""Daphne with governance cut down to the native calls a governed tools/call cannot avoid (issue 34
"Speed", AMB-377): the ceiling of what making governance's own Python cheaper could gain. Not a test and
not for production: it decides nothing (every call is allowed, nothing is blocked or redacted).

    python bench/gov_bare.py <daphne arguments> mcpsite.asgi:application

Per call of a governed tenant's tool it keeps: the one CEL evaluation of each policy that reads the
arguments (on the converted caller and target, the arguments through the variable resolver, as
`conditions.Prepared` does), one RE2 question on the arguments' texts and one on the result's
(`Guards.may_find`'s set), and the quota (unchanged). It drops everything else governance does in
Python: the cache lookups, the borrowing, the sizing, the outcome and event objects, the guarded asker.
GOV_BARE_CEL=0 drops the CEL evaluation too. Used by `bench/governance_parts.py --bare`.
"""

# ruff: noqa: PLC0415 - imported once Django is set up
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import mcpsite.asgi  # noqa: E402,F401 - Django set up before the modules are patched


def main() -> None:
    from mcp_app.governance import answers, decision, guardrails, scanning

    with_cel = os.environ.get("GOV_BARE_CEL", "1") != "0"
    real_check = decision.check
    listed: dict[tuple[int, int, str], Any] = {}
    guards: dict[tuple[int, int, str, str], Any] = {}

    def hidden(ctx: Any, catalog: Any, target: Any, method: str = "") -> bool:
        return False

    def check(ctx: Any, catalog: Any, target: Any, arguments: dict[str, Any], method: str = "") -> None:
        if not catalog.policies:
            return None
        key = (catalog.tenant_id, catalog.version, target.name)
        found = listed.get(key)
        if found is None:  # the first call decides for real, which converts the caller and target once
            real_check(ctx, catalog, target, arguments, method)
            found = listed[key] = decision._listed(ctx, catalog, target)
        if with_cel and found.prepared is not None:
            prepared = found.prepared
            prepared._lent = ("arguments", arguments)
            for policy in found.later:
                policy.condition.program.execute(prepared._context)
            prepared._lent = None
        return None

    async def scan(
        ctx: Any, method: str, catalog: Any, target: str, value: Any, where: str, shape: str
    ) -> Any:
        key = (catalog.tenant_id, catalog.version, target, where)
        found = guards.get(key)
        if found is None:
            found = guards[key] = guardrails.applying(catalog, target, arguments=where != "result")
        if found and found.whole is not None:
            found.whole.Match("\n".join(scanning.texts_of(value, shape)))
        return guardrails.Outcome(value)

    def guarded_asker(ctx: Any, catalog: Any, target: str) -> Any:
        return ctx.ask

    decision.hidden = hidden
    decision.check = check  # type: ignore[assignment]
    guardrails.scan = scan
    answers.guarded_asker = guarded_asker
    from daphne.cli import CommandLineInterface

    CommandLineInterface().run(sys.argv[1:])


if __name__ == "__main__":
    main()
