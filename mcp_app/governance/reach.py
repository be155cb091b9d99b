"""Whether a policy can decide anything, checked when it is saved (AMB-356).

A condition that reads no arguments is evaluated against the tenant's own targets of the kinds it
applies to (at most MAX_TARGETS) and a set of callers drawn from its members: each member as an
OAuth client and through an API key (with the member's role), an anonymous caller and an identity
provider's user (at most MAX_EVALUATIONS pairs). Three outcomes are refused, each with its reason:

- a condition that cannot be evaluated for any of them (a key none has: a typo, or a claim only some
  identity provider's tokens carry, read without `has()`): it fails closed for every one;

- a condition on the target alone that holds for none of the tenant's targets: it would never
  decide anything (a typo in a name, a hint that no tool sets);
- a deny that holds for every such caller and target: it would shut everyone out of that kind.

A condition on the caller is not refused for holding for none of these callers: it may be written
for a client or a subject the tenant has not seen yet. One that reads the arguments is decided at
each call and not judged here. A tenant with no target of the kind yet has nothing to judge against.

And with the tenant's other policies: a policy after which no member (as an OAuth client or through an
API key) would have a single tool in its list is refused unless the owner confirms it (`keeps_no_tool`).
"""

from __future__ import annotations

from typing import Any

from mcp_app.governance.conditions import Activation, Condition, ConditionError
from mcp_app.governance.decision import Split, listed

MAX_TARGETS = 500
# At about 1.5 µs an evaluation, 30 ms a policy saved: an import of 200 policies costs 6 s, not minutes.
MAX_EVALUATIONS = 20_000


def problem(
    condition: Condition, deny: bool, callers: list[dict[str, Any]], targets: list[dict[str, Any]], kinds: str
) -> str | None:
    """Why this policy cannot be saved, or None. `kinds` names what it applies to ("tools", ...)."""
    if condition.uses_arguments or not targets or not callers:
        return None
    reads_caller = "caller" in condition.reads
    asked = callers if reads_caller else callers[:1]
    targets = targets[: max(1, min(MAX_TARGETS, MAX_EVALUATIONS // len(asked)))]
    held = evaluated = 0
    failure = ""
    for target in targets:
        for caller in asked:
            try:
                held += condition.holds_in(Activation({"caller": caller, "target": target}))
            except ConditionError as exc:
                failure = failure or str(exc)
                continue  # it fails closed there, as it would at a request
            evaluated += 1
    count = f"{len(targets)} {kinds}"
    if not evaluated:
        whom = " and callers (each member, an API key, anonymous, an identity provider's user)" if reads_caller else ""
        return (
            f"It cannot be evaluated for any of this tenant's {count}{whom} ({failure}), so it fails closed "
            "for all of them (a deny holds, an allow does not). Guard what some callers or targets lack "
            "with has(), as in has(caller.claims.groups) && 'x' in caller.claims.groups."
        )
    if not reads_caller and held == 0:
        return (
            f"It holds for none of this tenant's {count}: it would never decide anything. Check the names "
            "and values it compares with (a policy on tools the tenant does not have yet can be saved after them)."
        )
    if deny and evaluated and held == evaluated and held == len(asked) * len(targets):
        whom = (
            "every caller (each member, an API key, anonymous, an identity provider's user) and "
            if reads_caller
            else ""
        )
        return (
            f"As a deny it holds for {whom}every one of this tenant's {count}: it would shut everyone out of "
            f"them. Narrow it, or disable the {kinds} themselves."
        )
    return None


def keeps_no_tool(split: Split, callers: list[dict[str, Any]], targets: list[dict[str, Any]]) -> bool:
    """Whether no caller would have any of the targets in its list under `split`'s policies. Bounded:
    past MAX_EVALUATIONS condition evaluations it cannot tell, and says False (as with no policy, no
    caller or no target)."""
    if not callers or not targets or not (split.now or split.later):
        return False
    budget = MAX_EVALUATIONS // max(1, len(split.now))
    for caller in callers:
        for target in targets:
            if budget <= 0 or listed(split, caller, target):
                return False
            budget -= 1
    return True
