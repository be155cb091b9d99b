"""Export, import and OpenAPI import through /api/v1/: the roles, the diff, the errors at their paths."""

from __future__ import annotations

import pytest

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Tool
from tests.api.conftest import ApiClient
from tests.portability.support import FIXTURES

pytestmark = pytest.mark.django_db

BASE = "/api/v1/tenants/tenant-a"


@pytest.fixture
def greet(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a, name="greet", handler="template", handler_config={"text": "Hi"}
    )


@pytest.fixture
def as_alice(alice) -> ApiClient:
    return ApiClient(alice)


def test_export_answers_the_tenant_document(as_alice, greet):
    response = as_alice.call("GET", f"{BASE}/export")
    assert response.status_code == 200
    assert response.json()["format"] == "mcp-platform/tenant"
    assert [t["name"] for t in response.json()["tools"]] == ["greet"]


def test_an_exported_document_posted_back_with_a_change_is_a_dry_run_diff_then_an_import(as_alice, greet):
    document = as_alice.call("GET", f"{BASE}/export").json()
    document["tools"][0]["description"] = "Says hi."
    dry = as_alice.call("POST", f"{BASE}/import?dry_run=true", document)
    assert dry.status_code == 200
    assert dry.json()["applied"] is False
    assert dry.json()["changes"] == [
        {"kind": "tools", "key": "greet", "action": "change", "fields": ["description"]}
    ]
    greet.refresh_from_db()
    assert greet.description == ""
    done = as_alice.call("POST", f"{BASE}/import", document)
    assert done.json()["applied"] is True and done.json()["counts"]["change"] == 1
    greet.refresh_from_db()
    assert greet.description == "Says hi."
    assert as_alice.call("POST", f"{BASE}/import", document).json()["counts"]["change"] == 0


def test_prune_deletes_what_the_document_lacks(as_alice, greet):
    body = {"format": "mcp-platform/tenant", "version": 1, "tools": []}
    response = as_alice.call("POST", f"{BASE}/import?prune=1", body)
    assert response.json()["changes"] == [{"kind": "tools", "key": "greet", "action": "delete"}]
    assert not Tool.objects.filter(pk=greet.pk).exists()


def test_a_broken_document_answers_400_with_each_problem_at_its_path(as_alice):
    body = {"format": "mcp-platform/tenant", "version": 1, "tools": [{"name": "x", "handler": "http"}]}
    response = as_alice.call("POST", f"{BASE}/import", body)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid" and list(error["fields"]) == ["tools[0].handler_config"]


def test_a_viewer_may_neither_export_nor_import(bob, greet):
    as_bob = ApiClient(bob)
    assert as_bob.call("GET", f"{BASE}/export").status_code == 403
    assert (
        as_bob.call("POST", f"{BASE}/import", {"format": "mcp-platform/tenant", "version": 1}).status_code
        == 403
    )
    assert as_bob.call("POST", f"{BASE}/import-openapi", {"dry_run": True}).status_code == 403


@pytest.mark.parametrize(
    ("method", "suffix"), [("GET", "export"), ("POST", "import"), ("POST", "import-openapi")]
)
def test_charlie_gets_the_same_404_for_tenant_a_as_for_a_missing_tenant(charlie, greet, method, suffix):
    as_charlie = ApiClient(charlie)
    body = {"format": "mcp-platform/tenant", "version": 1, "tools": []}
    theirs = as_charlie.call(method, f"{BASE}/{suffix}?prune=1", body if method == "POST" else None)
    missing = as_charlie.call(
        method, f"/api/v1/tenants/nowhere/{suffix}?prune=1", body if method == "POST" else None
    )
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json()
    assert Tool.objects.filter(pk=greet.pk).exists()


def test_openapi_import_creates_the_chosen_operations_as_http_tools(as_alice, tenant_a):
    listed = as_alice.call(
        "POST",
        f"{BASE}/import-openapi",
        {"document": (FIXTURES / "petstore.yaml").read_text(), "dry_run": True},
    )
    assert [op["key"] for op in listed.json()["operations"]] == [
        "GET /pets",
        "POST /pets",
        "GET /pets/{petId}",
    ]
    assert not Tool.objects.filter(tenant=tenant_a).exists()
    body = {
        "document": (FIXTURES / "petstore-expanded.yaml").read_text(),
        "operations": ["GET /pets/{id}", "DELETE /pets/{id}"],
        "base_url": "https://pets.example.com/v2",
        "auth_header": "X-Api-Key",
        "auth_value": "k-123",
        "timeout": 9,
    }
    response = as_alice.call("POST", f"{BASE}/import-openapi", body)
    assert response.status_code == 200 and sorted(response.json()["created"]) == [
        "deletePet",
        "find_pet_by_id",
    ]
    tool = Tool.objects.get(tenant=tenant_a, name="find_pet_by_id")
    assert decrypt_secrets(tool.handler_secrets) == {"X-Api-Key": "k-123"} and tool.timeout_seconds == 9
    assert "k-123" not in response.content.decode()


def test_openapi_import_of_something_else_answers_400_saying_why(as_alice):
    response = as_alice.call("POST", f"{BASE}/import-openapi", {"document": {"swagger": "2.0"}})
    assert response.status_code == 400 and "Swagger 2.0" in response.json()["error"]["message"]
    nothing = as_alice.call("POST", f"{BASE}/import-openapi", {})
    assert nothing.status_code == 400


def test_the_schema_documents_the_three_endpoints(as_alice):
    paths = as_alice.get("/api/v1/schema/", HTTP_ACCEPT="application/json").json()["paths"]
    assert {
        "/api/v1/tenants/{slug}/export",
        "/api/v1/tenants/{slug}/import",
        "/api/v1/tenants/{slug}/import-openapi",
    } <= set(paths)
