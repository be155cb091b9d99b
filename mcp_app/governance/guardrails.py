"""Guardrails (AMB-354): what may flow in and out of a tenant's tools, prompts and resources.

A guardrail is a detector × where × an action. Detectors: `secrets` (the patterns of detect-secrets'
plugins), personal data confirmed by a checksum or a numbering plan (`card`: Luhn; `iban`: ISO 13616;
`phone`: libphonenumber; `email`), all four as `personal_data`, or an owner's `pattern`. Where: a
call's arguments, what comes back (a tool result's text, embedded resources and every string leaf of
`structuredContent`; a prompt's messages; a resource's text contents), or both. Actions: `block` (the
use fails naming the guardrail and the kind it found, never the text), `redact` (each finding replaced
by a marker naming its kind, in `content` and `structuredContent` alike), `audit` (logged, unchanged).

Every pattern runs in RE2 (google-re2): linear in its input whatever an owner or a plugin wrote, so a
pattern meant to backtrack cannot stall the loop. A scan reads at most MAX_SCAN_CHARS characters: past
that, a blocking or redacting guardrail blocks (fail closed) and an auditing one logs that it could not
look. Confirming a candidate (a checksum, a phone-number parse) is bounded per scan too: past
MAX_CONFIRMATIONS the rest count as found, and past MAX_CANDIDATES the value is not read further (a
blocking or redacting guardrail blocks). What a guardrail looks for: detectors.py; one value's scan:
scanning.py. Compiled once per tenant and definitions version; a value of more than INLINE_SCAN_CHARS
is scanned off the serving loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from cachetools import LRUCache

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, GuardrailDef
from mcp_app.governance import audit, scanning
from mcp_app.governance.detectors import PatternError, detectors_of
from mcp_app.governance.scanning import MAX_CANDIDATES, Blocked, Compiled, Finding, Guards, guards_of

logger = logging.getLogger("mcp.governance")

MAX_SCAN_CHARS = 8_000_000


def _compile(guardrail: GuardrailDef) -> Compiled | None:
    try:
        detectors = detectors_of(guardrail.detector, guardrail.pattern, guardrail.name)
    except PatternError as exc:
        logger.warning("guardrail %r cannot run and guards nothing: %s", guardrail.name, exc)
        return None
    return Compiled(
        guardrail.name, guardrail.tool, guardrail.where in ("arguments", "both"),
        guardrail.where in ("results", "both"), guardrail.action, detectors,
    )  # fmt: skip


_COMPILED: LRUCache[tuple[int, int], tuple[Compiled, ...]] = LRUCache(maxsize=512)
_LOCK = threading.Lock()


def compiled(catalog: Catalog) -> tuple[Compiled, ...]:
    if not catalog.guardrails:
        return ()
    key = (catalog.tenant_id, catalog.version)
    with _LOCK:
        found = _COMPILED.get(key)
    if found is None:
        found = tuple(c for c in map(_compile, catalog.guardrails) if c is not None)
        with _LOCK:
            _COMPILED[key] = found
    return found


@dataclass
class Outcome:
    value: Any  # the value, redacted where a guardrail redacts (the same object when nothing changed)
    blocked: Blocked | None = None
    findings: list[Finding] = field(default_factory=list)


# (tenant, version, target, on arguments) -> the guardrails that apply: every call asks twice.
_APPLYING: LRUCache[tuple[int, int, str, bool], Guards] = LRUCache(maxsize=8_192)
NONE = Guards(())


# The same, read without the lock or the LRU's bookkeeping (a dict's get is atomic): every call asks it
# three times (its arguments, its result, the guarded asker), and through Daphne each locked LRU read
# cost microseconds (AMB-375). Emptied whole past FAST_ENTRIES; the LRU above stays the bounded truth.
_FAST: dict[tuple[int, int, str, bool], Guards] = {}
FAST_ENTRIES = 8_192


def applying(catalog: Catalog, target: str, arguments: bool) -> Guards:
    if not catalog.guardrails:
        return NONE
    key = (catalog.tenant_id, catalog.version, target, arguments)
    found = _FAST.get(key)
    if found is not None:
        return found
    with _LOCK:
        found = _APPLYING.get(key)
    if found is None:
        found = guards_of(tuple(
            g for g in compiled(catalog) if g.guards(target) and (g.arguments if arguments else g.results)
        ))  # fmt: skip
        with _LOCK:
            _APPLYING[key] = found
    if len(_FAST) >= FAST_ENTRIES:
        _FAST.clear()
    _FAST[key] = found
    return found


def _finish(scan: scanning.Scan, value: Any, target: str, tenant_id: int) -> Outcome:
    if not scan.findings:
        return Outcome(value, scan.blocked)  # most values: nothing found, nothing to count
    # One line per guardrail and kind, however many times it was found: never the text found.
    for (name, action, kind), count in Counter(
        (f.guardrail, f.action, f.kind) for f in scan.findings
    ).items():  # fmt: skip
        logger.warning(
            "guardrail %r found %s (%d times) in the %s of %s (tenant %s): %s",
            name, scanning.article(kind), count, scan.where, target, tenant_id,
            {"block": "blocked", "redact": "redacted"}.get(action, "audited"),
        )  # fmt: skip
    return Outcome(value, scan.blocked, scan.findings)


def _unread(guardrails: Guards, where: str, target: str, tenant_id: int, value: Any, why: str) -> Outcome:
    """A value the guardrails could not read whole: blocked by the first that would change it."""
    for guardrail in guardrails:
        if guardrail.action != "audit":
            return Outcome(value, Blocked(guardrail.name, why, where))
    logger.warning(
        "the %s of %s (tenant %s) held %s: its guardrails did not read it", where, target, tenant_id, why
    )
    return Outcome(value)


def _scanned(
    guardrails: Guards,
    tenant_id: int,
    target: str,
    value: Any,
    where: str,
    shape: str,
    size: int,
    yielding: bool = True,
) -> Outcome:
    if size > MAX_SCAN_CHARS:
        why = f"more than {MAX_SCAN_CHARS:,} characters, more than a guardrail reads"
        return _unread(guardrails, where, target, tenant_id, value, why)
    if guardrails.whole is not None and not guardrails.may_find(scanning.texts_of(value, shape)):
        return Outcome(value)  # most values: nothing any guardrail looks for
    scan = scanning.Scan(guardrails, where, yielding)
    try:
        scanned = scanning.shaped(value, scan, shape)
    except scanning.TooMany:
        why = f"more than {MAX_CANDIDATES:,} candidate findings, more than a guardrail confirms"
        return _unread(guardrails, where, target, tenant_id, value, why)
    return _finish(scan, scanned, target, tenant_id)


# A value of more characters than this is scanned on the scanning thread, not on the serving loop: the
# thread hands the loop the GIL every scanning.YIELD_CONFIRMATIONS confirmations, so another tenant waits
# for a turn, not a scan.
INLINE_SCAN_CHARS = 64 * 1024
_SCANNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-guardrails")


def scan_now(catalog: Catalog, target: str, value: Any, where: str, shape: str) -> Outcome:
    """`value` (a call's or a prompt's arguments, or what `target` answered) through the guardrails of
    `target` on `where` ("arguments" or "result"), in this thread; `shape` says where its text is (see
    `scanning.shaped`)."""
    guardrails = applying(catalog, target, arguments=where != "result")
    if not guardrails:
        return Outcome(value)
    return _scanned(
        guardrails, catalog.tenant_id, target, value, where, shape, scanning.size_of(value, MAX_SCAN_CHARS)
    )


@dataclass
class ArgumentsSeen:
    """Whether a guardrail on arguments found what it looks for in one request's (blocked, redacted or
    audited): the transport then keeps no copy of what the request sent in its usage record of a failed
    call (the dashboard's errors), which would otherwise hold the very secret the guardrail blocked."""

    found: bool = False


# Set by the transport around each request to a holder every task of the request shares (a task copies
# the context, so the holder, not the variable, is what `scan` changes).
ARGUMENTS_SEEN: ContextVar[ArgumentsSeen | None] = ContextVar("mcp_arguments_seen", default=None)


async def scan(
    ctx: RequestContext, method: str, catalog: Catalog, target: str, value: Any, where: str, shape: str
) -> Outcome:
    """`scan_now`, on the scanning thread when the value is larger than INLINE_SCAN_CHARS; what the
    guardrails did is a governance event of the caller's (AMB-355)."""
    guardrails = applying(catalog, target, arguments=where != "result")
    if not guardrails:
        return Outcome(value)
    size = scanning.size_of(value, MAX_SCAN_CHARS)
    if size <= INLINE_SCAN_CHARS:
        outcome = _scanned(guardrails, catalog.tenant_id, target, value, where, shape, size, yielding=False)
    else:
        outcome = await asyncio.get_running_loop().run_in_executor(
            _SCANNER, _scanned, guardrails, catalog.tenant_id, target, value, where, shape, size
        )
    _record(ctx, method, outcome, target, where)
    if where != "result" and (outcome.findings or outcome.blocked is not None):
        seen = ARGUMENTS_SEEN.get()
        if seen is not None:
            seen.found = True
    return outcome


EVENT_OF_ACTION = {"block": "blocked", "redact": "redacted", "audit": "audited"}


def _record(ctx: RequestContext, method: str, outcome: Outcome, target: str, where: str) -> None:
    """One governance event a guardrail and kind it found (with the count), or the block of a value
    it could not read; never the text."""
    if not outcome.findings and outcome.blocked is None:
        return
    counted = Counter((f.guardrail, f.action, f.kind) for f in outcome.findings)
    for (name, action, kind), count in counted.items():
        audit.record(ctx, EVENT_OF_ACTION[action], name, target, method,
                     {"found": kind, "count": count, "in": where})  # fmt: skip
    if outcome.blocked is not None and not counted:
        audit.record(ctx, "blocked", outcome.blocked.guardrail, target, method,
                     {"unread": outcome.blocked.kind, "in": where})  # fmt: skip
