"""One value's scan by the guardrails of a target (AMB-354): which patterns may match a text (one RE2
set over every pattern of them all), each candidate confirmed within a budget, what is redacted, where a
result's, a prompt's or a resource's text is. Which guardrails apply, the bounds of what is read and
where a scan runs: guardrails.py; what each looks for: detectors.py."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import re2

from mcp_app.governance.detectors import Detector, options

logger = logging.getLogger("mcp.governance")

MAX_CONFIRMATIONS = 2_000
MAX_CANDIDATES = 10_000
# Off the serving loop, the scanning thread hands the loop the GIL every YIELD_CONFIRMATIONS
# confirmations (a phone number's is ~0.1 ms of Python) rather than when the loop takes it (every 5 ms).
YIELD_CONFIRMATIONS = 8


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


@dataclass(frozen=True)
class Guards:
    """The guardrails that apply to one target's arguments or results, in order, and one RE2 set of
    every pattern of all of them: one pass over a text says which patterns may match it, so a text
    with nothing to find (most of them) costs one match, not one per guardrail (AMB-354)."""

    rows: tuple[Compiled, ...]
    prefilter: Any = None  # re2.Set, or None when the patterns together outgrow RE2's memory bound
    owners: tuple[tuple[int, int], ...] = ()  # a pattern's index in it -> (row, detector) indices
    # The same patterns in multi-line mode, for all the texts of one value joined by newlines (`may_find`);
    # None when a pattern reads a text's very ends (\A, \z) or turns multi-line mode off.
    whole: Any = None

    def __bool__(self) -> bool:
        return bool(self.rows)

    def __iter__(self) -> Iterator[Compiled]:
        return iter(self.rows)

    def may_find(self, texts: list[str]) -> bool:
        """Whether any pattern may match any of `texts`: one pass over them joined by newlines, where
        `^` and `$` (multi-line) match at each text's ends as they do alone and a newline is no word
        character, so a match within one text is a match within the joined ones (a match across two
        is only a pass more). Each RE2 call costs tens of microseconds once other requests have moved
        RE2 out of the processor's caches (1 µs in a tight loop): one call a value, not one a text."""
        if self.whole is None:
            return True
        joined = "\n".join(texts)
        try:  # encoded once here: given a str, RE2's wrapper would encode what `readable` encoded already
            data = joined.encode("utf-8")
        except UnicodeEncodeError:
            data = readable(joined).encode("utf-8")
        return self.whole.Match(data) is not None

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
    return Guards(rows, prefilter, tuple(owners), _whole(rows))


def _whole(rows: tuple[Compiled, ...]) -> Any:
    sources = [d.pattern.pattern for g in rows for d in g.detectors]
    if any(r"\A" in p or r"\z" in p or "-m" in p for p in sources):
        return None  # it reads where the whole text begins or ends: the texts are asked one by one
    whole = re2.Set.SearchSet(options())
    try:
        for source in sources:
            whole.Add(f"(?m){source}")
        whole.Compile()
    except re2.error:
        return None
    return whole


class Gather:
    """Takes the place of a Scan in `shaped` and keeps the texts it would scan (`Guards.may_find`)."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def text(self, text: str) -> str:
        if text:
            self.texts.append(text)
        return text


class Scan:
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
                    raise TooMany
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
        legible = readable(text)
        candidates = self.guardrails.candidates(legible)
        if candidates == {}:
            return text  # no pattern of any guardrail matches anywhere in it
        cut: list[tuple[int, int, str]] = []
        for row, guardrail in enumerate(self.guardrails.rows):
            detectors = None if candidates is None else candidates.get(row)
            if candidates is not None and detectors is None:
                continue
            for start, end, kind in self.spans(guardrail, legible, detectors):
                self.findings.append(Finding(guardrail.name, guardrail.action, kind))
                if guardrail.action == "block":
                    self.blocked = Blocked(guardrail.name, article(kind), self.where)
                    return text
                if guardrail.action == "redact":
                    cut.append((start, end, kind))
                else:
                    break  # audit: once per text is enough to say it was there
        return redacted(text, cut) if cut else text


class TooMany(Exception):
    """More candidates than one scan confirms: a blocking or redacting guardrail blocks (fail closed)."""


def readable(text: str) -> str:
    """`text` as RE2 can read it: valid UTF-8. JSON allows a lone surrogate, which UTF-8 cannot hold;
    it is read as U+FFFD, one code point for one, so what is found is cut at the same places of the
    text as it came (which is what passes when nothing is found)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in text)
    return text


def article(kind: str) -> str:
    return f"an {kind}" if kind[:1].lower() in "aeiou" or kind.startswith("IBAN") else f"a {kind}"


def redacted(text: str, spans: list[tuple[int, int, str]]) -> str:
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


def size_of(value: Any, budget: int) -> int:
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


def leaves(value: Any, scan: Scan | Gather) -> Any:
    """`value` with each string leaf scanned (dict keys are names, not content: left as they are)."""
    if isinstance(value, str):
        return scan.text(value)
    if isinstance(value, dict):
        changed = {k: leaves(v, scan) for k, v in value.items()}
        return changed if any(changed[k] is not value[k] for k in value) else value
    if isinstance(value, list):
        items = [leaves(v, scan) for v in value]
        return items if any(a is not b for a, b in zip(items, value, strict=True)) else value
    return value


def block(block: Any, scan: Scan | Gather) -> Any:
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


def texts_of(value: Any, shape: str) -> list[str]:
    """The texts `shaped` would scan in `value`, in its order, gathered without building the copies a
    scan that changes nothing would then throw away (the first question of each value, `may_find`).
    tests/governance/test_guardrails.py holds it to `shaped` with a `Gather`."""
    texts: list[str] = []
    if shape == "arguments":
        _string_leaves(value, texts)
    elif shape == "tool":
        content = value.get("content")
        if isinstance(content, list):
            for item in content:
                _block_text(item, texts)
        if "structuredContent" in value:
            _string_leaves(value["structuredContent"], texts)
    elif shape == "prompt":
        messages = value.get("messages")
        if isinstance(messages, list):
            for message in messages:
                if isinstance(message, dict):
                    _block_text(message.get("content"), texts)
    elif shape == "resource":
        contents = value.get("contents")
        if isinstance(contents, list):
            for item in contents:
                if isinstance(item, dict) and isinstance(item.get("text"), str) and item["text"]:
                    texts.append(item["text"])
    return texts


def _string_leaves(value: Any, texts: list[str]) -> None:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if item:
                texts.append(item)
        elif isinstance(item, dict):
            stack.extend(reversed(item.values()))
        elif isinstance(item, list):
            stack.extend(reversed(item))


def _block_text(item: Any, texts: list[str]) -> None:
    if not isinstance(item, dict):
        return
    if item.get("type") == "text" and isinstance(item.get("text"), str):
        if item["text"]:
            texts.append(item["text"])
        return
    resource = item.get("resource")
    if (
        item.get("type") == "resource"
        and isinstance(resource, dict)
        and isinstance(resource.get("text"), str)
        and resource["text"]
    ):
        texts.append(resource["text"])


def shaped(value: Any, scan: Scan | Gather, shape: str) -> Any:
    """`value` scanned where its shape carries text: "arguments" (every string leaf), "tool" (content
    and structuredContent), "prompt" (messages) or "resource" (contents)."""
    if shape == "arguments":
        return leaves(value, scan)
    result = dict(value)
    if shape == "tool":
        if isinstance(value.get("content"), list):
            result["content"] = [block(b, scan) for b in value["content"]]
        if "structuredContent" in value:
            result["structuredContent"] = leaves(value["structuredContent"], scan)
    elif shape == "prompt" and isinstance(value.get("messages"), list):
        result["messages"] = [
            {**m, "content": block(m.get("content"), scan)} if isinstance(m, dict) else m
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
