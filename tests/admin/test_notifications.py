"""Definition changes → one version bump per transaction, list_changed per kind, resources/updated per URI."""

from __future__ import annotations

import os
from unittest import mock

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import transaction
from django.urls import reverse

from mcp_app import catalog
from mcp_app.infra import redis_client
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool
from tenants.models import Tenant
from tests.admin.support import resource_form_data

pytestmark = pytest.mark.django_db


def version_of(tenant: Tenant) -> int:
    return Tenant.objects.get(pk=tenant.pk).definitions_version


def list_changed(kind: str, version: int) -> dict:
    return {"type": "mcp.list_changed", "kind": kind, "version": version}


def updated(uri: str, version: int) -> dict:
    return {"type": "mcp.resource_updated", "uri": uri, "version": version}


def test_pr03_saving_a_prompt_publishes_prompts_list_changed(
    tenant_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        Prompt.objects.create(
            tenant=tenant_a, name="p", messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}]
        )
    assert listener.collect() == [list_changed("prompts", version_of(tenant_a))]


def test_rs04_a_resource_template_change_publishes_resources_list_changed(
    template_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(template_a.tenant_id)
    with django_capture_on_commit_callbacks(execute=True):
        template_a.description = "changed"
        template_a.save()
    assert listener.collect() == [list_changed("resources", version_of(template_a.tenant))]


def test_rs05_saving_a_resource_publishes_list_changed_and_updated_for_its_uri(
    resource_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(resource_a.tenant_id)
    with django_capture_on_commit_callbacks(execute=True):
        resource_a.text = "new text"
        resource_a.save()
    version = version_of(resource_a.tenant)
    assert listener.collect() == [list_changed("resources", version), updated("a://readme", version)]


def test_changing_a_resource_uri_announces_both_the_old_and_the_new_uri(
    resource_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(resource_a.tenant_id)
    with django_capture_on_commit_callbacks(execute=True):
        resource_a.uri = "a://readme-v2"
        resource_a.save()
    version = version_of(resource_a.tenant)
    assert listener.collect() == [
        list_changed("resources", version),
        updated("a://readme", version),
        updated("a://readme-v2", version),
    ]


def test_deleting_a_resource_announces_list_changed_and_updated_for_its_uri(
    resource_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(resource_a.tenant_id)
    with django_capture_on_commit_callbacks(execute=True):
        resource_a.delete()
    version = version_of(resource_a.tenant)
    assert listener.collect() == [list_changed("resources", version), updated("a://readme", version)]


def test_deleting_a_tool_publishes_tools_list_changed(tool_a, listen, django_capture_on_commit_callbacks):
    listener = listen(tool_a.tenant_id)
    with django_capture_on_commit_callbacks(execute=True):
        tool_a.delete()
    assert listener.collect() == [list_changed("tools", version_of(tool_a.tenant))]


def test_several_changes_in_one_transaction_bump_the_version_once_and_publish_once_per_kind(
    tenant_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(tenant_a.id)
    before = version_of(tenant_a)
    with django_capture_on_commit_callbacks(execute=True), transaction.atomic():
        for name in ("t1", "t2", "t3"):
            Tool.objects.create(tenant=tenant_a, name=name, handler="template", handler_config={"text": name})
        ResourceTemplate.objects.create(
            tenant=tenant_a, uri_template="a://x/{id}", name="x", handler_config={"text": "{{ id }}"}
        )
    assert version_of(tenant_a) == before + 1
    assert listener.collect() == [list_changed("resources", before + 1), list_changed("tools", before + 1)]


def test_changes_of_two_tenants_are_announced_to_each_tenant_only(
    tenant_a, tenant_b, listen, django_capture_on_commit_callbacks
):
    listener_a, listener_b = listen(tenant_a.id), listen(tenant_b.id)
    with django_capture_on_commit_callbacks(execute=True):
        Tool.objects.create(tenant=tenant_b, name="b", handler="template", handler_config={"text": "b"})
    assert listener_a.collect(timeout=0.1) == []
    assert listener_b.collect() == [list_changed("tools", version_of(tenant_b))]
    assert version_of(tenant_a) == 1


def test_moving_a_tool_to_another_tenant_announces_it_to_both(
    tool_a, tenant_b, listen, django_capture_on_commit_callbacks
):
    listener_a, listener_b = listen(tool_a.tenant_id), listen(tenant_b.id)
    with django_capture_on_commit_callbacks(execute=True):
        tool_a.tenant = tenant_b
        tool_a.save()
    assert listener_a.collect() == [list_changed("tools", 2)]
    assert listener_b.collect() == [list_changed("tools", 2)]


def test_a_rolled_back_change_announces_nothing(tenant_a, listen, django_capture_on_commit_callbacks):
    listener = listen(tenant_a.id)
    with (
        django_capture_on_commit_callbacks(execute=True) as callbacks,
        pytest.raises(RuntimeError),
        transaction.atomic(),
    ):
        Tool.objects.create(tenant=tenant_a, name="gone", handler="template", handler_config={"text": "x"})
        raise RuntimeError("roll back")
    assert callbacks == []
    assert listener.collect(timeout=0.1) == []
    assert version_of(tenant_a) == 1


def test_saving_tenant_settings_bumps_the_version_and_tells_the_catalog_but_no_list_changed(
    tenant_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(tenant_a.id)
    with (
        mock.patch("mcp_app.catalog.note_change") as note_change,
        django_capture_on_commit_callbacks(execute=True),
    ):
        tenant_a.instructions = "New instructions."
        tenant_a.save(update_fields=["instructions"])
    assert version_of(tenant_a) == 2
    note_change.assert_called_once_with(tenant_a.id, 2)
    assert listener.collect(timeout=0.1) == []


def test_the_catalog_is_told_the_new_version_after_commit(tool_a, django_capture_on_commit_callbacks):
    with mock.patch("mcp_app.catalog.note_change") as note_change:
        with django_capture_on_commit_callbacks(execute=False) as callbacks:
            tool_a.title = "x"
            tool_a.save()
        note_change.assert_not_called()  # nothing before commit
        for callback in callbacks:
            callback()
    note_change.assert_called_once_with(tool_a.tenant_id, 2)


def test_a_failing_catalog_or_channel_layer_never_breaks_the_save(
    tool_a, listen, django_capture_on_commit_callbacks
):
    with (
        mock.patch("mcp_app.catalog.note_change", side_effect=RuntimeError("redis down")),
        mock.patch("mcp_app.infra.notify.get_channel_layer", side_effect=RuntimeError("layer down")),
        django_capture_on_commit_callbacks(execute=True),
    ):
        tool_a.title = "Saved anyway"
        tool_a.save()
    tool_a.refresh_from_db()
    assert tool_a.title == "Saved anyway"
    assert version_of(tool_a.tenant) == 2


def test_resource_upload_in_the_admin_fills_blob_and_mime_type(client, alice, tenant_a):
    client.force_login(alice)
    png = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32
    data = resource_form_data(None, tenant_a.pk, uri="a://logo.png", name="logo")
    data["upload"] = SimpleUploadedFile("logo.png", png, content_type="image/png")
    response = client.post(reverse("admin:mcp_app_resource_add"), data)
    assert response.status_code == 302, response.context["adminform"].form.errors
    resource = Resource.objects.get(tenant=tenant_a, uri="a://logo.png")
    assert bytes(resource.blob) == png
    assert resource.mime_type == "image/png"
    assert resource.text == ""
    html = client.get(reverse("admin:mcp_app_resource_change", args=[resource.pk])).content.decode()
    assert "uploaded file, 40 bytes" in html


def test_an_explicit_mime_type_wins_over_the_uploads(client, alice, tenant_a):
    client.force_login(alice)
    data = resource_form_data(
        None, tenant_a.pk, uri="a://data.bin", name="data", mime_type="application/x-demo"
    )
    data["upload"] = SimpleUploadedFile("data.png", b"\x00\x01", content_type="image/png")
    assert client.post(reverse("admin:mcp_app_resource_add"), data).status_code == 302
    assert Resource.objects.get(uri="a://data.bin").mime_type == "application/x-demo"


def test_removing_the_upload_serves_text_again(client, alice, tenant_a):
    resource = Resource.objects.create(
        tenant=tenant_a, uri="a://f", name="f", blob=b"\x00", mime_type="image/png"
    )
    client.force_login(alice)
    url = reverse("admin:mcp_app_resource_change", args=[resource.pk])
    response = client.post(
        url, resource_form_data(resource, tenant_a.pk, text="now text", mime_type="text/plain")
    )
    assert response.status_code == 200  # text beside an upload is refused
    assert "Remove uploaded file" in str(response.context["adminform"].form.errors)
    data = resource_form_data(resource, tenant_a.pk, text="now text", mime_type="text/plain", clear_blob="on")
    assert client.post(url, data).status_code == 302
    resource.refresh_from_db()
    assert resource.blob is None
    assert resource.text == "now text"


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"uri": "no-scheme"}, "uri"),
        ({"uri": "a://has space"}, "uri"),
        ({"annotations": '{"priority": 2}'}, "annotations"),
    ],
)
def test_rs09_invalid_resources_are_form_errors(client, alice, tenant_a, overrides, field):
    client.force_login(alice)
    response = client.post(
        reverse("admin:mcp_app_resource_add"), resource_form_data(None, tenant_a.pk, name="r", **overrides)
    )
    assert response.status_code == 200
    assert field in response.context["adminform"].form.errors


@pytest.mark.services
@pytest.mark.django_db(transaction=True)
def test_with_redis_a_change_notification_carries_the_new_change_token(tenant_a, listen, settings):
    settings.REDIS_URL = os.environ["REDIS_URL"]
    listener = listen(tenant_a.id)
    Prompt.objects.create(
        tenant=tenant_a, name="p", messages=[{"role": "user", "content": {"type": "text", "text": "hi"}}]
    )
    (event,) = listener.collect_raw()
    shared = int(redis_client.sync_client().get(catalog.version_key(tenant_a.id)))
    assert event["token"] == shared  # what a stream learns before it tells its client
