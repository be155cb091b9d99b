"""Policies, guardrails and quotas have drafts, publish, versions and history like every definition
(AMB-362): a draft governs no call until it is published, in the admin, the API and an import."""

from __future__ import annotations

import pytest
from django.test import Client
from django.urls import reverse

from mcp_app.catalog import loader
from mcp_app.drafts import service as drafts
from mcp_app.history import service as history
from mcp_app.models import Guardrail, Policy, Quota, Tool
from mcp_app.portability import document as documents
from mcp_app.portability import importer
from tests.api.conftest import ApiClient

pytestmark = pytest.mark.django_db

API = "/api/v1/tenants/tenant-a"
HIDE_GREET = "target.name == 'greet'"
OTHER = "target.name == 'wave'"


@pytest.fixture(autouse=True)
def wave(tenant_a) -> Tool:
    """A second tool: a policy on one of two tools neither holds for none nor for all (reach.py)."""
    return Tool.objects.create(tenant=tenant_a, name="wave", handler="template", handler_config={"text": "~"})


def live(tenant) -> dict[str, tuple[str, ...]]:
    """The rules the catalog serves (its own read of the rows, without get_catalog's thread hop)."""
    catalog = loader._load_catalog(tenant.id)
    return {
        "policies": tuple(f"{p.name}:{p.condition}" for p in catalog.policies),
        "guardrails": tuple(f"{g.name}:{g.action}" for g in catalog.guardrails),
        "quotas": tuple(f"{q.name}:{q.calls}" for q in catalog.quotas),
    }


def test_a_staged_policy_governs_nothing_until_published_and_its_draft_waits_beside_the_live_one(
    alice, tool_a, tenant_a
) -> None:
    policy = drafts.stage(Policy(tenant=tenant_a, name="no-greet", effect="deny", condition=HIDE_GREET), alice)
    assert policy.version == 0 and live(tenant_a)["policies"] == ()
    assert drafts.status(policy) == "draft (never published)"
    assert [row.pk for row in drafts.pending(tenant_a)] == [policy.pk]

    done = drafts.publish(policy, alice)
    assert done is not None and (done.kind, done.version) == ("policy", 1)
    assert live(tenant_a)["policies"] == (f"no-greet:{HIDE_GREET}",)

    edited = drafts.apply_draft(Policy.objects.get(pk=policy.pk))
    edited.condition = OTHER
    edited.full_clean()
    drafts.stage(edited, alice)
    assert drafts.status(Policy.objects.get(pk=policy.pk)) == "v1 + draft"
    assert live(tenant_a)["policies"] == (f"no-greet:{HIDE_GREET}",), "the draft is not live"
    assert [c.name for c in drafts.changes(Policy.objects.get(pk=policy.pk))] == ["condition"]

    drafts.publish(Policy.objects.get(pk=policy.pk), alice)
    assert live(tenant_a)["policies"] == (f"no-greet:{OTHER}",)
    numbers = [v.number for v in history.versions(Policy, policy.pk)]
    assert numbers == [2, 1], numbers
    first = history.versions(Policy, policy.pk)[-1].history_id
    drafts.rollback(Policy.objects.get(pk=policy.pk), first, alice)
    assert live(tenant_a)["policies"] == (f"no-greet:{HIDE_GREET}",)
    assert Policy.objects.get(pk=policy.pk).version == 3


def test_publishing_all_drafts_takes_a_tenants_guardrail_and_quota_with_its_tools(alice, tool_a, tenant_a) -> None:
    drafts.stage(Guardrail(tenant=tenant_a, name="pii", detector="personal_data", where="results"), alice)
    drafts.stage(Quota(tenant=tenant_a, name="few", tool="greet", calls=3, window="minute", per="caller"), alice)
    assert live(tenant_a)["guardrails"] == () and live(tenant_a)["quotas"] == ()
    done = drafts.publish_all(tenant_a, alice)
    assert sorted((d.kind, d.label, d.version) for d in done) == [("guardrail", "pii", 1), ("quota", "few", 1)]
    assert live(tenant_a) == {"policies": (), "guardrails": ("pii:redact",), "quotas": ("few:3",)}


def test_the_admin_saves_a_policy_as_a_draft_and_publishes_it_on_request(client: Client, alice, tool_a, tenant_a):
    client.force_login(alice)
    form = {"tenant": tenant_a.pk, "name": "no-greet", "description": "", "effect": "deny",
            "applies_to": "tools", "condition": HIDE_GREET, "enabled": "on", "_save": "Save draft"}  # fmt: skip
    saved = client.post(reverse("admin:mcp_app_policy_add"), form, follow=True).content.decode()
    assert "Saved as a draft: no client sees it until it is published." in saved
    policy = Policy.objects.get()
    assert policy.version == 0 and live(tenant_a)["policies"] == ()
    page = client.get(reverse("admin:mcp_app_policy_change", args=[policy.pk])).content.decode()
    assert "Draft, never published." in page and 'name="_publish"' in page and 'name="_discard"' in page
    listing = client.get(reverse("admin:mcp_app_policy_changelist")).content.decode()
    assert "draft (never published)" in listing and "Drafts" in listing

    del form["_save"]
    published = client.post(
        reverse("admin:mcp_app_policy_change", args=[policy.pk]), {**form, "_publish": "Save and publish"}, follow=True
    ).content.decode()
    assert "Published no-greet as version 1" in published
    assert live(tenant_a)["policies"] == (f"no-greet:{HIDE_GREET}",)
    versions = client.get(reverse("admin:mcp_app_policy_history", args=[policy.pk])).content.decode()
    assert "no-greet" in versions and "Published" in versions


def test_the_api_stages_a_quota_and_a_policy_with_draft_true_and_publishes_them(alice, bob, tool_a, tenant_a):
    api = ApiClient(alice)
    quota = api.call("POST", f"{API}/quotas/?draft=true", {"name": "few", "tool": "greet", "calls": 3})
    assert quota.status_code == 201, quota.content
    assert quota.json()["version"] == 0 and live(tenant_a)["quotas"] == ()
    policy = api.call("POST", f"{API}/policies/", {"name": "no-greet", "condition": HIDE_GREET})  # no ?draft
    assert policy.status_code == 201 and policy.json()["version"] == 1
    pk = policy.json()["id"]
    changed = api.call("PATCH", f"{API}/policies/{pk}/?draft=true", {"condition": OTHER})
    assert changed.status_code == 200, changed.content
    assert api.call("GET", f"{API}/policies/{pk}/").json()["condition"] == HIDE_GREET
    assert api.call("GET", f"{API}/policies/{pk}/?draft=true").json()["condition"] == OTHER
    assert live(tenant_a)["policies"] == (f"no-greet:{HIDE_GREET}",)

    assert ApiClient(bob).call("POST", f"{API}/policies/{pk}/publish/").status_code == 403  # a viewer
    published = api.call("POST", f"{API}/publish/").json()["published"]
    assert sorted((p["kind"], p["name"], p["version"]) for p in published) == [
        ("policy", "no-greet", 2),
        ("quota", "few", 1),
    ]
    assert live(tenant_a) == {
        "policies": (f"no-greet:{OTHER}",), "guardrails": (), "quotas": ("few:3",)
    }  # fmt: skip
    versions = api.call("GET", f"{API}/policies/{pk}/history/")
    assert versions.status_code == 200, versions.content
    body = versions.json()
    rows = body["results"] if isinstance(body, dict) else body
    assert [v["number"] for v in rows][:2] == [2, 1], body


def test_an_export_holds_the_published_rules_and_an_import_can_stage_them(alice, tool_a, tenant_a) -> None:
    Policy.objects.create(tenant=tenant_a, name="live", condition=HIDE_GREET)
    drafts.stage(Policy(tenant=tenant_a, name="waiting", condition="false"), alice)
    exported = documents.export_tenant(tenant_a)
    assert [p["name"] for p in exported["policies"]] == ["live"]
    assert "version" not in exported["policies"][0] and "draft" not in exported["policies"][0]

    exported["policies"][0]["condition"] = OTHER
    importer.import_document(tenant_a, exported, user=alice, draft=True)
    row = Policy.objects.get(name="live")
    assert row.version == 1 and row.condition == HIDE_GREET and row.draft == {"condition": OTHER}
    assert live(tenant_a)["policies"] == (f"live:{HIDE_GREET}",)


@pytest.mark.django_db(transaction=True)  # the simulation reads the rows on a thread of its own
def test_the_simulator_decides_with_the_rules_drafts_when_asked_and_with_what_clients_get_otherwise(
    alice, tool_a, tenant_a
) -> None:
    api = ApiClient(alice)
    drafts.stage(Policy(tenant=tenant_a, name="no-greet", effect="deny", condition=HIDE_GREET), alice)
    live_policy = Policy.objects.create(tenant=tenant_a, name="no-wave", effect="deny", condition=OTHER)
    drafted = drafts.apply_draft(Policy.objects.get(pk=live_policy.pk))
    drafted.enabled = False
    drafts.stage(drafted, alice)
    ask = {"caller": {"auth": "anonymous"}, "kind": "tool", "name": "greet"}

    published = api.call("POST", f"{API}/policy/simulate/", ask).json()
    assert published["allowed"] is True and published["lists"]["tools"] == ["greet"], published
    drafted_view = api.call("POST", f"{API}/policy/simulate/", {**ask, "with_drafts": True}).json()
    assert drafted_view["allowed"] is False and drafted_view["policy"] == "no-greet", drafted_view
    assert drafted_view["lists"]["tools"] == ["wave"], drafted_view  # no-wave's draft disables it
    # Asking with the drafts published nothing, and what clients get is decided as before.
    assert live(tenant_a)["policies"] == (f"no-wave:{OTHER}",)
    assert api.call("POST", f"{API}/policy/simulate/", ask).json() == published

    client = Client()
    client.force_login(alice)
    form = {"tenant": tenant_a.pk, "auth": "anonymous", "kind": "tool", "name": "greet", "claims": "{}",
            "arguments": "{}", "with_drafts": "on"}  # fmt: skip
    page = client.post(reverse("admin:mcp_app_policy_simulate"), form).content.decode()
    assert 'id="simulation-decision">Denied' in page and "Decided with the drafts" in page


def test_drafts_published_together_that_leave_no_member_a_tool_wait_for_a_confirmation(
    client: Client, alice, tool_a, tenant_a
) -> None:
    """Each policy alone leaves the members a tool (its save is not asked); published together they
    leave none: publishing all is refused, nothing is published, until it is confirmed (AMB-356)."""
    for name, tool in (("members-no-greet", "greet"), ("members-no-wave", "wave")):
        condition = f"caller.auth in ['oauth', 'api_key'] && target.name == '{tool}'"
        policy = Policy(tenant=tenant_a, name=name, effect="deny", applies_to="tools", condition=condition)
        policy.confirm_no_tools = False  # asked, as the admin's form and the API ask
        policy.full_clean()
        drafts.stage(policy, alice)
    with pytest.raises(drafts.PublishError, match="After publishing, no member of the tenant would have"):
        drafts.publish_all(tenant_a, alice)
    assert live(tenant_a)["policies"] == () and all(p.version == 0 for p in Policy.objects.all())

    api = ApiClient(alice)
    refused = api.call("POST", f"{API}/publish/")
    assert refused.status_code == 409 and "confirm_no_tools" in refused.json()["error"]["message"], refused.content
    assert api.call("POST", f"{API}/publish/", {"confirm_no_tools": "maybe"}).status_code == 400
    client.force_login(alice)
    page = client.post(reverse("admin:mcp_app_policy_drafts"), {"tenant": tenant_a.pk}, follow=True).content.decode()
    assert "no member of the tenant would have a single tool" in page and "Nothing was published." in page
    assert live(tenant_a)["policies"] == ()

    confirmed = {"tenant": tenant_a.pk, "confirm_no_tools": "on"}
    page = client.post(reverse("admin:mcp_app_policy_drafts"), confirmed, follow=True).content.decode()
    assert "Published 2 drafts as one change" in page, page
    assert len(live(tenant_a)["policies"]) == 2
