"""mcp_app/drafts/service.py: drafts nobody sees, publishing as numbered versions, discard, roll back."""

from __future__ import annotations

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from audit.models import Action, AuditEvent
from mcp_app.catalog import loader
from mcp_app.drafts import service as drafts
from mcp_app.handlers.secrets import decrypt_secrets, encrypt_secrets
from mcp_app.history import service as history
from mcp_app.models import Prompt, Resource, Tool
from tests.admin.support import GroupListener

pytestmark = pytest.mark.django_db(transaction=True)


def served_tools(tenant) -> dict[str, str]:
    # The catalog's own read of the rows (get_catalog's, without its thread hop, which would close the
    # test's database connection on PostgreSQL).
    return {t.name: t.description for t in loader._load_catalog(tenant.id).tools}


def test_existing_and_code_made_definitions_are_published_version_1(tool_a):
    assert tool_a.version == 1 and tool_a.draft is None
    assert history.versions(Tool, tool_a.pk)[0].number == 1


def test_a_new_draft_is_invisible_until_published_then_version_1(alice, tenant_a):
    row = Tool(tenant=tenant_a, name="fresh", description="new", handler="template", handler_config={"text": "hi"})
    drafts.stage(row, alice)
    assert row.version == 0 and drafts.has_draft(row)
    assert "fresh" not in served_tools(tenant_a)
    assert history.versions(Tool, row.pk) == []  # a draft is not a version

    done = drafts.publish(row, alice)

    assert done is not None and done.version == 1
    assert served_tools(tenant_a)["fresh"] == "new"
    assert history.versions(Tool, row.pk)[0].number == 1


def test_a_draft_of_a_published_tool_keeps_clients_on_the_published_version(alice, tool_a, tenant_a):
    quiet = GroupListener(tenant_a.id)
    tool_a.description = "Say hello loudly."
    drafts.stage(tool_a, alice)

    stored = Tool.objects.get(pk=tool_a.pk)
    assert stored.description == "Say hello." and stored.draft == {"description": "Say hello loudly."}
    assert served_tools(tenant_a)["greet"] == "Say hello."
    assert quiet.collect() == []  # nobody is told of a draft
    listener = GroupListener(tenant_a.id)
    assert [c.name for c in drafts.changes(stored)] == ["description"]
    assert drafts.with_draft(stored).description == "Say hello loudly." and stored.description == "Say hello."

    drafts.publish(stored, alice)

    stored.refresh_from_db()
    assert (stored.version, stored.draft, stored.description) == (2, None, "Say hello loudly.")
    assert served_tools(tenant_a)["greet"] == "Say hello loudly."
    assert [(e["type"], e["kind"]) for e in listener.collect()] == [("mcp.list_changed", "tools")]
    event = AuditEvent.objects.get(action=Action.DEFINITIONS_PUBLISHED)
    assert event.detail == {"published": [{"kind": "tool", "name": "greet", "version": 2}]}
    assert event.actor_username == "alice"


def test_staging_the_published_values_again_leaves_no_draft(alice, tool_a):
    tool_a.description = "changed"
    drafts.stage(tool_a, alice)
    tool_a.description = "Say hello."
    drafts.stage(tool_a, alice)
    assert Tool.objects.get(pk=tool_a.pk).draft is None


def test_secrets_take_effect_when_saved_and_are_never_in_a_draft(alice, tool_a):
    tool_a.handler_secrets = encrypt_secrets({"X-Key": "v2"})
    tool_a.description = "drafted"
    drafts.stage(tool_a, alice)
    stored = Tool.objects.get(pk=tool_a.pk)
    assert decrypt_secrets(stored.handler_secrets) == {"X-Key": "v2"}
    assert stored.version == 1 and "handler_secrets" not in stored.draft


def test_publish_all_is_one_change_all_or_none(alice, tool_a, tenant_a):
    listener = GroupListener(tenant_a.id)
    tool_a.description = "one"
    drafts.stage(tool_a, alice)
    prompt = Prompt(tenant=tenant_a, name="p", messages=[{"role": "user", "content": {"type": "text", "text": "x"}}])
    drafts.stage(prompt, alice)

    done = drafts.publish_all(tenant_a, alice)

    assert sorted((d.kind, d.version) for d in done) == [("prompt", 1), ("tool", 2)]
    events = listener.collect()
    assert sorted(e["kind"] for e in events) == ["prompts", "tools"]  # one each, not one per row
    assert drafts.pending(tenant_a) == []


def test_publish_all_publishes_nothing_when_one_draft_cannot_be_published(alice, tool_a, tenant_a):
    tool_a.description = "fine"
    drafts.stage(tool_a, alice)
    clash = Tool(tenant=tenant_a, name="other", handler="template", handler_config={"text": "x"})
    drafts.stage(clash, alice)
    # Written behind the checks' back, as a concurrent edit could: the draft no longer validates.
    Tool.objects.filter(pk=clash.pk).update(handler_config={"nope": 1})

    with pytest.raises(drafts.PublishError, match="other cannot be published"):
        drafts.publish_all(tenant_a, alice)

    assert Tool.objects.get(pk=tool_a.pk).version == 1  # the good one waits too
    assert served_tools(tenant_a)["greet"] == "Say hello."


def test_discard_keeps_the_published_version_and_deletes_a_never_published_draft(alice, tool_a, tenant_a):
    tool_a.description = "dropped"
    drafts.stage(tool_a, alice)
    assert drafts.discard(tool_a) is True
    assert Tool.objects.get(pk=tool_a.pk).description == "Say hello."
    assert Tool.objects.get(pk=tool_a.pk).draft is None

    new = Resource(tenant=tenant_a, uri="file:///n", name="n", text="t")
    drafts.stage(new, alice)
    assert drafts.discard(new) is True
    assert not Resource.objects.filter(pk=new.pk).exists()
    assert drafts.discard(tool_a) is False  # nothing left to discard


def test_roll_back_publishes_an_earlier_version_as_the_next_one(alice, tool_a, tenant_a):
    for text in ("two", "three"):
        tool_a.description = text
        drafts.stage(tool_a, alice)
        drafts.publish(tool_a, alice)
    first = history.versions(Tool, tool_a.pk)[-1]
    assert first.number == 1

    row = drafts.rollback(Tool.objects.get(pk=tool_a.pk), first.history_id, alice)

    assert (row.version, row.description) == (4, "Say hello.")
    newest = history.versions(Tool, tool_a.pk)[0]
    assert newest.number == 4 and newest.reason.startswith("Rolled back to version 1 ")
    assert AuditEvent.objects.filter(action=Action.DEFINITION_ROLLED_BACK).count() == 1
    assert served_tools(tenant_a)["greet"] == "Say hello."
    versions = history.versions(Tool, tool_a.pk)
    by_number = {v.number: v.history_id for v in versions}
    changes = history.between(Tool, tool_a.pk, by_number[1], by_number[3])
    assert [(c.name, c.old, c.new) for c in changes] == [("description", "Say hello.", "three")]


def test_a_binary_resource_draft_round_trips_its_bytes(alice, tenant_a):
    res = Resource.objects.create(tenant=tenant_a, uri="file:///b", name="b", blob=b"\x00\x01", text="")
    res.blob = b"\xff\xfe\x00"
    drafts.stage(res, alice)
    stored = Resource.objects.get(pk=res.pk)
    assert bytes(stored.blob) == b"\x00\x01"
    drafts.publish(stored, alice)
    assert bytes(Resource.objects.get(pk=res.pk).blob) == b"\xff\xfe\x00"


def test_the_import_command_stages_drafts_and_publish_tenant_publishes_them(tmp_path, tool_a, tenant_a):
    doc = tmp_path / "t.yaml"
    doc.write_text(
        "format: mcp-platform/tenant\nversion: 1\ntools:\n"
        "  - name: greet\n    description: staged\n    handler: template\n"
        "    input_schema: {type: object, properties: {name: {type: string}}, required: [name]}\n"
        "    handler_config: {text: 'Hello, {{ name }}!'}\n    title: Greet\n"
        "  - name: brand-new\n    handler: template\n    handler_config: {text: new}\n"
    )
    call_command("import_tenant", str(doc), "--tenant", tenant_a.slug, "--draft")
    assert served_tools(tenant_a) == {"greet": "Say hello."}
    assert {str(r) for r in drafts.pending(tenant_a)} == {"greet", "brand-new"}

    call_command("publish_tenant", tenant_a.slug)

    assert served_tools(tenant_a) == {"greet": "staged", "brand-new": ""}
    assert drafts.pending(tenant_a) == []
    with pytest.raises(CommandError, match="cannot stage deletions"):
        call_command("import_tenant", str(doc), "--tenant", tenant_a.slug, "--draft", "--prune")
    with pytest.raises(CommandError, match="No tenant"):
        call_command("publish_tenant", "nobody")
