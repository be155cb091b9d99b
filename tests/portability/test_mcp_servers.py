"""manage.py import_tenant with an mcpServers file (Claude Desktop, VS Code): URL entries become upstreams,
commands are skipped with the reason, a dry run shows it, a problem changes nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.management.commands.import_tenant import INVALID
from mcp_app.models import Upstream, UpstreamTool
from mcp_app.upstreams import service
from tests.upstreams.running import running_upstream

pytestmark = pytest.mark.django_db
BEARER = "mcp-servers-bearer-93d1"


def write(tmp_path: Path, document: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return str(path)


def claude_desktop(url: str = "https://mcp.example.com/mcp") -> dict:
    return {
        "mcpServers": {
            "docs": {"url": url, "headers": {"Authorization": f"Bearer {BEARER}"}},
            "filesystem": {
                "command": "npx",
                "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
            },
        }
    }


def test_url_entries_become_upstreams_with_encrypted_headers_and_commands_are_skipped(
    tenant_a, tmp_path, capsys
) -> None:
    call_command("import_tenant", write(tmp_path, claude_desktop()), "--tenant", "tenant-a")
    out = capsys.readouterr().out
    row = Upstream.objects.get(tenant=tenant_a)
    assert (row.name, row.prefix, row.url, row.enabled) == (
        "docs",
        "docs_",
        "https://mcp.example.com/mcp",
        True,
    )
    assert decrypt_secrets(row.secret_headers) == {"Authorization": f"Bearer {BEARER}"}
    assert "+ upstreams docs" in out and "secret headers: Authorization" in out and BEARER not in out
    assert (
        "! skipped filesystem: runs a local command (`npx -y @modelcontextprotocol/server-filesystem" in out
    )
    assert "never runs commands" in out
    call_command("import_tenant", write(tmp_path, claude_desktop("https://other.example.com/mcp")), "--tenant",
                 "tenant-a")  # fmt: skip
    again = capsys.readouterr().out
    assert (
        "= upstreams docs (already in the tenant: kept as it is)" in again and "Already up to date" in again
    )
    row.refresh_from_db()
    assert row.url == "https://mcp.example.com/mcp"


def test_vs_codes_servers_are_named_from_their_keys_and_client_only_variables_are_skipped(
    tenant_a, tmp_path, capsys
) -> None:
    document = {
        "inputs": [{"type": "promptString", "id": "token", "password": True}],
        "servers": {
            "GitHub Copilot": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"},
            "search": {"type": "http", "url": "https://search.example.com/mcp", "prefix": "s_", "disabled": True},
            "private": {"type": "http", "url": "https://p.example.com/mcp",
                        "headers": {"Authorization": "Bearer ${input:token}"}},
            "old": {"type": "sse", "url": "https://old.example.com/sse"},
            "local": {"type": "stdio", "command": "uvx", "args": ["mcp-server-git"]},
        },
    }  # fmt: skip
    call_command("import_tenant", write(tmp_path, document), "--tenant", "tenant-a")
    out = capsys.readouterr().out
    rows = {r.name: r for r in Upstream.objects.filter(tenant=tenant_a)}
    assert set(rows) == {"github-copilot", "search", "old"}
    assert rows["old"].transport == "sse" and rows["old"].url == "https://old.example.com/sse"
    assert rows["search"].transport == "streamable-http"
    assert rows["github-copilot"].prefix == "github-copilot_" and rows["github-copilot"].secret_headers == ""
    assert rows["search"].prefix == "s_" and not rows["search"].enabled
    assert "! skipped private: header 'Authorization' refers to ${input:token}" in out
    assert "skipped old" not in out
    assert "! skipped local: runs a local command (`uvx mcp-server-git`)" in out


def test_a_dry_run_shows_what_it_would_create_and_creates_nothing(tenant_a, tmp_path, capsys) -> None:
    call_command("import_tenant", write(tmp_path, claude_desktop()), "--tenant", "tenant-a", "--dry-run")
    out = capsys.readouterr().out
    assert "+ upstreams docs (https://mcp.example.com/mcp, prefix 'docs_'" in out and "Dry run" in out
    assert not Upstream.objects.exists()


def test_a_bad_entry_exits_2_naming_it_and_nothing_is_created(tenant_a, tmp_path, capsys) -> None:
    document = claude_desktop()
    document["mcpServers"]["broken"] = {"url": "not a url"}
    document["mcpServers"]["Docs"] = {"url": "https://dup.example.com/mcp"}
    document["mcpServers"]["a-very-long-server-name-for-a-prefix"] = {"url": "https://l.example.com/mcp"}
    with pytest.raises(SystemExit) as exited:
        call_command("import_tenant", write(tmp_path, document), "--tenant", "tenant-a")
    assert exited.value.code == INVALID
    err = capsys.readouterr().err
    assert "mcpServers.broken.url: Enter a valid URL." in err
    assert "mcpServers.Docs: Its upstream name 'docs' is also 'docs''s" in err
    assert "mcpServers.a-very-long-server-name-for-a-prefix.prefix:" in err
    assert "3 problem(s); nothing was changed." in err
    assert not Upstream.objects.exists()


def test_prune_is_refused_for_an_mcp_servers_file(tenant_a, tmp_path) -> None:
    with pytest.raises(CommandError, match="--prune applies to a tenant document"):
        call_command("import_tenant", write(tmp_path, claude_desktop()), "--tenant", "tenant-a", "--prune")
    assert not Upstream.objects.exists()


def test_an_imported_upstream_reaches_a_real_upstream_with_its_headers(tenant_a, tmp_path, settings) -> None:
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]
    with running_upstream(tmp_path, bearer=BEARER) as remote:
        call_command("import_tenant", write(tmp_path, claude_desktop(remote.url)), "--tenant", "tenant-a")
        report = service.sync(Upstream.objects.get(tenant=tenant_a, name="docs"))
    assert "echo" in report.new
    assert UpstreamTool.objects.filter(upstream__name="docs", remote_name="echo").exists()
