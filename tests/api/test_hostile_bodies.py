"""A table of hostile request bodies against the API's writes: each a 4xx in the one error shape, never a 500.

DRF's own JSON parser recursed once per level, so a body nested a few thousand deep was a
RecursionError and a 500 on every write (AMB-115, AMB-119). Each row is sent by alice, an owner, so
only the body can be at fault; afterwards nothing was written and an ordinary write still works.
"""

from __future__ import annotations

import json

import pytest

from mcp_app.content import forked
from mcp_app.models import Prompt, Resource, Tool
from tenants.models import Membership
from tests.api.conftest import API, tool_body

pytestmark = pytest.mark.django_db

BASE = f"{API}/tenant-a"
LIMIT = 64  # MCP_MAX_JSON_DEPTH's default


def nested_list(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


def nested_object(levels: int) -> bytes:
    return b'{"a":' * levels + b"1" + b"}" * levels


def schema_of_depth(levels: int) -> bytes:
    """A whole tool whose input schema nests `levels` deep (its default value makes the depth)."""
    default = json.loads(nested_list(levels - 1))
    return json.dumps(tool_body(input_schema={"type": "object", "default": default})).encode()


def in_field(field: str, levels: int) -> bytes:
    return b'{"name": "x", "' + field.encode() + b'": ' + nested_list(levels) + b"}"


PATHS = {
    "tools": ("POST", f"{BASE}/tools/"),
    "prompts": ("POST", f"{BASE}/prompts/"),
    "resources": ("POST", f"{BASE}/resources/"),
    "members": ("POST", f"{BASE}/members/"),
    "import": ("POST", f"{BASE}/import"),
    "import-openapi": ("POST", f"{BASE}/import-openapi"),
    "settings": ("PATCH", f"{BASE}/"),
}

# (row id, endpoint, body, status, error code, a phrase of the message)
ROWS: list[tuple[str, str, bytes, int, str, str]] = [
    *[
        (f"{name} nested 3,000 deep", name, nested_list(3_000), 400, "parse_error", f"{LIMIT} levels")
        for name in PATHS
    ],
    ("import nested 50,000 deep", "import", nested_object(50_000), 400, "parse_error", f"{LIMIT} levels"),
    ("tools with a field nested 10,000 deep", "tools", in_field("input_schema", 10_000), 400, "parse_error", "64"),
    ("import of a megabyte of [", "import", b"[" * 1_000_000, 400, "parse_error", f"{LIMIT} levels"),
    ("tools one past the limit", "tools", in_field("input_schema", LIMIT), 400, "parse_error", f"{LIMIT} levels"),
    ("tools NaN", "tools", b'{"name": "x", "timeout_seconds": NaN}', 400, "parse_error", "NaN"),
    ("tools not UTF-8", "tools", b'{"name": "\xff\xfe"}', 400, "parse_error", "JSON parse error"),
    ("tools truncated", "tools", b'{"name": "x", "input_', 400, "parse_error", "JSON parse error"),
    ("prompts escaped quotes then brackets", "prompts", b'"' + b'\\"' * 20_000 + b"[" * 100, 400, "parse_error", "Unterminated"),
    # Parsed (within the limit) but deeper than a definition's share of it: the field says so (full_clean).
    ("tools schema past the definitions' share", "tools", schema_of_depth(LIMIT - 7), 400, "invalid", "56 levels"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("row", "endpoint", "body", "status", "code", "says"), ROWS, ids=[r[0] for r in ROWS]
)
def test_a_hostile_body_gets_its_exact_answer_and_changes_nothing(
    as_alice, tenant_a, row, endpoint, body, status, code, says
):
    members = Membership.objects.count()
    method, path = PATHS[endpoint]
    response = getattr(as_alice, method.lower())(
        path, body, content_type="application/json", **as_alice._headers({})
    )
    assert response.status_code == status, response.content[:300]
    error = response.json()["error"]
    assert error["code"] == code
    assert says in error["message"] + " ".join(sum(error.get("fields", {}).values(), []))
    assert not (Tool.objects.exists() or Prompt.objects.exists() or Resource.objects.exists())
    assert Membership.objects.count() == members
    assert as_alice.call("POST", f"{BASE}/tools/", tool_body()).status_code == 201


def test_a_schema_at_the_definitions_share_is_saved(as_alice, tenant_a):
    response = as_alice.post(
        f"{BASE}/tools/", schema_of_depth(LIMIT - 8), content_type="application/json", **as_alice._headers({})
    )
    assert response.status_code == 201, response.content[:300]


def test_the_table_covers_every_write_named_in_the_issue():
    assert {r[1] for r in ROWS} >= {"tools", "prompts", "resources", "members", "import"}


def test_an_import_whose_process_was_lost_is_a_503_that_says_so(as_alice, tenant_a, monkeypatch):
    """The work's process died, outlived its deadline or never got its turn (content/forked.py): a 503
    whose message says which, never a 500."""

    def lost(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        raise forked.Lost("The work's process ended before it answered; see the server's log.")

    monkeypatch.setattr(forked, "runs_here", lambda: False)
    monkeypatch.setattr(forked, "_run_forked", lost)
    document = {"format": "mcp-platform/tenant", "version": 1, "tools": [tool_body()]}
    response = as_alice.call("POST", f"{BASE}/import", document)
    assert response.status_code == 503, response.content[:300]
    assert response.json()["error"] == {
        "code": "unfinished",
        "message": "The work's process ended before it answered; see the server's log. Try again.",
    }
    assert not Tool.objects.exists()
