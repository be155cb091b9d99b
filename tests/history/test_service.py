"""mcp_app/history/service.py: versions with readable diffs, revert and restore as ordinary, checked edits."""

from __future__ import annotations

import pytest

from mcp_app.handlers.secrets import decrypt_secrets, encrypt_secrets
from mcp_app.history import service
from mcp_app.models import Prompt, Tool

pytestmark = pytest.mark.django_db


def test_each_version_names_who_changed_what_newest_first(alice, edited_tool):
    versions = service.versions(Tool, edited_tool.pk)
    assert [v.type for v in versions] == ["changed", "created"]
    assert versions[0].user == "alice"
    changed = {c.name: c for c in versions[0].changes}
    assert set(changed) == {"description", "handler_config"}
    assert changed["description"].lines == [("-", "Say hello."), ("+", "Say hello loudly.")]


def test_a_json_field_is_diffed_line_by_line_on_its_pretty_printed_form(tool_a):
    tool_a.input_schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "shout": {"type": "boolean"}},
        "required": ["name"],
    }
    tool_a.save()
    change = next(c for c in service.versions(Tool, tool_a.pk)[0].changes if c.name == "input_schema")
    assert ("+", '    "shout": {') in change.lines
    assert ("+", '      "type": "boolean"') in change.lines
    # Only the added lines are marked: the unchanged ones stay context.
    assert not [line for kind, line in change.lines if kind == "-"]
    assert (" ", '  "required": [') in change.lines


def test_revert_brings_back_the_old_values_and_records_why(alice, edited_tool):
    oldest = service.versions(Tool, edited_tool.pk)[-1]
    service.revert(edited_tool, oldest.history_id, alice)
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello."
    assert edited_tool.handler_config == {"text": "Hello, {{ name }}!"}
    newest = service.versions(Tool, edited_tool.pk)[0]
    assert newest.user == "alice"
    assert newest.reason.startswith("Rolled back to version 1 (") and newest.reason.endswith(" by alice")
    assert service.when(oldest.date) in newest.reason


def test_revert_keeps_todays_secrets_which_history_never_holds(alice, tool_a):
    first = service.versions(Tool, tool_a.pk)[0]
    tool_a.handler_secrets = encrypt_secrets({"Authorization": "Bearer today"})
    tool_a.description = "with a secret"
    tool_a.save()
    service.revert(tool_a, first.history_id, alice)
    tool_a.refresh_from_db()
    assert tool_a.description == "Say hello."
    assert decrypt_secrets(tool_a.handler_secrets) == {"Authorization": "Bearer today"}
    assert not hasattr(Tool.history.first(), "handler_secrets")


def test_a_version_that_no_longer_validates_is_refused_with_the_field_named(alice, edited_tool):
    oldest = service.versions(Tool, edited_tool.pk)[-1]
    # As if the rules had tightened since: the stored version's schema is no longer acceptable.
    Tool.history.filter(history_id=oldest.history_id).update(input_schema={"type": "string"})
    with pytest.raises(service.HistoryError, match="input_schema: .*object"):
        service.revert(edited_tool, oldest.history_id, alice)
    edited_tool.refresh_from_db()
    assert edited_tool.description == "Say hello loudly."


def test_a_version_whose_name_is_now_taken_is_refused(alice, tenant_a, tool_a):
    first = service.versions(Tool, tool_a.pk)[0]
    tool_a.name = "greet_v2"
    tool_a.save()
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config={"text": "x"})
    with pytest.raises(service.HistoryError, match="already exists"):
        service.revert(tool_a, first.history_id, alice)


def test_a_version_of_another_object_is_no_such_version(alice, tenant_a, tool_a):
    other = Prompt.objects.create(tenant=tenant_a, name="p", messages=[])
    other_tool = Tool.objects.create(tenant=tenant_a, name="other", handler="template", handler_config={})
    foreign = service.versions(Tool, other_tool.pk)[0]
    with pytest.raises(service.NoSuchVersion):
        service.revert(tool_a, foreign.history_id, alice)
    assert service.versions(Prompt, other.pk)[0].type == "created"


def test_a_deleted_definition_is_listed_per_tenant_and_restored_with_its_id(
    alice, tenant_a, tenant_b, tool_a
):
    pk = tool_a.pk
    tool_a.delete()
    assert [v.object_id for v in service.deleted(Tool, {tenant_a.pk})] == [pk]
    assert service.deleted(Tool, {tenant_b.pk}) == []
    record = service.deletion(Tool, service.deleted(Tool, None)[0].history_id, {tenant_a.pk})
    with pytest.raises(service.NoSuchVersion):
        service.deletion(Tool, record.history_id, {tenant_b.pk})
    restored = service.restore(record, alice)
    assert restored.pk == pk and Tool.objects.get(pk=pk).description == "Say hello."
    assert service.deleted(Tool, None) == []
    assert service.versions(Tool, pk)[0].reason.startswith("Restored by alice (deleted ")
