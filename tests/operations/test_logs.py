"""Structured logs (core/logs.py): JSON lines carrying the request's fields, and never its secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from daphne.access import AccessLogGenerator

from mcp_app.core import logs
from mcp_app.models import Tool
from mcp_app.transport import daphne_tuning
from tests.transport.support import Client

pytestmark = pytest.mark.django_db(transaction=True)

SECRET_ARGUMENT = "hunter2-do-not-log"


@pytest.fixture
def json_lines() -> Iterator[io.StringIO]:
    """The handler settings.LOGGING builds for LOG_FORMAT=json, on the request log and mcp_app."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(logs.RequestFields())
    handler.setFormatter(logs.JsonFormatter())
    base, requests = logging.getLogger("mcp_app"), logging.getLogger("mcp_app.requests")
    level = requests.level
    base.addHandler(handler)  # the request log propagates to it
    requests.setLevel(logging.INFO)
    yield stream
    base.removeHandler(handler)
    requests.setLevel(level)


@pytest.fixture
def echo_tool(tenant_a):
    Tool.objects.create(
        tenant=tenant_a,
        name="echo",
        input_schema={"type": "object", "properties": {"message": {"type": "string"}}},
        handler="python",
        handler_config={"callable": "echo"},
    )


def records(stream: io.StringIO) -> list[dict]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


async def test_each_answered_request_is_one_json_line_with_its_fields_and_none_of_its_arguments(
    echo_tool, json_lines
):
    client = Client()
    await client.initialize()
    reply = await client.request("tools/call", {"name": "echo", "arguments": {"message": SECRET_ARGUMENT}})
    assert reply.status == 200
    lines = [r for r in records(json_lines) if r.get("method") == "tools/call"]
    assert len(lines) == 1
    line = lines[0]
    assert line["logger"] == "mcp_app.requests" and line["level"] == "INFO" and line["message"] == "request"
    assert line["tenant"] == "tenant-a" and line["tool"] == "echo" and line["outcome"] == "ok"
    assert line["session"] == client.session_id and isinstance(line["request_id"], int)
    assert isinstance(line["duration_ms"], float) and "time" in line
    assert SECRET_ARGUMENT not in json_lines.getvalue()


async def test_a_record_made_inside_a_request_carries_its_fields_and_none_after_it(json_lines):
    token = logs.bind(tenant="t", method="tools/call", tool="x", request_id=7)
    logging.getLogger("mcp_app.somewhere").warning("inside")
    logs.unbind(token)
    logging.getLogger("mcp_app.somewhere").warning("after")
    inside, after = records(json_lines)
    assert (inside["tenant"], inside["tool"], inside["request_id"]) == ("t", "x", 7)
    assert "tenant" not in after and after["message"] == "after"


def test_the_request_log_is_off_unless_asked_for():
    assert not logging.getLogger("mcp_app.requests").isEnabledFor(logging.INFO)


def test_daphnes_access_log_never_writes_a_credential_a_client_put_in_the_url():
    assert daphne_tuning.redact_access_log()
    stream = io.StringIO()
    log = AccessLogGenerator(stream)
    details = {"client": "127.0.0.1:1", "method": "POST", "status": 400, "size": 9}
    log("http", "complete", {**details, "path": "/t/a/mcp?access_token=tok-123&x=1"})
    log("http", "complete", {**details, "path": "/t/a/messages?session_id=sess-456"})
    log("http", "complete", {**details, "path": "/admin/"})
    written = stream.getvalue()
    assert "tok-123" not in written and "/t/a/mcp?access_token=REDACTED&x=REDACTED" in written
    assert "sess-456" not in written  # a legacy session id is a public tenant's only credential
    assert '"POST /admin/"' in written  # a path without a query is written as it came
