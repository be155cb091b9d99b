"""A change through the API announces what an admin change announces, after commit (AMB-18)."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from mcp_app.models import Resource
from tenants.models import Tenant
from tests.admin.support import GroupListener
from tests.api.conftest import API, tool_body

pytestmark = pytest.mark.django_db


@pytest.fixture
def listen():
    yield GroupListener
    async_to_sync(get_channel_layer().flush)()


def test_an_api_post_bumps_the_version_and_publishes_tools_list_changed_after_commit(
    as_alice, tenant_a, listen, django_capture_on_commit_callbacks
):
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        assert as_alice.call("POST", f"{API}/tenant-a/tools/", tool_body()).status_code == 201
    version = Tenant.objects.get(pk=tenant_a.pk).definitions_version
    assert listener.collect() == [{"type": "mcp.list_changed", "kind": "tools", "version": version}]


def test_an_api_resource_edit_publishes_list_changed_and_updated(
    as_alice, tenant_a, listen, django_capture_on_commit_callbacks
):
    resource = Resource.objects.create(tenant=tenant_a, uri="docs://readme", name="readme", text="v1")
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        response = as_alice.call("PATCH", f"{API}/tenant-a/resources/{resource.pk}/", {"text": "v2"})
    assert response.status_code == 200
    kinds = [(m["type"], m.get("kind") or m.get("uri")) for m in listener.collect()]
    assert ("mcp.list_changed", "resources") in kinds
    assert any(kind == "docs://readme" for _type, kind in kinds)


def test_a_refused_api_write_announces_nothing(as_bob, tenant_a, listen, django_capture_on_commit_callbacks):
    listener = listen(tenant_a.id)
    with django_capture_on_commit_callbacks(execute=True):
        assert as_bob.call("POST", f"{API}/tenant-a/tools/", tool_body()).status_code == 403
    assert listener.collect() == []
