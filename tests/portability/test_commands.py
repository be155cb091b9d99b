"""manage.py export_tenant and import_tenant: files, formats, the diff, and exit codes."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_app.models import Tool
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


@pytest.fixture
def greet(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a, name="greet", handler="template", handler_config={"text": "Hi"}
    )


def test_export_writes_yaml_to_stdout_and_json_by_the_files_extension(greet, tmp_path, capsys):
    call_command("export_tenant", "tenant-a")
    assert yaml.safe_load(capsys.readouterr().out)["tools"][0]["name"] == "greet"
    call_command("export_tenant", "tenant-a", "-o", str(tmp_path / "a.json"))
    assert json.loads((tmp_path / "a.json").read_text())["tenant"] == "tenant-a"


def test_export_of_an_unknown_tenant_is_a_clear_error():
    with pytest.raises(CommandError, match="No tenant 'nope'"):
        call_command("export_tenant", "nope")


def test_import_with_create_makes_the_tenant_and_a_second_run_is_up_to_date(greet, tmp_path, capsys):
    path = tmp_path / "a.yaml"
    call_command("export_tenant", "tenant-a", "-o", str(path))
    call_command("import_tenant", str(path), "--tenant", "copy", "--create")
    assert "+ tools greet" in capsys.readouterr().out
    assert Tool.objects.filter(tenant__slug="copy", name="greet").exists()
    call_command("import_tenant", str(path), "--tenant", "copy")
    assert "Already up to date" in capsys.readouterr().out


def test_import_without_tenant_takes_the_one_the_document_names(greet, tmp_path, capsys):
    path = tmp_path / "a.yaml"
    call_command("export_tenant", "tenant-a", "-o", str(path))
    Tool.objects.filter(tenant__slug="tenant-a").delete()
    call_command("import_tenant", str(path))
    assert "+ tools greet" in capsys.readouterr().out
    assert Tool.objects.filter(tenant__slug="tenant-a", name="greet").exists()


def test_import_without_tenant_of_a_document_naming_none_asks_for_one(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("format: mcp-platform/tenant\nversion: 1\ntools: []\n")
    with pytest.raises(CommandError, match="--tenant: the document names none"):
        call_command("import_tenant", str(path))
    servers = tmp_path / "servers.json"
    servers.write_text(json.dumps({"mcpServers": {"x": {"url": "https://example.com/mcp"}}}))
    with pytest.raises(CommandError, match="--tenant: an mcpServers file names none"):
        call_command("import_tenant", str(servers))


def test_a_dry_run_with_create_leaves_no_tenant_behind(greet, tmp_path, capsys):
    path = tmp_path / "a.yaml"
    call_command("export_tenant", "tenant-a", "-o", str(path))
    call_command("import_tenant", str(path), "--tenant", "copy", "--create", "--dry-run")
    out = capsys.readouterr().out
    assert "+ tools greet" in out and "Dry run" in out
    assert not Tenant.objects.filter(slug="copy").exists()


def test_a_broken_document_exits_2_listing_each_problem_and_changes_nothing(greet, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text("format: mcp-platform/tenant\nversion: 1\ntools:\n  - name: greet\n    handler: nope\n")
    with pytest.raises(SystemExit) as exited:
        call_command("import_tenant", str(path), "--tenant", "tenant-a")
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "tools[0].handler_config: Unknown handler kind 'nope'" in err and "nothing was changed" in err
    assert Tool.objects.get(pk=greet.pk).handler == "template"


def test_a_missing_tenant_without_create_and_a_missing_file_are_clear_errors(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("format: mcp-platform/tenant\nversion: 1\n")
    with pytest.raises(CommandError, match="add --create"):
        call_command("import_tenant", str(path), "--tenant", "nope")
    with pytest.raises(CommandError, match="Cannot read"):
        call_command("import_tenant", str(tmp_path / "missing.yaml"), "--tenant", "tenant-a")
    with pytest.raises(CommandError, match="Cannot create tenant"):
        call_command("import_tenant", str(path), "--tenant", "Bad Slug!", "--create")


def test_prune_deletes_through_the_command(greet, tmp_path):
    path = tmp_path / "empty.json"
    path.write_text('{"format": "mcp-platform/tenant", "version": 1}')
    call_command("import_tenant", str(path), "--tenant", "tenant-a")
    assert Tool.objects.filter(pk=greet.pk).exists()
    call_command("import_tenant", str(path), "--tenant", "tenant-a", "--prune")
    assert not Tool.objects.filter(pk=greet.pk).exists()
