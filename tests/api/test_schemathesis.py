"""The API against its own OpenAPI schema (schemathesis): no 500, every response as the schema says.

Alice (owner of a seeded tenant_a) calls every operation with generated arguments, the tenant slug
fixed to hers so that calls reach the views rather than a 404. Examples are bounded (MAX_EXAMPLES per
operation) so the whole file runs in well under a minute on two cores.
"""

from __future__ import annotations

import channels.db
import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from django.utils import timezone
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from mcp_app.api.tokens import issue_manage_token
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool, ToolRun, Upstream, UpstreamTool

MAX_EXAMPLES = 5


@schemathesis.check
def no_server_error_it_does_not_document(ctx, response, case) -> bool | None:  # noqa: ANN001 - schemathesis'
    """Never a 500; another 5xx only where the operation documents it.

    Testing or syncing an upstream that cannot be reached answers 502 (the gateway's error, with a body
    saying why), as its schema says; whether a generated id hits the seeded upstream depends on the
    database's sequence, so without this a run failed or passed by the order of the tests before it.
    """
    documented = case.operation.definition.raw.get("responses", {})
    if response.status_code != 500 and str(response.status_code) in documented:
        return None
    return not_a_server_error(ctx, response, case)


# What the API promises: never a 500, and every answer (status, content type, body) as documented.
# Lenient acceptance of some invalid input (an unparsable ?offset= falls back to 0, as DRF does) is
# not a schema violation, so schemathesis' negative-data checks are not among them.
CHECKS = [
    no_server_error_it_does_not_document,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]

# Generated from the code, as /api/v1/schema/ serves it (no database needed to build it).
schema = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
schema.app = get_wsgi_application()
# Hypothesis' bounded examples only: schemathesis' coverage phase would add dozens of boundary cases
# per operation, several minutes on two cores.
schema.config.phases.update(phases=["examples", "fuzzing"])


@pytest.fixture(autouse=True)
def _keep_the_test_transaction(monkeypatch):
    # The WSGI handler closes the database connection after each request; the test's transaction
    # lives on it (Django's own test client disconnects these signals the same way). A view that asks
    # the catalog (the self-check: channels' database_sync_to_async, in the request's thread) closes
    # it around each read as well.
    monkeypatch.setattr(channels.db, "close_old_connections", lambda: None)
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    yield
    request_started.connect(close_old_connections)
    request_finished.connect(close_old_connections)


@pytest.fixture
def alice_token(alice, tenant_a) -> str:
    tool = Tool.objects.create(tenant=tenant_a, name="echo", handler="template", handler_config={"text": "hi"})
    Prompt.objects.create(
        tenant=tenant_a, name="hello", messages=[{"role": "user", "content": {"type": "text", "text": "Hi"}}]
    )
    Resource.objects.create(tenant=tenant_a, uri="docs://readme", name="readme", text="Read me")
    Resource.objects.create(tenant=tenant_a, uri="docs://logo", name="logo", blob=b"\x89PNG", mime_type="image/png")
    ResourceTemplate.objects.create(
        tenant=tenant_a, uri_template="docs://{page}", name="page", handler_config={"text": "{{ page }}"}
    )
    ToolRun.objects.create(tenant=tenant_a, job_id="job-1", tool=tool, tool_name="echo", status="done")
    # A loopback upstream: the SSRF guard refuses it at once, so test and sync answer 502 quickly.
    upstream = Upstream.objects.create(
        tenant=tenant_a, name="docs", url="http://127.0.0.1:9/mcp", prefix="docs_"
    )
    UpstreamTool.objects.create(
        tenant=tenant_a,
        upstream=upstream,
        remote_name="echo",
        offered={"name": "echo"},
        last_seen_at=timezone.now(),
    )
    return issue_manage_token(alice)


# One ordinary pytest item per operation (not schema.parametrize(), whose sub-items pytest-xdist runs
# as one parent item that checks none of them), each driving hypothesis over the operation's cases.
OPERATIONS = [result.ok() for result in schema.get_all_operations()]


@pytest.mark.django_db
@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda operation: operation.label)
def test_every_operation_answers_as_its_schema_says_and_never_500(operation, alice_token):
    @given(case=operation.as_strategy())
    @settings(
        max_examples=MAX_EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        derandomize=True,
        database=None,
    )
    def answers_as_documented(case) -> None:  # noqa: ANN001 - a schemathesis Case
        if "slug" in (case.path_parameters or {}):
            case.path_parameters["slug"] = "tenant-a"
        case.call_and_validate(headers={"Authorization": f"Bearer {alice_token}"}, checks=CHECKS)

    answers_as_documented()


GATEWAY_OPERATIONS = [
    operation
    for operation in OPERATIONS
    if operation.method.upper() == "POST" and operation.path.endswith(("/upstreams/{id}/sync/", "/upstreams/{id}/test/"))
]


@pytest.mark.django_db
@pytest.mark.parametrize("operation", GATEWAY_OPERATIONS, ids=lambda operation: operation.label)
def test_an_unreachable_upstream_answers_its_documented_502_with_a_reason(operation, alice_token):
    upstream = Upstream.objects.get(name="docs")
    case = operation.Case(path_parameters={"slug": "tenant-a", "id": upstream.pk})
    response = case.call_and_validate(headers={"Authorization": f"Bearer {alice_token}"}, checks=CHECKS)
    assert response.status_code == 502
    assert "loopback" in response.json()["error"]["message"]
