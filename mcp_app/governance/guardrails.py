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
blocking or redacting guardrail blocks). What a guardrail looks for: detectors.py. Compiled once per
tenant and definitions version; a value of more than INLINE_SCAN_CHARS is scanned off the serving loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import re2
from cachetools import LRUCache

from mcp_app.core.context import RequestContext
from mcp_app.core.types import Catalog, GuardrailDef
from mcp_app.governance import audit
from mcp_app.governance.detectors import Detector, PatternError, detectors_of, options

logger = logging.getLogger("mcp.governance")

MAX_SCAN_CHARS = 8_000_000
MAX_CONFIRMATIONS = 2_000
MAX_CANDIDATES = 10_000


@dataclass
class Compiled:
    name: str
    tool: str  # "" guards every tool, prompt and resource
    arguments: bool
    results: bool
    action: str  # "block" | "redact" | "audit"
    detectors: tuple[Detector, ...]
    prefilter: Any = field(default=None, repr=False)  # re2.Set of the detectors: one pass says which ran

    def __post_init__(self) -> None:
        if len(self.detectors) > 1:
            self.prefilter = re2.Set.SearchSet(options())
            for detector in self.detectors:
                self.prefilter.Add(detector.pattern.pattern)
            self.prefilter.Compile()

    def guards(self, target: str) -> bool:
        return not self.tool or self.tool == target


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


@dataclass(frozen=True)
class Finding:
    guardrail: str
    action: str
    kind: str


@dataclass(frozen=True)
class Blocked:
    guardrail: str
    kind: str  # what it found, or why it could not look
    where: str  # "arguments" | "result" | "answer" (to a question the tool asked the client)

    def message(self) -> str:
        return f"Blocked by guardrail {self.guardrail!r}: the {self.where} held {self.kind}."


@dataclass
class Outcome:
    value: Any  # the value, redacted where a guardrail redacts (the same object when nothing changed)
    blocked: Blocked | None = None
    findings: list[Finding] = field(default_factory=list)


@dataclass(frozen=True)
class Guards:
    """The guardrails that apply to one target's arguments or results, in order, and one RE2 set of
    every pattern of all of them: one pass over a text says which patterns may match it, so a text
    with nothing to find (most of them) costs one match, not one per guardrail (AMB-354)."""

    rows: tuple[Compiled, ...]
    prefilter: Any = None  # re2.Set, or None when the patterns together outgrow RE2's memory bound
    owners: tuple[tuple[int, int], ...] = ()  # a pattern's index in it -> (row, detector) indices

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __iter__(self) -> Iterator[Compiled]:
        return iter(self.rows)

    def candidates(self, text: str) -> dict[int, list[Detector]] | None:
        """Each row's detectors whose pattern matches somewhere in `text` (none: {}), or None when
        there is no set to ask (each row's own prefilter then says)."""
        if self.prefilter is None:
            return None
        found: dict[int, list[Detector]] = {}
        for index in sorted(self.prefilter.Match(text) or ()):
            row, detector = self.owners[index]
            found.setdefault(row, []).append(self.rows[row].detectors[detector])
        return found


def guards_of(rows: tuple[Compiled, ...]) -> Guards:
    if not rows:
        return Guards(())
    prefilter = re2.Set.SearchSet(options())
    owners = []
    try:
        for row, guardrail in enumerate(rows):
            for index, detector in enumerate(guardrail.detectors):
                prefilter.Add(detector.pattern.pattern)
                owners.append((row, index))
        prefilter.Compile()
    except re2.error:
        logger.info("the guardrails of one target outgrow one RE2 set: each runs its own prefilter")
        return Guards(rows)
    return Guards(rows, prefilter, tuple(owners))


class _Scan:
    """One value's scan by the guardrails that apply to it: a budget of confirmations, the findings."""

    def __init__(self, guardrails: Guards, where: str, yielding: bool) -> None:
        self.guardrails = guardrails
        self.where = where
        self.yielding = yielding  # off the serving loop: hand it the GIL every YIELD_CONFIRMATIONS
        self.confirmations = 0
        self.candidates = 0
        self.findings: list[Finding] = []
        self.blocked: Blocked | None = None

    def spans(
        self, guardrail: Compiled, text: str, detectors: list[Detector] | None
    ) -> Iterator[tuple[int, int, str]]:
        if detectors is None:  # no set over every guardrail: this one's own
            if guardrail.prefilter is not None:
                which = guardrail.prefilter.Match(text)
                detectors = [guardrail.detectors[i] for i in sorted(which or ())]
            else:
                detectors = list(guardrail.detectors)
        for detector in detectors:
            for match in detector.pattern.finditer(text):
                self.candidates += 1
                if self.candidates > MAX_CANDIDATES:
                    raise _TooMany
                if detector.confirm is not None and self.confirmations < MAX_CONFIRMATIONS:
                    self.confirmations += 1
                    if self.yielding and self.confirmations % YIELD_CONFIRMATIONS == 0:
                        time.sleep(0)
                    if not detector.confirm(match.group(0)):
                        continue
                yield match.start(), match.end(), detector.kind

    def text(self, text: str) -> str:
        if self.blocked is not None or not text:
            return text
        readable = _readable(text)
        candidates = self.guardrails.candidates(readable)
        if candidates == {}:
            return text  # no pattern of any guardrail matches anywhere in it
        cut: list[tuple[int, int, str]] = []
        for row, guardrail in enumerate(self.guardrails.rows):
            detectors = None if candidates is None else candidates.get(row)
            if candidates is not None and detectors is None:
                continue
            for start, end, kind in self.spans(guardrail, readable, detectors):
                self.findings.append(Finding(guardrail.name, guardrail.action, kind))
                if guardrail.action == "block":
                    self.blocked = Blocked(guardrail.name, _article(kind), self.where)
                    return text
                if guardrail.action == "redact":
                    cut.append((start, end, kind))
                else:
                    break  # audit: once per text is enough to say it was there
        return _redacted(text, cut) if cut else text


class _TooMany(Exception):
    """More candidates than one scan confirms: a blocking or redacting guardrail blocks (fail closed)."""


def _readable(text: str) -> str:
    """`text` as RE2 can read it: valid UTF-8. JSON allows a lone surrogate, which UTF-8 cannot hold;
    it is read as U+FFFD, one code point for one, so what is found is cut at the same places of the
    text as it came (which is what passes when nothing is found)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def _article(kind: str) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" or kind.startswith("IBAN") else f"a {kind}"


def _redacted(text: str, spans: list[tuple[int, int, str]]) -> str:
    out: list[str] = []
    at = 0
    for start, end, kind in sorted(spans):
        if end <= at:
            continue  # inside the span cut before
        if start < at:
            at = end  # overlaps it: the marker before stands for both
            continue
        out.append(text[at:start])
        out.append(f"[redacted {kind}]")
        at = end
    out.append(text[at:])
    return "".join(out)


def _size(value: Any, budget: int) -> int:
    """The characters of the string leaves of `value`, counted up to `budget` (then budget + 1)."""
    total = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            total += len(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        if total > budget:
            return budget + 1
    return total


def _leaves(value: Any, scan: _Scan) -> Any:
    """`value` with each string leaf scanned (dict keys are names, not content: left as they are)."""
    if isinstance(value, str):
        return scan.text(value)
    if isinstance(value, dict):
        changed = {k: _leaves(v, scan) for k, v in value.items()}
        return changed if any(changed[k] is not value[k] for k in value) else value
    if isinstance(value, list):
        items = [_leaves(v, scan) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def _block(block: Any, scan: _Scan) -> Any:
    """A content block: its text, or an embedded resource's text (blobs and links are not text)."""
    if not isinstance(block, dict):
        return block
    if block.get("type") == "text" and isinstance(block.get("text"), str):
        text = scan.text(block["text"])
        return block if text is block["text"] else {**block, "text": text}
    resource = block.get("resource")
    if (
        block.get("type") == "resource"
        and isinstance(resource, dict)
        and isinstance(resource.get("text"), str)
    ):
        text = scan.text(resource["text"])
        return block if text is resource["text"] else {**block, "resource": {**resource, "text": text}}
    return block


# (tenant, version, target, on arguments) -> the guardrails that apply: every call asks twice.
_APPLYING: LRUCache[tuple[int, int, str, bool], Guards] = LRUCache(maxsize=8_192)
NONE = Guards(())


def applying(catalog: Catalog, target: str, arguments: bool) -> Guards:
    if not catalog.guardrails:
        return NONE
    key = (catalog.tenant_id, catalog.version, target, arguments)
    with _LOCK:
        found = _APPLYING.get(key)
    if found is None:
        found = guards_of(tuple(
            g for g in compiled(catalog) if g.guards(target) and (g.arguments if arguments else g.results)
        ))  # fmt: skip
        with _LOCK:
            _APPLYING[key] = found
    return found


def _finish(scan: _Scan, value: Any, target: str, tenant_id: int) -> Outcome:
    if not scan.findings:
        return Outcome(value, scan.blocked)  # most values: nothing found, nothing to count
    # One line per guardrail and kind, however many times it was found: never the text found.
    for (name, action, kind), count in Counter(
        (f.guardrail, f.action, f.kind) for f in scan.findings
    ).items():  # fmt: skip
        logger.warning(
            "guardrail %r found %s (%d times) in the %s of %s (tenant %s): %s",
            name, _article(kind), count, scan.where, target, tenant_id,
            {"block": "blocked", "redact": "redacted"}.get(action, "audited"),
        )  # fmt: skip
    return Outcome(value, scan.blocked, scan.findings)


def _unread(
    guardrails: Guards, where: str, target: str, tenant_id: int, value: Any, why: str
) -> Outcome:
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
    scan = _Scan(guardrails, where, yielding)
    try:
        scanned = _shaped(value, scan, shape)
    except _TooMany:
        why = f"more than {MAX_CANDIDATES:,} candidate findings, more than a guardrail confirms"
        return _unread(guardrails, where, target, tenant_id, value, why)
    return _finish(scan, scanned, target, tenant_id)


def _shaped(value: Any, scan: _Scan, shape: str) -> Any:
    """`value` scanned where its shape carries text: "arguments" (every string leaf), "tool" (content
    and structuredContent), "prompt" (messages) or "resource" (contents)."""
    if shape == "arguments":
        return _leaves(value, scan)
    result = dict(value)
    if shape == "tool":
        if isinstance(value.get("content"), list):
            result["content"] = [_block(b, scan) for b in value["content"]]
        if "structuredContent" in value:
            result["structuredContent"] = _leaves(value["structuredContent"], scan)
    elif shape == "prompt" and isinstance(value.get("messages"), list):
        result["messages"] = [
            {**m, "content": _block(m.get("content"), scan)} if isinstance(m, dict) else m
            for m in value["messages"]
        ]
    elif shape == "resource" and isinstance(value.get("contents"), list):
        result["contents"] = [
            {**c, "text": scan.text(c["text"])}
            if isinstance(c, dict) and isinstance(c.get("text"), str)
            else c
            for c in value["contents"]
        ]
    return result


# A value of more characters than this is scanned on the scanning thread, not on the serving loop: the
# thread hands the loop the GIL every YIELD_CONFIRMATIONS confirmations (a phone number's is ~0.1 ms of
# Python) rather than when the loop takes it (every 5 ms), so another tenant waits for a turn, not a scan.
INLINE_SCAN_CHARS = 64 * 1024
YIELD_CONFIRMATIONS = 8
_SCANNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="mcp-guardrails")


def scan_now(catalog: Catalog, target: str, value: Any, where: str, shape: str) -> Outcome:
    """`value` (a call's or a prompt's arguments, or what `target` answered) through the guardrails of
    `target` on `where` ("arguments" or "result"), in this thread; `shape` says where its text is (see
    `_shaped`)."""
    guardrails = applying(catalog, target, arguments=where != "result")
    if not guardrails:
        return Outcome(value)
    return _scanned(guardrails, catalog.tenant_id, target, value, where, shape, _size(value, MAX_SCAN_CHARS))


async def scan(
    ctx: RequestContext, method: str, catalog: Catalog, target: str, value: Any, where: str, shape: str
) -> Outcome:
    """`scan_now`, on the scanning thread when the value is larger than INLINE_SCAN_CHARS; what the
    guardrails did is a governance event of the caller's (AMB-355)."""
    guardrails = applying(catalog, target, arguments=where != "result")
    if not guardrails:
        return Outcome(value)
    size = _size(value, MAX_SCAN_CHARS)
    if size <= INLINE_SCAN_CHARS:
        outcome = _scanned(guardrails, catalog.tenant_id, target, value, where, shape, size, yielding=False)
    else:
        outcome = await asyncio.get_running_loop().run_in_executor(
            _SCANNER, _scanned, guardrails, catalog.tenant_id, target, value, where, shape, size
        )
    _record(ctx, method, outcome, target, where)
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
