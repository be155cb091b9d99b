"""`manage.py check_tenant`: the demo tenants come back clean, deliberately broken definitions exit 1
naming each, and an imported OpenAPI tenant says exactly what to fix (or nothing)."""

from __future__ import annotations

import json

import pytest
from django.core.management import CommandError, call_command

from mcp_app.demo.seed import DEMO_SLUG, SECURE_SLUG, seed_tenant
from mcp_app.models import Tool, Upstream
from mcp_app.portability.openapi_tools import Settings, import_operations, read
from tests.portability.support import FIXTURES, TOKEN, running_petstore
from tests.upstreams.running import make_upstream, running_upstream

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def _loopback(settings):
    # As bin/serve allows it: the demo's http tools call this platform's own /demo endpoints.
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]


def report_of(slug: str, capsys, *options: str) -> dict:
    call_command("check_tenant", slug, "--json", *options)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("slug", [DEMO_SLUG, SECURE_SLUG])
def test_the_demo_tenants_have_nothing_a_client_would_fail_on(slug, capsys):
    seed_tenant(slug, reset=True)
    call_command("check_tenant", slug)  # no CommandError: exit 0
    out = capsys.readouterr().out
    assert f"Tenant {slug}:" in out and "0 errors" in out
    report = report_of(slug, capsys)
    assert report["ok"] is True and report["counts"]["error"] == 0
    assert set(report["listed"]) == {"2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28"}
    if slug == DEMO_SLUG:  # called: what says it only reads a closed world; never what changes things
        assert {"echo", "add", "greet", "count_slowly"} <= set(report["dry_runs"])
        assert not {"fetch_json", "delete_note", "count_in_background", "ask_user"} & set(report["dry_runs"])
        # Untouched, the demo warns of nothing (issue 32 §7): its app-only tool (the dice app's
        # roll_again) is called as its app calls it, from a host declaring MCP Apps (AMB-279).
        assert "roll_again" in report["dry_runs"]
        assert report["counts"]["warning"] == 0, [d for d in report["definitions"] if d["severity"] == "warning"]


def test_the_demo_says_what_needs_a_client_capability(capsys):
    seed_tenant(DEMO_SLUG, reset=True)
    report = report_of(DEMO_SLUG, capsys)
    needs = {d["name"]: [f["message"] for f in d["findings"]] for d in report["definitions"]}
    assert "sampling" in " ".join(needs["summarize"])
    assert "elicitation" in " ".join(needs["ask_user"])
    # Found by the dry run: show_roots asks the client for its roots.
    assert "roots" in " ".join(needs["show_roots"])
    # The dice app's own button is kept from model-facing lists by design: said, not an error.
    assert "MCP Apps" in " ".join(needs["roll_again"])


@pytest.fixture
def broken(tenant_a):
    """Definitions saved past the model's checks (as an old import could have): each fails a client."""
    closed = {"readOnlyHint": True, "openWorldHint": False}
    Tool.objects.create(tenant=tenant_a, name="bad name", handler="template", handler_config={"text": "hi"})
    Tool.objects.create(
        tenant=tenant_a, name="private_hook", handler="http", handler_config={"url": "https://10.0.0.5/hook"}
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="lost_callable",
        handler="python",
        handler_config={"callable": "no_such_callable"},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="wrong_output",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        output_schema={"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]},
        annotations=closed,
        handler="template",
        handler_config={"structured": {"count": "{{ name }}"}},
    )
    Tool.objects.create(
        tenant=tenant_a,
        name="bad_example",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}, "examples": [{"n": "two"}]},
        handler="template",
        handler_config={"text": "{{ n }}"},
    )
    Upstream.objects.create(tenant=tenant_a, name="gone", url="https://127.0.0.1:9/mcp")
    Tool.objects.create(tenant=tenant_a, name="greet", handler="template", handler_config={"text": "hello"})
    return tenant_a


def test_broken_definitions_exit_1_naming_each(broken, capsys):
    with pytest.raises(CommandError) as failed:
        call_command("check_tenant", broken.slug)
    named = str(failed.value)
    for definition in ("tool bad name", "tool private_hook", "tool lost_callable", "tool wrong_output",
                       "tool bad_example", "upstream gone"):  # fmt: skip
        assert definition in named
    assert "greet" not in named
    out = capsys.readouterr().out
    assert "does not match its output schema" in out  # the dry run
    assert "Example 1 of the input schema is refused" in out
    assert "refuses https://10.0.0.5/hook" in out
    assert "Unreachable" in out
    assert "fix: /admin/mcp_app/tool/" in out and "fix: /admin/mcp_app/upstream/" in out


def test_offline_leaves_out_the_dry_run_and_the_upstreams(broken, capsys):
    with pytest.raises(CommandError) as failed:
        call_command("check_tenant", broken.slug, "--offline")
    assert "wrong_output" not in str(failed.value) and "upstream gone" not in str(failed.value)
    assert "tool bad name" in str(failed.value)


def test_an_unknown_tenant_is_a_clear_error():
    with pytest.raises(CommandError, match="No tenant 'nope'"):
        call_command("check_tenant", "nope")


@pytest.mark.parametrize("fixture", ["petstore-expanded.yaml", "petstore.yaml", "uspto.yaml"])
def test_an_imported_openapi_tenant_comes_back_clean(fixture, tenant_a, capsys):
    with running_petstore() as store:
        description = read((FIXTURES / fixture).read_text())
        keys = [op.key for op in description.operations if op.supported]
        settings = Settings(base_url=store.base + "/v2", auth_header="Authorization", auth_value=TOKEN)
        import_operations(tenant_a, description, keys, settings)
        report = report_of(tenant_a.slug, capsys)
    assert report["checked"]["tool"] == len(keys)
    problems = [f["message"] for d in report["definitions"] for f in d["findings"] if f["severity"] != "info"]
    assert problems == []


def test_an_upstream_server_is_checked_while_it_answers_and_named_once_it_does_not(
    tenant_a, tmp_path, capsys
):
    with running_upstream(tmp_path) as remote:
        make_upstream(tenant_a, remote.url, publish_new=True)
        call_command("sync_upstreams", tenant_a.slug)
        capsys.readouterr()
        report = report_of(tenant_a.slug, capsys)
        assert report["checked"]["upstream"] == 1 and report["checked"]["tool"] > 0  # its published tools
        assert report["ok"] is True, report["definitions"]
    with pytest.raises(CommandError, match="upstream docs"):
        call_command("check_tenant", tenant_a.slug)
    assert "Unreachable" in capsys.readouterr().out
