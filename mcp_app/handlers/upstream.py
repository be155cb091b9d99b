"""The upstream kind: a tool published from an upstream MCP server, called through mcp_app.federation.

The row's configuration names its remote tool and the arguments the owner fixed (``{"tool",
"fixed"}``; the upstream itself is the row's `upstream` reference, AMB-310). The catalog loader gives
the tool its typed `UpstreamRef` (``tool.upstream``), from which handlers/upstream_target.py builds
the call's federation target; the caller's own MCP token never goes upstream. An upstream that acts
as the caller (``connection``, AMB-216) gets the person's token at that provider of the tenant
instead (handlers/accounts.py asks them to connect first). The call's progress and log messages reach
our client as the upstream sends them; our client's cancellation cancels the upstream call. An
upstream that cannot be reached, or fails, gives an error result naming the upstream, never its
secrets or internals.

The upstream's questions (elicitation, sampling, roots) are our client's to answer: asked with
`ctx.ask_together` under keys of their own (`upstream/…`), so they never meet the call's approval
question; federation/questions.py says how each era of upstream asks. On 2026-07-28 our client's
first round ends at the first question (InputRequired), the abandoned upstream call is cancelled, and
this handler runs again with the answers. A 2026-07-28 upstream's round is carried to that next run
(sealed in `ctx.carried`), so the upstream continues where it stopped; a legacy upstream has no
such state and its tool runs again up to its question (docs/decisions/federation.md, AMB-177).

A tool the upstream runs only as a task (its pinned `execution.taskSupport`, resolved by the loader
into `TASK_KEY`) is called as one and its task followed to the result; our cancellation cancels that
task upstream (AMB-199..201). Whether our client gets a plain call or our own task is protocol/tasks.py's.

The published definition is the contract (AMB-280): an argument its input schema does not declare,
or one the owner fixed, never reaches the upstream (`undeclared`; protocol/tools.py refuses the call
with -32602 before anything runs, and `run` refuses it again for any other path).
"""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from typing import Any

from cryptography.fernet import InvalidToken

from mcp_app import federation
from mcp_app.core import notifications
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import ToolDef
from mcp_app.handlers import cancelling, secrets, upstream_target

CANCELLED = "The call was cancelled; the upstream call was cancelled too."
# Our key of an upstream question: `upstream/` + the federation's name of it (hashed when long, as
# a key is at most asking.MAX_KEY_CHARS), never the handler's own or the server's `approval`.
KEY_PREFIX = "upstream/"
MAX_KEY_CHARS = 64
# Where the upstream's last round is carried in ctx.carried, and the most it may take there (the
# requestState holding it travels with every round); a bigger round is not carried: run again.
CARRIED_KEY = "upstream"
MAX_CARRIED_CHARS = 16_000
# Added by the catalog loader to a published tool's configuration: how the upstream runs the tool by its pinned definition ("required",
# "optional", "forbidden"). Required: called as a task upstream and followed (AMB-199); optional is
# called plainly (AMB-200: progress and logs stream, one exchange, a cancellation reaches it as is).
TASK_KEY = "upstream_task"


def config_problems(config: dict[str, Any]) -> list[str]:
    """What the schema cannot say: the fixed arguments' names."""
    fixed = config.get("fixed") or {}
    if isinstance(fixed, dict) and any(not isinstance(name, str) or not name for name in fixed):
        return ["Every fixed argument needs a name."]
    return []


def undeclared(tool: ToolDef, arguments: dict[str, Any]) -> list[str]:
    """The arguments the published tool does not take, sorted: each one the owner fixed, and each one
    its input schema does not declare unless that schema explicitly admits more (AMB-280).

    JSON Schema admits any property when `additionalProperties` is absent; a published tool is the
    owner's review of a third party's tool, so here absence means "no": what was reviewed is every
    argument the upstream may hear from a client. An explicit `additionalProperties` (or
    `unevaluatedProperties`) other than `false` is the schema's own word that more are welcome (a
    schema value still validates them, as any argument is validated).
    """
    fixed = tool.handler_config.get("fixed") or {}
    refused = {name for name in arguments if name in fixed}
    names, patterns, open_ = _declared(tool.input_schema)
    if not open_:
        refused |= {
            name
            for name in arguments
            if name not in names and not any(_matches(pattern, name) for pattern in patterns)
        }
    return sorted(refused)


def refusal(tool: ToolDef, names: list[str]) -> str:
    """What the caller is told about the arguments ``undeclared`` found."""
    listed = ", ".join(repr(name[:100]) for name in names[:MAX_NAMED])
    if len(names) > MAX_NAMED:
        listed += f" and {len(names) - MAX_NAMED} more"
    if len(names) == 1:
        return f"Tool {tool.name!r} does not take the argument {listed}: its published definition does not declare it."
    return f"Tool {tool.name!r} does not take the arguments {listed}: its published definition does not declare them."


# The most argument names a refusal lists (a client may send thousands).
MAX_NAMED = 10
# Keywords whose subschemas apply to the same object, so the properties they name are declared too.
_SAME_INSTANCE = ("allOf", "anyOf", "oneOf", "if", "then", "else")


def _declared(schema: Any) -> tuple[set[str], list[str], bool]:
    """(property names, patternProperties patterns, open) of an object schema, through the keywords
    that apply to the same object and local `$ref`s (a remote one is never followed, AMB-117)."""
    names: set[str] = set()
    patterns: list[str] = []
    seen: set[int] = set()
    open_ = not isinstance(schema, dict)  # no object schema: nothing to hold the arguments to

    def walk(node: Any, depth: int) -> None:
        nonlocal open_
        if not isinstance(node, dict) or id(node) in seen or depth > 32:
            return
        seen.add(id(node))
        for keyword in ("additionalProperties", "unevaluatedProperties"):
            if keyword in node and node[keyword] is not False:
                open_ = True
        if isinstance(node.get("properties"), dict):
            names.update(node["properties"])
        if isinstance(node.get("patternProperties"), dict):
            patterns.extend(p for p in node["patternProperties"] if isinstance(p, str))
        for keyword in _SAME_INSTANCE:
            value = node.get(keyword)
            for sub in value if isinstance(value, list) else [value]:
                walk(sub, depth + 1)
        if isinstance(node.get("dependentSchemas"), dict):
            for sub in node["dependentSchemas"].values():
                walk(sub, depth + 1)
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#"):
            walk(_pointer(schema, ref[1:]), depth + 1)

    walk(schema, 0)
    return names, patterns, open_


def _pointer(root: Any, pointer: str) -> Any:
    """The node at a JSON Pointer inside ``root`` (RFC 6901), or None."""
    node = root
    for part in pointer.split("/")[1:] if pointer else []:
        part = part.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _matches(pattern: str, name: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        return False  # a pattern Python cannot read declares nothing


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the remote tool with the client's arguments and the fixed ones; pass its result through."""
    config = tool.handler_config
    if refused := undeclared(tool, arguments):
        # protocol/tools.py refused this call already; a path that runs the handler without it (a
        # background worker, a direct registry.run_inline) must not forward what was never reviewed.
        raise ToolError(refusal(tool, refused))
    ref = tool.upstream
    if ref is None:
        # Only the catalog loader resolves the upstream: a row read some other way cannot call it.
        raise ToolError(f"The upstream of tool {tool.name!r} is not available.")
    try:
        # The caller's own account first (AMB-216): a person who must connect does so before the
        # upstream hears of it.
        target = await upstream_target.target(ref, ctx.tenant.id, ctx)
    except secrets.SecretsError as exc:
        raise ToolError(f"The upstream {ref.name!r} cannot be called: {exc}") from None
    sent = {**arguments, **(config.get("fixed") or {})}

    # Bounded: an upstream that floods its call with messages must not keep the event loop every
    # tenant shares busy relaying them (tests/e2e/test_upstream_isolation.py).
    relay = notifications.Relay(ctx)

    async def on_log(level: str, data: Any, logger_name: str | None) -> None:
        # An upstream may name a level MCP does not have: it still reaches the client, as info.
        known = level if level in notifications.LOG_LEVELS else "info"
        await relay.log(known, data, logger_name)

    call = federation.call_tool(
        target,
        ref.remote,
        sent,
        on_progress=relay.progress,
        on_log=on_log,
        asking=_asking(ctx),
        as_task=config.get(TASK_KEY) == "required",
    )
    try:
        result = await cancelling.unless_cancelled(ctx.cancelled, call, CANCELLED)
    except federation.UpstreamError as exc:
        await relay.finish()
        raise ToolError(f"Upstream {ref.name!r}: {exc.message}") from None
    await relay.finish()  # before the result: the last progress held back, then the dropped count
    # Its output is checked against the pinned output schema where every tool's is: protocol/tools.py.
    return result


def key_of(name: str) -> str:
    """Our question key for the federation's question ``name``."""
    key = KEY_PREFIX + name
    if len(key) <= MAX_KEY_CHARS:
        return key
    return KEY_PREFIX + hashlib.sha256(name.encode()).hexdigest()[:32]


def _asking(ctx: RequestContext) -> federation.Asking:
    """The upstream's questions put to our client, and its 2026-07-28 round carried to our next run."""

    async def ask(requests: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
        answers = await ctx.ask_together({key_of(name): request for name, request in requests.items()})
        return {
            name: answers[key_of(name)] for name in requests if isinstance(answers.get(key_of(name)), dict)
        }

    def remember(round_: federation.Round) -> None:
        sealed = _seal(round_.to_dict())
        if len(sealed) <= MAX_CARRIED_CHARS:
            ctx.carried[CARRIED_KEY] = sealed
        else:
            ctx.carried.pop(CARRIED_KEY, None)  # too big to carry: the next run starts from round one

    carried = ctx.carried.get(CARRIED_KEY)
    resume = federation.Round.from_dict(_unseal(carried)) if isinstance(carried, str) else None
    return federation.Asking(ask=ask, resume=resume, remember=remember)


def _seal(value: Any) -> str:
    # Our client reads the requestState (it is signed, not secret): the upstream's own state, which it
    # never meant for a third party, goes in encrypted.
    return secrets.fernet().encrypt(zlib.compress(json.dumps(value).encode())).decode("ascii")


def _unseal(token: str) -> Any:
    try:
        return json.loads(zlib.decompress(secrets.fernet().decrypt(token.encode("ascii"))))
    except (InvalidToken, ValueError, UnicodeError, zlib.error):
        return None  # a key rotated since: the call starts from the upstream's first round
