"""`manage.py sync_upstreams`: records what a tenant's upstreams offer; an unreachable one fails the command."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import CommandError, call_command

from mcp_app.models import UpstreamTool
from tests.upstreams.running import make_upstream, running_upstream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _loopback_allowed(settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


def test_sync_upstreams_records_each_upstreams_tools_and_names_one_it_cannot_reach(
    tenant_a, tmp_path
) -> None:
    with running_upstream(tmp_path) as remote:
        make_upstream(tenant_a, remote.url)
        make_upstream(tenant_a, remote.url, name="more", prefix="more_")
        make_upstream(tenant_a, remote.url, name="off", prefix="off_", enabled=False)
        out = StringIO()
        call_command("sync_upstreams", tenant_a.slug, stdout=out)
        # No names: every enabled upstream, as the help says; a disabled one is left alone.
        assert [line.split(":")[0] for line in out.getvalue().splitlines()] == ["docs", "more"]
        assert UpstreamTool.objects.filter(upstream__name="docs", remote_name="echo").exists()
        assert UpstreamTool.objects.filter(upstream__name="more", remote_name="echo").exists()
        assert not UpstreamTool.objects.filter(upstream__name="off").exists()
    err = StringIO()
    with pytest.raises(CommandError, match="Could not reach: docs, more"):
        call_command("sync_upstreams", tenant_a.slug, "docs", "more", stderr=err)
    assert "127.0.0.1" in err.getvalue()
    with pytest.raises(CommandError, match="no upstream nope"):
        call_command("sync_upstreams", tenant_a.slug, "nope")
