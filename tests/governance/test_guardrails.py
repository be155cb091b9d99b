"""The guardrails' scanner (AMB-354, governance/guardrails.py): each detector finds what it names and
not what merely looks like it, a redaction reaches `content` and `structuredContent` alike, a block
never repeats what it found, and what an owner or an upstream writes cannot make a scan unbounded."""

from __future__ import annotations

import asyncio
import itertools
import threading
from types import SimpleNamespace
from typing import Any

import pytest

from mcp_app.core.types import Catalog, GuardrailDef
from mcp_app.governance import audit, guardrails, scanning
from mcp_app.governance.detectors import PatternError, compile_pattern

GITHUB = "ghp_" + "a1B2c3D4e5" * 3 + "f6G7h8"  # 36 characters after the prefix
AWS = "AKIA" + "ABCDEFGHIJKLMNOP"
CARD = "4111 1111 1111 1111"  # Luhn-valid
NOT_A_CARD = "4111 1111 1111 1112"
IBAN = "DE89 3704 0044 0532 0130 00"
NOT_AN_IBAN = "DE00 3704 0044 0532 0130 00"
_versions = itertools.count(1)


def catalog(*rows: GuardrailDef) -> Catalog:
    # A tenant id no database gives: compiled guardrails are kept per (tenant, version) in the process.
    return Catalog(tenant_id=-1, version=next(_versions), guardrails=rows)


def guard(detector: str, action: str = "redact", where: str = "both", **kwargs: str) -> GuardrailDef:
    return GuardrailDef(name=kwargs.pop("name", detector), detector=detector, pattern=kwargs.pop("pattern", ""),
                        where=where, action=action, **kwargs)  # fmt: skip


def scanned(rows: Catalog, text: str) -> str:
    outcome = guardrails.scan_now(
        rows, "echo", {"content": [{"type": "text", "text": text}]}, "result", "tool"
    )
    assert outcome.blocked is None
    return str(outcome.value["content"][0]["text"])


@pytest.mark.parametrize(
    ("detector", "found", "kind"),
    [
        ("secrets", GITHUB, "GitHub Token"),
        ("secrets", AWS, "AWS Access Key"),
        (
            "secrets",
            "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
            "Private Key",
        ),
        ("secrets", "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1r", "Private Key"),  # cut short
        ("card", CARD, "card number"),
        ("card", "4111-1111-1111-1111", "card number"),
        ("iban", IBAN, "IBAN"),
        ("iban", "GB82WEST12345698765432", "IBAN"),
        ("email", "ada.lovelace+mcp@example.co.uk", "e-mail address"),
        ("phone", "+44 20 7946 0958", "phone number"),
        ("phone", "(415) 555-2671", "phone number"),
    ],
)
def test_each_detector_redacts_what_it_names(detector: str, found: str, kind: str) -> None:
    if found.startswith("-----BEGIN OPENSSH"):  # no last line: the rest of the text is the key
        assert scanned(catalog(guard(detector)), f"before {found}") == f"before [redacted {kind}]"
        return
    assert scanned(catalog(guard(detector)), f"before {found} after") == f"before [redacted {kind}] after"


@pytest.mark.parametrize(
    ("detector", "text"),
    [
        ("card", f"order {NOT_A_CARD}"),  # sixteen digits that fail Luhn
        ("iban", f"ref {NOT_AN_IBAN}"),  # the shape of an IBAN, not its checksum
        ("phone", "id 123456789, on 2024-01-01T00:00:00Z, version 1.2.3, 1234"),
        ("phone", "+1 000 000 0000"),  # no such number plan
        ("email", "a@b, @home, user@localhost"),
        ("secrets", "ghp_short and AKIA lowercase akiaabcdefghijklmnop"),
    ],
)
def test_what_only_looks_like_it_is_left_alone(detector: str, text: str) -> None:
    assert scanned(catalog(guard(detector)), text) == text


def test_personal_data_is_all_four_and_a_redaction_reaches_every_text_of_a_result() -> None:
    result = {
        "content": [
            {"type": "text", "text": f"mail bob@example.com, pay {IBAN}"},
            {"type": "resource", "resource": {"uri": "x://a", "text": f"card {CARD}"}},
            {"type": "image", "data": "Ym9iQGV4YW1wbGUuY29t", "mimeType": "image/png"},
        ],
        "structuredContent": {"contacts": [{"phone": "+44 20 7946 0958", "mail": "bob@example.com", "n": 3}]},
    }
    outcome = guardrails.scan_now(
        catalog(guard("personal_data", where="results")), "echo", result, "result", "tool"
    )
    assert outcome.value == {
        "content": [
            {"type": "text", "text": "mail [redacted e-mail address], pay [redacted IBAN]"},
            {"type": "resource", "resource": {"uri": "x://a", "text": "card [redacted card number]"}},
            {"type": "image", "data": "Ym9iQGV4YW1wbGUuY29t", "mimeType": "image/png"},  # not text
        ],
        "structuredContent": {
            "contacts": [{"phone": "[redacted phone number]", "mail": "[redacted e-mail address]", "n": 3}]
        },
    }
    assert result["structuredContent"]["contacts"][0]["mail"] == "bob@example.com"  # the input is not changed


def test_a_block_names_the_guardrail_and_the_kind_never_the_text_found() -> None:
    rows = catalog(guard("secrets", action="block", name="no-keys"))
    outcome = guardrails.scan_now(rows, "echo", {"token": f"use {GITHUB} please"}, "arguments", "arguments")
    assert outcome.blocked is not None
    assert outcome.blocked.message() == "Blocked by guardrail 'no-keys': the arguments held a GitHub Token."
    assert GITHUB not in outcome.blocked.message()


def test_audit_changes_nothing_and_says_what_it_saw_once_per_text(caplog) -> None:
    rows = catalog(guard("email", action="audit", name="watch-mail"))
    text = "a@example.com b@example.com"
    outcome = guardrails.scan_now(rows, "echo", {"m": text}, "arguments", "arguments")
    assert outcome.value == {"m": text} and outcome.blocked is None
    assert [(f.guardrail, f.action, f.kind) for f in outcome.findings] == [
        ("watch-mail", "audit", "e-mail address")
    ]
    assert "example.com" not in caplog.text and "watch-mail" in caplog.text


def test_a_guardrail_on_one_tool_or_on_arguments_only_leaves_the_rest_alone() -> None:
    rows = catalog(guard("email", tool="other"), guard("card", where="arguments", name="cards-in"))
    text = f"bob@example.com {CARD}"
    assert scanned(rows, text) == text  # echo's result: neither applies
    outcome = guardrails.scan_now(rows, "echo", {"m": text}, "arguments", "arguments")
    assert outcome.value == {"m": "bob@example.com [redacted card number]"}


def test_an_owner_pattern_runs_in_re2_and_one_it_cannot_run_is_refused_saying_why() -> None:
    rows = catalog(guard("pattern", pattern=r"INT-[0-9]{6}", name="internal-ids"))
    assert scanned(rows, "see INT-123456 and int-1") == "see [redacted match of internal-ids] and int-1"
    for source, why in [
        (r"(?<=x)y", "look-around"),
        (r"(a)\1", "back-references"),
        (r"a*", "empty text"),
        ("", "needs a pattern"),
        ("a" * 1001, "at most 1000"),
        ("(", "missing )"),
    ]:
        with pytest.raises(PatternError, match=why.replace("(", r"\(").replace(")", r"\)")):
            compile_pattern(source)


def test_a_pattern_meant_to_backtrack_runs_in_linear_time() -> None:
    # (a+)+$ on "aaa…b" takes Python's re exponential time; in RE2 it is one pass.
    rows = catalog(guard("pattern", pattern=r"(a+)+$", name="evil", action="block"))
    outcome = guardrails.scan_now(rows, "echo", {"m": "a" * 100_000 + "b"}, "arguments", "arguments")
    assert outcome.blocked is None


def test_a_value_too_large_to_read_is_blocked_by_a_redacting_guardrail_and_only_logged_by_an_auditing_one(
    monkeypatch,
) -> None:
    monkeypatch.setattr(guardrails, "MAX_SCAN_CHARS", 1_000)
    big = {"m": "x" * 1_001}
    blocked = guardrails.scan_now(catalog(guard("email", name="mail")), "echo", big, "arguments", "arguments")
    assert blocked.blocked is not None and "more than 1,000 characters" in blocked.blocked.message()
    audited = guardrails.scan_now(
        catalog(guard("email", action="audit")), "echo", big, "arguments", "arguments"
    )
    assert audited.blocked is None and audited.value is big


def test_more_candidates_than_a_scan_confirms_fail_closed() -> None:
    text = " ".join(["+44 20 7946 0958"] * (scanning.MAX_CANDIDATES + 1))
    outcome = guardrails.scan_now(catalog(guard("phone")), "echo", {"m": text}, "arguments", "arguments")
    assert outcome.blocked is not None and "more than 10,000 candidate findings" in outcome.blocked.message()


async def test_a_large_value_is_scanned_off_the_serving_loop(monkeypatch) -> None:
    seen: list[tuple[str, bool]] = []
    real = guardrails._scanned

    def recording(*args: Any, yielding: bool = True) -> guardrails.Outcome:
        seen.append((threading.current_thread().name, yielding))
        return real(*args, yielding=yielding)

    monkeypatch.setattr(guardrails, "_scanned", recording)
    rows = catalog(guard("email"))
    caller = SimpleNamespace(tenant=SimpleNamespace(id=-1, audit_sampling=()), client_id=None, subject=None, user_id=7)
    audit.take()
    small = await guardrails.scan(caller, "tools/call", rows, "echo", {"m": "bob@example.com"}, "arguments", "arguments")
    large = await guardrails.scan(
        caller, "tools/call", rows, "echo", {"m": "x" * 70_000 + " bob@example.com"}, "arguments", "arguments"
    )
    assert small.value == {"m": "[redacted e-mail address]"}
    assert large.value["m"].endswith(" [redacted e-mail address]")
    # The scanning thread hands the loop the GIL as it confirms; the loop itself has no one to hand it to.
    assert seen[0] == ("MainThread", False)
    assert seen[1][0].startswith("mcp-guardrails") and seen[1][1] is True
    assert asyncio.get_running_loop().is_running()
    # Each is a governance event of the caller's, naming what was found, never the text (AMB-355).
    events = [e for e in audit.take()[0] if e.tenant_id == -1]
    assert [(e.kind, e.rule, e.target, e.caller, e.detail) for e in events] == [
        ("redacted", "email", "echo", "user:7", {"found": "e-mail address", "count": 1, "in": "arguments"})
    ] * 2


def test_a_lone_surrogate_is_read_as_a_replacement_and_passes_unchanged_when_nothing_is_found() -> None:
    rows = catalog(guard("email"))
    assert scanned(rows, "\ud800 plain") == "\ud800 plain"
    assert scanned(rows, "\ud800 bob@example.com \udfff") == "\ud800 [redacted e-mail address] \udfff"


def test_one_set_over_every_guardrail_picks_the_patterns_to_run_and_too_many_fall_back_to_each_its_own() -> None:
    rows = catalog(guard("secrets", "block", name="keys"), guard("personal_data", name="people"),
                   guard("pattern", pattern=r"PRJ-\d{6}", name="codes"))  # fmt: skip
    guards = guardrails.applying(rows, "echo", arguments=True)
    assert guards.prefilter is not None and len(guards.owners) == sum(len(g.detectors) for g in guards)
    assert guards.candidates("nothing to see here") == {}
    assert [d.kind for d in guards.candidates("ann@example.com, PRJ-123456")[1]] == ["e-mail address"]
    assert scanned(rows, "write to ann@example.com about PRJ-123456") == (
        "write to [redacted e-mail address] about [redacted match of codes]"
    )
    # Patterns that RE2 runs one by one but not all in one set (its memory bound): each guardrail its own.
    heavy = catalog(*(guard("pattern", pattern=rf"\pL{{150}}{i}", name=f"p{i}") for i in range(20)),
                    guard("email", name="mail"))  # fmt: skip
    assert guardrails.applying(heavy, "echo", arguments=False).prefilter is None
    assert scanned(heavy, "ann@example.com " + "a" * 150 + "7") == "[redacted e-mail address] [redacted match of p7]"


@pytest.mark.parametrize(
    ("pattern", "text"),
    [(r"^secret-\d+$", "secret-42"), (r"\bKEY\b", "KEY"), (r"(?i)^x{3}", "XXX and more"), (r"end$", "the end"),
     (r"a\s+b", "a \t b")],
)  # fmt: skip
def test_one_pass_over_a_values_texts_finds_what_each_text_alone_would(pattern: str, text: str) -> None:
    rows = catalog(guard("pattern", pattern=pattern, name="p", action="block"))
    guards = guardrails.applying(rows, "echo", arguments=True)
    assert guards.whole is not None
    value = {"before": "nothing here", "nested": [{"x": "more of nothing"}, text], "after": "the rest"}
    outcome = guardrails.scan_now(rows, "echo", value, "arguments", "arguments")
    assert outcome.blocked is not None, (pattern, text)
    assert guardrails.scan_now(rows, "echo", {"a": "nothing", "b": "at all"}, "arguments", "arguments").blocked is None


def test_a_pattern_on_the_very_ends_of_a_text_is_asked_text_by_text() -> None:
    rows = catalog(guard("pattern", pattern=r"\Asecret\z", name="p", action="block"))
    assert guardrails.applying(rows, "echo", arguments=True).whole is None
    blocked = guardrails.scan_now(rows, "echo", {"a": "nothing", "b": "secret"}, "arguments", "arguments")
    assert blocked.blocked is not None


@pytest.mark.parametrize(
    ("shape", "value"),
    [
        ("arguments", {"a": "one", "b": [{"c": "two", "d": 3, "e": None}, "three", ""], "f": {"g": {"h": "four"}}}),
        ("tool", {"content": [{"type": "text", "text": "one"}, {"type": "image", "data": "AAAA"},
                              {"type": "resource", "resource": {"uri": "x:/", "text": "two"}},
                              {"type": "resource", "resource": {"uri": "x:/", "blob": "AAAA"}}, "odd"],
                  "structuredContent": {"a": ["three", {"b": "four"}], "c": 5}, "isError": False}),
        ("tool", {"content": "not a list", "structuredContent": "five"}),
        ("prompt", {"messages": [{"role": "user", "content": {"type": "text", "text": "one"}}, "odd",
                                 {"role": "user", "content": {"type": "resource", "resource": {"text": "two"}}}]}),
        ("resource", {"contents": [{"uri": "x:/", "text": "one"}, {"uri": "x:/", "blob": "AAAA"}, {"text": 3}]}),
    ],
)  # fmt: skip
def test_the_texts_asked_first_are_the_texts_a_scan_reads(shape: str, value: dict[str, Any]) -> None:
    # `texts_of` gathers, without copies, what `shaped` hands a scan: a text it left out would pass
    # every guardrail unread whenever the first question (one RE2 match of them all) says "nothing".
    gathered = scanning.Gather()
    scanning.shaped(value, gathered, shape)
    assert scanning.texts_of(value, shape) == gathered.texts
    assert gathered.texts  # the cases hold texts to find
