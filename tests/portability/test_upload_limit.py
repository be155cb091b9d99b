"""Every document an owner sends is refused past MCP_MAX_UPLOAD_BYTES before it is parsed (AMB-278).

The admin's import page (the file, and the text posted back at the confirm step), its OpenAPI page, the
API's import and OpenAPI import: each answers the one message (a form error; a 413 with the API's error
body) and changes nothing. The documents sent are not even YAML: a parser would have said so first.
"""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from mcp_app.models import Tool
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

LIMIT = 64 * 1024
MESSAGE = "at most 64 KiB is accepted (MCP_MAX_UPLOAD_BYTES). Nothing was changed."
# Past the limit, and no YAML or JSON at all: a refusal that names the size came before any parsing.
TOO_LARGE = "key: [unclosed\n" + "x" * LIMIT


@pytest.fixture(autouse=True)
def small_limit(settings) -> None:
    settings.MCP_MAX_UPLOAD_BYTES = LIMIT


@pytest.fixture
def greet(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a, name="greet", handler="template", handler_config={"text": "Hi"}
    )


def _page(name: str, tenant) -> str:
    return reverse(f"admin-portability:{name}", args=[tenant.pk])


@pytest.mark.parametrize("page", ["import", "import-openapi"])
def test_an_admin_upload_past_the_limit_is_a_form_error_and_changes_nothing(
    client, alice, tenant_a, greet, page
):
    client.force_login(alice)
    upload = SimpleUploadedFile("big.yaml", TOO_LARGE.encode(), content_type="application/yaml")
    response = client.post(_page(page, tenant_a), {"document": upload, "step": "confirm"})
    assert response.status_code == 400
    assert MESSAGE in response.content.decode()
    assert list(Tool.objects.filter(tenant=tenant_a).values_list("name", flat=True)) == ["greet"]


def test_the_text_posted_back_at_the_confirm_step_is_held_to_the_same_limit(client, alice, tenant_a, greet):
    client.force_login(alice)
    response = client.post(_page("import", tenant_a), {"document_text": TOO_LARGE, "step": "confirm"})
    assert response.status_code == 400 and MESSAGE in response.content.decode()
    assert Tool.objects.filter(tenant=tenant_a).count() == 1


def test_a_document_within_the_limit_is_still_read(client, alice, tenant_a, greet):
    client.force_login(alice)
    upload = SimpleUploadedFile("small.yaml", b"key: [unclosed\n", content_type="application/yaml")
    response = client.post(_page("import", tenant_a), {"document": upload})
    assert response.status_code == 400 and "MCP_MAX_UPLOAD_BYTES" not in response.content.decode()


@pytest.mark.parametrize("path", ["import", "import-openapi"])
def test_an_api_body_past_the_limit_is_a_413_saying_so_and_changes_nothing(alice, tenant_a, greet, path):
    api = ApiClient(alice)
    body = TOO_LARGE  # not JSON either
    response = api.post(
        f"/api/v1/tenants/tenant-a/{path}", body, content_type="application/json", **api._headers({})
    )
    assert response.status_code == 413
    error = response.json()["error"]
    assert error["code"] == "too_large" and MESSAGE in error["message"], error
    assert Tool.objects.filter(tenant=tenant_a).count() == 1
