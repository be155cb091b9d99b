"""A tenant's quotas through the API (AMB-352): owners write, a quota naming no tool of the tenant or
an unbounded count is a 400 naming why, viewers read, another tenant's quota is a 404 like a missing one."""

from __future__ import annotations

import pytest

from mcp_app.models import Quota, Tool
from tests.api.conftest import API

pytestmark = pytest.mark.django_db(transaction=True)
QUOTAS = f"{API}/tenant-a/quotas/"


@pytest.fixture
def tool(tenant_a) -> None:
    Tool.objects.create(tenant=tenant_a, name="search", handler="template", handler_config={"text": "x"})


def test_an_owner_writes_a_quota_and_one_that_could_never_count_is_a_400_naming_why(as_alice, tool) -> None:
    made = as_alice.call("POST", QUOTAS, {"name": "search-hourly", "tool": "search", "calls": 100, "window": "hour"})
    assert made.status_code == 201, made.json()
    assert made.json()["per"] == "caller" and made.json()["enabled"] is True
    typo = as_alice.call("POST", QUOTAS, {"name": "typo", "tool": "serach", "calls": 5})
    assert typo.status_code == 400 and "no tool named 'serach'" in str(typo.json())
    huge = as_alice.call("PATCH", f"{QUOTAS}{made.json()['id']}/", {"calls": 10**9})
    assert huge.status_code == 400 and "calls" in huge.json()["error"]["fields"]
    every_tool = as_alice.call("POST", QUOTAS, {"name": "all", "calls": 1000, "window": "day", "per": "tenant"})
    assert every_tool.status_code == 201 and every_tool.json()["tool"] == ""
    assert sorted(Quota.objects.values_list("name", "calls")) == [("all", 1000), ("search-hourly", 100)]


def test_viewers_read_and_other_tenants_see_nothing(as_alice, as_bob, as_charlie) -> None:
    made = as_alice.call("POST", QUOTAS, {"name": "q", "calls": 10}).json()
    assert [q["name"] for q in as_bob.call("GET", QUOTAS).json()["results"]] == ["q"]
    assert as_bob.call("PATCH", f"{QUOTAS}{made['id']}/", {"calls": 11}).status_code == 403
    theirs, missing = f"{API}/tenant-b/quotas/{made['id']}/", f"{API}/tenant-b/quotas/999999/"
    for method in ("GET", "DELETE"):
        assert as_charlie.call(method, theirs).json() == as_charlie.call(method, missing).json()
        assert as_charlie.call(method, theirs).status_code == 404
    assert Quota.objects.get(pk=made["id"]).calls == 10
