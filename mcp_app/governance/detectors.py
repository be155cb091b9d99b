"""What a guardrail looks for (AMB-354): detect-secrets' plugins' patterns, personal data confirmed by
a checksum or a numbering plan, or an owner's pattern; every one compiled by RE2 (linear time).

detect-secrets' patterns run without their look-arounds, which RE2 lacks: a look-behind for a non-word
character and a look-ahead for the end of a token only narrow a match, so a scan finds a little more,
never less. Its entropy and keyword plugins guess (many false alarms in ordinary results) and its IP
plugin finds no secret: they are left out.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import phonenumbers
import re2
from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from stdnum import iban as stdnum_iban
from stdnum import luhn

logger = logging.getLogger("mcp.governance")

MAX_PATTERN_CHARS = 1_000
# The phone numbers a number without "+" is read as (libphonenumber's region code).
PHONE_REGION = "US"
DETECTORS = ("secrets", "personal_data", "card", "iban", "email", "phone", "pattern")
PERSONAL = ("card", "iban", "email", "phone")


class PatternError(ValueError):
    """An owner's pattern RE2 cannot run, and why."""


def options() -> Any:
    options = re2.Options()
    options.log_errors = False  # an owner's typo is answered to the owner, not written to stderr
    options.max_mem = 8 << 20  # the compiled program's memory: a huge pattern fails to compile instead
    return options


def compile_pattern(source: str) -> Any:
    """An owner's pattern, compiled by RE2, or PatternError saying why it cannot be."""
    if not source:
        raise PatternError("A pattern guardrail needs a pattern.")
    if len(source) > MAX_PATTERN_CHARS:
        raise PatternError(f"A pattern has at most {MAX_PATTERN_CHARS} characters.")
    try:
        compiled = re2.compile(source, options=options())
    except re2.error as exc:
        reason = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise PatternError(
            f"Not a pattern RE2 can run (RE2 has no look-around or back-references): {reason}."
        ) from None
    if compiled.search("") is not None:
        raise PatternError("The pattern matches the empty text: it would find something everywhere.")
    return compiled


@dataclass(frozen=True)
class Detector:
    kind: str  # named in the marker and the block message: "GitHub Token", "card number"
    pattern: Any  # re2._Regexp
    confirm: Callable[[str], bool] | None = None  # a candidate counts only when this holds


def _digits(text: str) -> str:
    return "".join(c for c in text if c.isdigit())


def _is_card(candidate: str) -> bool:
    digits = _digits(candidate)
    return 13 <= len(digits) <= 19 and luhn.is_valid(digits)


def _is_iban(candidate: str) -> bool:
    # Written in groups of four, an IBAN may run into a following capitalised word: try without it.
    parts = candidate.split(" ")
    return any(
        stdnum_iban.is_valid("".join(parts[:end])) for end in range(len(parts), max(len(parts) - 3, 0), -1)
    )


def _is_phone(candidate: str) -> bool:
    try:
        number = phonenumbers.parse(candidate, None if candidate.startswith("+") else PHONE_REGION)
    except phonenumbers.NumberParseException:
        return False
    return bool(phonenumbers.is_valid_number(number))


def _personal() -> dict[str, Detector]:
    def rx(source: str) -> Any:
        return re2.compile(source, options=options())

    return {
        "card": Detector("card number", rx(r"\b\d(?:[ -]?\d){12,18}\b"), _is_card),
        "iban": Detector(
            "IBAN",
            rx(r"\b[A-Z]{2}\d{2}(?:[A-Z0-9]{11,30}|(?: [A-Z0-9]{4}){2,8}(?: [A-Z0-9]{1,4})?)\b"),
            _is_iban,
        ),
        "email": Detector(
            "e-mail address",
            rx(r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9-]{1,63}(?:\.[A-Za-z0-9-]{1,63})*\.[A-Za-z]{2,24}\b"),
        ),
        # International ("+44 20 7946 0958") or national with separators ("(415) 555-2671"): a bare
        # run of digits is an id far more often than a phone number, and is left to the card check.
        "phone": Detector(
            "phone number",
            rx(r"\+\d[\d ().-]{5,18}\d\b|(?:\(\d{2,4}\) ?|\b\d{2,4}[ .-])\d{2,4}[ .-]\d{3,5}\b"),
            _is_phone,
        ),
    }


# detect-secrets' plugins match without RE2's missing pieces once their look-arounds are dropped: a
# look-behind for a non-word character and a look-ahead for the end of a token only narrow a match,
# so without them a scan finds a little more, never less. Plugins that are not secrets (a public IP
# address) or guess (entropy, keywords: many false alarms in ordinary results) are left out.
_LEFT_OUT_PLUGINS = frozenset(
    {"Base64HighEntropyString", "HexHighEntropyString", "KeywordDetector", "IPPublicDetector"}
)
_LOOKAROUNDS = (
    (re.compile(r"\(\?:\(\?<=\\W\)\|\(\?<=\^\)\)"), ""),
    (re.compile(r"\(\?<=\\W\)|\(\?<=\^\)"), ""),
    (re.compile(r"\(\?!(?:\\w|\[[^\]]*\])\)"), ""),
    (re.compile(r"\{(\d+),(\d{4,})\}"), r"{\1,1000}"),  # RE2 repeats at most 1,000 times
)


def _secret_detectors() -> tuple[Detector, ...]:
    found: list[Detector] = []
    plugins: dict[str, Any] = get_mapping_from_secret_type_to_class()
    for kind, plugin in sorted(plugins.items()):
        if plugin.__name__ in _LEFT_OUT_PLUGINS:
            continue
        for regex in getattr(plugin(), "denylist", ()) or ():
            if regex.flags & re.VERBOSE:
                continue  # RE2 reads no comments in a pattern; none of these is a secret's only pattern
            source = regex.pattern
            for lookaround, replacement in _LOOKAROUNDS:
                source = lookaround.sub(replacement, source)
            if regex.flags & re.IGNORECASE:
                source = "(?i)" + source
            try:
                found.append(Detector(kind, re2.compile(source, options=options())))
            except re2.error:
                logger.warning("detect-secrets' pattern of %s cannot run in RE2 and is left out", kind)
    # The plugin finds a private key by its first line; the key is the block under it, to its last line
    # (or to the end of the text, when that line never comes).
    found.append(Detector("Private Key", re2.compile(_PEM_BLOCK, options=options())))
    return tuple(found)


_PEM_BLOCK = r"(?s)-----BEGIN[A-Z ]{0,40} PRIVATE KEY( BLOCK)?-----.*?(?:-----END[A-Z ]{0,40} PRIVATE KEY( BLOCK)?-----|$)"


_SHARED: dict[str, Any] = {}
_SHARED_LOCK = threading.Lock()


def _shared(name: str) -> Any:
    """The detectors every tenant shares, compiled once a process, on first use."""
    with _SHARED_LOCK:
        if not _SHARED:
            _SHARED["personal"] = _personal()
            _SHARED["secrets"] = _secret_detectors()
        return _SHARED[name]


def detectors_of(detector: str, pattern: str, name: str) -> tuple[Detector, ...]:
    if detector == "secrets":
        return tuple(_shared("secrets"))
    personal: dict[str, Detector] = _shared("personal")
    if detector == "personal_data":
        return tuple(personal[k] for k in PERSONAL)
    if detector in personal:
        return (personal[detector],)
    if detector == "pattern":
        return (Detector(f"match of {name}", compile_pattern(pattern)),)
    raise PatternError(f"Unknown detector {detector!r}.")
