"""What of a verified token's claims a policy may read (`caller.claims`, AMB-359): one spelling per set
of claims, without the claims that change with every token, bounded in bytes and in depth."""

from __future__ import annotations

import json

from mcp_app.core.context import MAX_CLAIMS_BYTES, kept_claims


def test_claims_are_kept_sorted_and_compact_without_those_that_change_with_every_token() -> None:
    kept = kept_claims({"sub": "sam", "groups": ["b", "a"], "iat": 1, "exp": 2, "nbf": 0, "jti": "x", "n": 3})
    assert kept == '{"groups":["b","a"],"n":3,"sub":"sam"}'
    assert kept_claims({"exp": 2}) == "" and kept_claims({}) == ""
    again = kept_claims({"n": 3, "jti": "other", "sub": "sam", "groups": ["b", "a"]})
    assert again == kept  # another token of the same person: the same caller


def test_a_claim_past_the_bound_is_left_out_and_the_others_kept() -> None:
    claims = {"groups": [f"group-{i:05}" for i in range(2_000)], "email": "sam@example.com", "a": 1}
    kept = json.loads(kept_claims(claims))
    assert kept == {"a": 1, "email": "sam@example.com"}
    many = {f"c{i:05}": "x" * 90 for i in range(1_000)}  # 100 KB of small claims: the first that fit
    assert 0 < len(kept_claims(many)) <= MAX_CLAIMS_BYTES + 2
    deep: dict = {"leaf": 1}
    for _ in range(50):
        deep = {"d": deep}
    assert json.loads(kept_claims({"deep": deep, "flat": {"x": [1, {"y": 2}]}, 7: "not a name"})) == {
        "flat": {"x": [1, {"y": 2}]}
    }
