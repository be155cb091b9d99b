"""The policy engines measured for AMB-349, side by side in one run: compile and evaluate one condition
(a caller's auth and a tool's annotation) with common-expression-language (ours), cel-python and cedarpy.

    python bench/policy_engines.py            # the engines that are installed; the others are named

`cel-python` and `cedarpy` are not the project's dependencies: install them beside it to compare.
"""

from __future__ import annotations

import time
from collections.abc import Callable

CONDITION = 'caller.auth == "api_key" && target.annotations.destructiveHint == true'
ACTIVATION = {
    "caller": {"auth": "api_key", "subject": "", "scopes": ["mcp:tools"]},
    "target": {"kind": "tool", "name": "drop_table", "annotations": {"destructiveHint": True}},
    "arguments": {"table": "users"},
}


def per_call_us(fn: Callable[[], object], runs: int) -> float:
    fn()
    started = time.perf_counter()
    for _ in range(runs):
        fn()
    return (time.perf_counter() - started) / runs * 1e6


def ours() -> tuple[float, float]:
    import cel  # noqa: PLC0415 - each engine only when measured

    program = cel.compile(CONDITION)
    return per_call_us(lambda: cel.compile(CONDITION), 2_000), per_call_us(
        lambda: program.execute(ACTIVATION), 20_000
    )


def cel_python() -> tuple[float, float]:
    import celpy  # noqa: PLC0415 - optional

    env = celpy.Environment()
    program = env.program(env.compile(CONDITION))
    return (
        per_call_us(lambda: env.program(env.compile(CONDITION)), 200),
        per_call_us(lambda: program.evaluate(celpy.json_to_cel(ACTIVATION)), 2_000),
    )


def cedar() -> tuple[float, float]:
    import cedarpy  # noqa: PLC0415 - optional

    text = (
        'forbid(principal, action == Action::"call", resource) when { context.caller.auth == "api_key" '
        "&& context.target.annotations.destructiveHint == true };\npermit(principal, action, resource);"
    )
    policies = cedarpy.PolicySet.from_str(text)
    entities = cedarpy.Entities.from_json_str("[]")
    request = {
        "principal": 'User::"u1"',
        "action": 'Action::"call"',
        "resource": 'Tool::"drop_table"',
        "context": ACTIVATION,
    }
    return (
        per_call_us(lambda: cedarpy.PolicySet.from_str(text), 2_000),
        per_call_us(lambda: cedarpy.is_authorized(request, policies, entities), 5_000),
    )


def main() -> None:
    print("| engine | compile µs | evaluate µs |\n|---|---:|---:|")
    for name, measure in (
        ("common-expression-language", ours),
        ("cel-python", cel_python),
        ("cedarpy", cedar),
    ):
        try:
            compiled, evaluated = measure()
        except ImportError as exc:
            print(f"| {name} | not installed ({exc.name}) | |")
            continue
        print(f"| {name} | {compiled:.1f} | {evaluated:.1f} |")


if __name__ == "__main__":
    main()
