"""Definitions through the API: the admin's validation and words, round trips, uploads, secrets, filters."""

from __future__ import annotations

import base64

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tests.admin.support import tool_form_data
from tests.api.conftest import API, tool_body

pytestmark = pytest.mark.django_db

INVALID_TOOLS = [
    {"input_schema": {"type": "string"}},
    {"name": "has spaces"},
    {"annotations": {"readOnlyHint": True, "color": "red"}},
    {"handler_config": {"text": "{% if %}"}},
    {"icons": [{"src": "ftp://example.com/a.png"}]},
    {"meta": {"modelcontextprotocol.io/x": 1}},
    {"execution": "background", "worker_wait_seconds": 0},
    {"execution": "background", "worker_wait_seconds": 86_401},
    {"result_cache_seconds": 60},  # kept results need readOnlyHint and idempotentHint (AMB-374)
    {"annotations": {"readOnlyHint": True, "idempotentHint": True}, "result_cache_seconds": 86_401},
    {"input_schema": {"type": "object", "properties": {"a": {"$ref": "https://example.com/a.json"}}}},
    {"output_schema": {"type": "object", "properties": {"n": {"$ref": "defs.json#/n"}}}},
]


@pytest.mark.parametrize("change", INVALID_TOOLS)
def test_validation_errors_are_the_admins_field_by_field(change, client, alice, as_alice, tenant_a):
    client.force_login(alice)
    tool = Tool(tenant=tenant_a, **tool_body(**change))
    admin = client.post(reverse("admin:mcp_app_tool_add"), tool_form_data(tool))
    admin_errors = {k: list(v) for k, v in admin.context["adminform"].form.errors.items()}
    response = as_alice.call("POST", f"{API}/tenant-a/tools/", tool_body(**change))
    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert admin_errors, "the admin accepted it"
    assert fields == {k: v for k, v in admin_errors.items() if k in fields}
    assert set(fields) == set(admin_errors) - {"__all__"}
    assert not Tool.objects.exists()


def test_a_fetched_object_renamed_and_posted_is_a_copy(as_alice, echo_tool, tenant_a):
    for kind, model, key, new in [
        ("tools", Tool, "name", "echo-copy"),
        ("prompts", Prompt, "name", "hello-copy"),
        ("resources", Resource, "uri", "docs://copy"),
        ("resource-templates", ResourceTemplate, "uri_template", "copy://{page}"),
    ]:
        if kind == "prompts":
            Prompt.objects.create(tenant=tenant_a, name="hello", arguments=[{"name": "who"}],
                                  messages=[{"role": "user", "content": {"type": "text", "text": "Hi {{ who }}"}}])  # fmt: skip
        if kind == "resources":
            Resource.objects.create(tenant=tenant_a, uri="docs://readme", name="readme", text="Read me")
        if kind == "resource-templates":
            ResourceTemplate.objects.create(tenant=tenant_a, uri_template="docs://{page}", name="page",
                                            handler_config={"text": "{{ page }}"})  # fmt: skip
        original = as_alice.call("GET", f"{API}/tenant-a/{kind}/").json()["results"][0]
        fetched = as_alice.call("GET", f"{API}/tenant-a/{kind}/{original['id']}/").json()
        created = as_alice.call("POST", f"{API}/tenant-a/{kind}/", {**fetched, key: new})
        assert created.status_code == 201, created.json()
        copy = created.json()
        assert copy["id"] != fetched["id"]
        ignored = {"id", "updated_at", key}
        assert {k: v for k, v in copy.items() if k not in ignored} == {
            k: v for k, v in fetched.items() if k not in ignored
        }
        assert model.objects.filter(tenant=tenant_a).count() == 2


def test_secrets_are_write_only_and_reads_name_them(as_alice, tenant_a):
    body = tool_body(handler="http", handler_config={"url": "https://example.com/hook"},
                     secrets={"Authorization": "Bearer sk-123"})  # fmt: skip
    created = as_alice.call("POST", f"{API}/tenant-a/tools/", body)
    assert created.status_code == 201, created.json()
    assert "sk-123" not in created.content.decode()
    url = f"{API}/tenant-a/tools/{created.json()['id']}/"
    read = as_alice.call("GET", url)
    assert read.json()["secret_names"] == ["Authorization"] and "sk-123" not in read.content.decode()
    tool = Tool.objects.get(name="greet")
    assert decrypt_secrets(tool.handler_secrets) == {"Authorization": "Bearer sk-123"}
    # Sending the read back keeps the secrets; {} removes them; a bad header name is refused.
    assert as_alice.call("PUT", url, read.json()).status_code == 200
    assert Tool.objects.get(pk=tool.pk).handler_secrets == tool.handler_secrets
    bad = as_alice.call("PATCH", url, {"secrets": {"Bad Header": "x"}})
    assert bad.json()["error"]["fields"]["secrets"] == ["'Bad Header' is not a valid HTTP header name."]
    assert as_alice.call("PATCH", url, {"secrets": {}}).json()["secret_names"] == []


def test_a_file_upload_becomes_the_binary_contents_with_its_type(as_alice, tenant_a):
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256))
    response = as_alice.post(
        f"{API}/tenant-a/resources/",
        {"uri": "files://logo.png", "name": "logo", "upload": SimpleUploadedFile("logo.png", png, "image/png")},
        **as_alice._headers({}),
    )
    assert response.status_code == 201, response.json()
    resource = Resource.objects.get(uri="files://logo.png")
    assert (bytes(resource.blob), resource.mime_type, resource.text) == (png, "image/png", "")
    read = as_alice.call("GET", f"{API}/tenant-a/resources/{resource.pk}/").json()
    assert base64.b64decode(read["blob"]) == png and read["size"] == len(png)
    assert "blob" not in as_alice.call("GET", f"{API}/tenant-a/resources/").json()["results"][0]
    both = as_alice.call("PATCH", f"{API}/tenant-a/resources/{resource.pk}/", {"text": "now text"})
    assert "text" in both.json()["error"]["fields"]
    back = as_alice.call("PATCH", f"{API}/tenant-a/resources/{resource.pk}/", {"text": "now text", "blob": None})
    assert back.status_code == 200 and back.json()["is_binary"] is False


def test_an_upload_over_10_mib_is_refused(as_alice, tenant_a):
    big = SimpleUploadedFile("big.bin", b"\0" * (10 * 1024 * 1024 + 1), "application/octet-stream")
    response = as_alice.post(f"{API}/tenant-a/resources/", {"uri": "files://big", "name": "big", "upload": big},
                             **as_alice._headers({}))  # fmt: skip
    assert response.status_code == 400
    assert "10 MiB" in response.json()["error"]["fields"]["upload"][0]


def test_lists_filter_by_name_and_enabled_and_paginate(as_alice, tenant_a):
    for index in range(3):
        Tool.objects.create(tenant=tenant_a, **tool_body(f"tool-{index}"), enabled=index != 1)
    by_name = as_alice.call("GET", f"{API}/tenant-a/tools/?name=tool-2").json()
    assert [t["name"] for t in by_name["results"]] == ["tool-2"]
    disabled = as_alice.call("GET", f"{API}/tenant-a/tools/?enabled=false").json()
    assert [t["name"] for t in disabled["results"]] == ["tool-1"]
    page = as_alice.call("GET", f"{API}/tenant-a/tools/?limit=2&offset=2").json()
    assert page["count"] == 3 and len(page["results"]) == 1


def test_an_unknown_handler_kind_is_refused_on_its_settings(as_alice, tenant_a):
    response = as_alice.call("POST", f"{API}/tenant-a/tools/", tool_body(handler="no-such-kind"))
    assert "Unknown handler kind 'no-such-kind'" in response.json()["error"]["fields"]["handler_config"][0]


def test_a_duplicate_name_is_refused_not_a_500(as_alice, echo_tool):
    response = as_alice.call("POST", f"{API}/tenant-a/tools/", tool_body("echo"))
    assert response.status_code == 400
    assert "already exists" in response.json()["error"]["message"]


def test_a_tools_kept_results_are_set_in_the_admin_and_the_api(client, alice, as_alice, tenant_a):
    # AMB-374: how long a read-only, idempotent tool's results are kept, per caller or for all.
    hints = {"readOnlyHint": True, "idempotentHint": True}
    created = as_alice.call(
        "POST", f"{API}/tenant-a/tools/", tool_body(annotations=hints, result_cache_seconds=120)
    )
    assert created.status_code == 201, created.content
    assert created.json()["result_cache_seconds"] == 120 and created.json()["result_cache_shared"] is False
    tool = Tool.objects.get(pk=created.json()["id"])
    client.force_login(alice)
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool.pk]),
        tool_form_data(tool, result_cache_seconds=30, result_cache_shared="on"),
    )
    assert response.status_code == 302, response.content[:500]
    tool.refresh_from_db()
    assert (tool.result_cache_seconds, tool.result_cache_shared) == (30, True)
    assert tool.to_def().result_cache_seconds == 30 and tool.to_def().result_cache_shared


def test_a_tools_worker_wait_is_set_in_the_admin_and_the_api_and_blank_means_the_servers(
    client, alice, as_alice, tenant_a
):
    # AMB-114: how long a background call waits for a worker, per tool.
    created = as_alice.call(
        "POST", f"{API}/tenant-a/tools/", tool_body(execution="background", worker_wait_seconds=45)
    )
    assert created.status_code == 201, created.content
    assert created.json()["worker_wait_seconds"] == 45
    tool = Tool.objects.get(pk=created.json()["id"])
    assert tool.worker_wait_seconds == 45
    client.force_login(alice)
    response = client.post(
        reverse("admin:mcp_app_tool_change", args=[tool.pk]), tool_form_data(tool, worker_wait_seconds="")
    )
    assert response.status_code == 302, response.content[:500]
    tool.refresh_from_db()
    assert tool.worker_wait_seconds is None
