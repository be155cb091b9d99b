"""History and revert through the API, per role: the same service and rules as the admin."""

from __future__ import annotations

import pytest

from mcp_app.api.tokens import issue_manage_token
from mcp_app.history import service
from mcp_app.models import Prompt, Tool
from tenants.models import Tenant
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

API = "/api/v1/tenants"


def history_path(tool: Tool, slug: str = "tenant-a", kind: str = "tools") -> str:
    return f"{API}/{slug}/{kind}/{tool.pk}/history/"


def revert_path(tool: Tool, history_id: int, slug: str = "tenant-a") -> str:
    return f"{history_path(tool, slug)}{history_id}/revert/"


def oldest(tool: Tool) -> int:
    return service.versions(Tool, tool.pk)[-1].history_id


def test_bob_the_viewer_reads_the_versions_with_their_diffs(bob, edited_tool):
    response = ApiClient(bob).call("GET", history_path(edited_tool))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["count"] == 2
    newest = body["results"][0]
    assert (newest["type"], newest["user"], newest["label"]) == ("changed", "alice", "greet")
    description = next(c for c in newest["changes"] if c["name"] == "description")
    assert description["lines"] == [["-", "Say hello."], ["+", "Say hello loudly."]]
    assert body["results"][1]["type"] == "created"


def test_bob_the_viewer_cannot_revert(bob, edited_tool):
    response = ApiClient(bob).call("POST", revert_path(edited_tool, oldest(edited_tool)))
    assert response.status_code == 403
    assert response.json()["error"]["code"] == "permission_denied"
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."


def test_alice_reverts_with_a_manage_token_and_the_revert_is_announced(
    alice, tenant_a, edited_tool, listen, django_capture_on_commit_callbacks
):
    api = ApiClient(token=issue_manage_token(alice))
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        response = api.call("POST", revert_path(edited_tool, oldest(edited_tool)))
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["object_id"] == edited_tool.pk
    assert body["version"]["reason"].startswith("Rolled back to version 1 (")
    assert body["version"]["number"] == 3
    assert body["version"]["user"] == "alice"
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello."
    version = Tenant.objects.get(pk=tenant_a.pk).definitions_version
    assert listener.collect() == [{"type": "mcp.list_changed", "kind": "tools", "version": version}]


@pytest.mark.parametrize("method", ["GET", "POST"])
def test_charlie_gets_404_for_tenant_a_history_like_a_missing_object(charlie, edited_tool, method):
    api = ApiClient(charlie)
    path = history_path(edited_tool) if method == "GET" else revert_path(edited_tool, oldest(edited_tool))
    hidden = api.call(method, path)
    missing = api.call(method, path.replace(f"/{edited_tool.pk}/", "/999999/"))
    # Through his own tenant's URL, tenant A's object is missing too.
    foreign = api.call(method, path.replace("/tenant-a/", "/tenant-b/"))
    for response in (hidden, missing, foreign):
        assert response.status_code == 404
        assert response.json() == hidden.json() == {"error": {"code": "not_found", "message": "Not found."}}


def test_a_version_of_another_definition_or_an_unknown_kind_is_404(alice, tenant_a, edited_tool):
    other = Tool.objects.create(tenant=tenant_a, name="other", handler="template", handler_config={})
    api = ApiClient(alice)
    foreign_version = service.versions(Tool, other.pk)[0].history_id
    assert api.call("POST", revert_path(edited_tool, foreign_version)).status_code == 404
    assert api.call("GET", history_path(edited_tool, kind="widgets")).status_code == 404
    prompt = Prompt.objects.create(
        tenant=tenant_a, name="p", messages=[{"role": "user", "content": {"type": "text", "text": "Hi"}}]
    )
    assert api.call("GET", f"{API}/tenant-a/prompts/{prompt.pk}/history/").json()["count"] == 1


def test_a_revert_the_rules_now_refuse_is_a_409_with_the_reason(alice, edited_tool):
    Tool.history.filter(history_id=oldest(edited_tool)).update(input_schema={"type": "string"})
    response = ApiClient(alice).call("POST", revert_path(edited_tool, oldest(edited_tool)))
    assert response.status_code == 409
    error = response.json()["error"]
    assert error["code"] == "conflict"
    assert error["message"].startswith("This version cannot be used as it is now: input_schema:")
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."
