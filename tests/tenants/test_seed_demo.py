"""seed_demo: creates the demo tenants as their documents (mcp_app/demo/tenants) say, validated, and is idempotent."""

from __future__ import annotations

import base64
import io

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command

from mcp_app.demo.seed import DEMO_SLUG, load
from mcp_app.models import Guardrail, Policy, Prompt, Quota, Resource, ResourceTemplate, Tool
from tenants.models import Tenant

pytestmark = pytest.mark.django_db


def history_count() -> int:
    return sum(m.history.count() for m in (Tool, Prompt, Resource, ResourceTemplate))


def seed(*args: str) -> str:
    out = io.StringIO()
    call_command("seed_demo", *args, stdout=out)
    return out.getvalue()


def demo_rows() -> str:
    """The demo's definitions as seed_demo's line names them, counted in the database (AMB-294)."""
    tenant = Tenant.objects.get(slug="demo")
    kinds = (Tool, Prompt, Resource, ResourceTemplate, Policy, Quota, Guardrail)
    n = {m: m.objects.filter(tenant=tenant).count() for m in kinds}
    template = "resource template" if n[ResourceTemplate] == 1 else "resource templates"
    policy = "policy" if n[Policy] == 1 else "policies"
    quota = "quota" if n[Quota] == 1 else "quotas"
    guardrail = "guardrail" if n[Guardrail] == 1 else "guardrails"
    return (
        f"{n[Tool]} tools, {n[Prompt]} prompts, {n[Resource]} resources, {n[ResourceTemplate]} {template},"
        f" {n[Policy]} {policy}, {n[Quota]} {quota} and {n[Guardrail]} {guardrail}"
    )


def logo() -> bytes:
    [blob] = [r["blob"] for r in load(DEMO_SLUG)["resources"] if r["uri"] == "demo://logo.png"]
    return base64.b64decode(blob)


def test_seed_demo_creates_the_demo_tenant_with_every_definition(monkeypatch):
    monkeypatch.delenv("MCP_ADMIN_PASSWORD", raising=False)
    output = seed()
    tenant = Tenant.objects.get(slug="demo")
    assert (tenant.name, tenant.title) == ("demo", "Demo MCP server")
    assert tenant.instructions and tenant.description
    tools = {t.name: t for t in Tool.objects.filter(tenant=tenant)}
    assert set(tools) == {
        "echo",
        "add",
        "greet",
        "show_logo",
        "count_slowly",
        "count_in_background",
        "fetch_json",
        "stream_count",
        "ask_everything",
        "greet_in_a_task",
        "fail_on_purpose",
        "ask_user",
        "summarize",
        "show_roots",
        "delete_note",
        "roll_dice",
        "roll_again",
    }
    assert {name for name, tool in tools.items() if tool.execution == "background"} == {
        "count_in_background",
        "stream_count",
        "greet_in_a_task",
        "fail_on_purpose",
    }
    assert tools["echo"].handler_config == {"callable": "echo"}
    assert tools["echo"].input_schema["required"] == ["message"]
    assert tools["echo"].output_schema == {
        "type": "object",
        "properties": {"echo": {"type": "string"}},
        "required": ["echo"],
    }
    assert tools["add"].handler_config == {"callable": "add"}
    assert tools["greet"].handler == "template" and tools["greet"].annotations["readOnlyHint"] is True
    assert tools["greet"].icons and tools["greet"].icons[0]["src"].startswith("data:image/png;base64,")
    assert [b["type"] for b in tools["show_logo"].handler_config["content"]] == [
        "text",
        "image",
        "resource_link",
        "resource",
    ]
    assert tools["count_slowly"].input_schema["properties"]["n"]["maximum"] == 50
    assert tools["delete_note"].approval == "every_time" and tools["summarize"].handler == "llm"
    assert tools["fetch_json"].handler == "http"
    assert tools["fetch_json"].handler_config["url"] == settings.MCP_PUBLIC_URL + "/demo/echo"
    prompts = {p.name: p for p in Prompt.objects.filter(tenant=tenant)}
    assert set(prompts) == {"code_review", "describe_logo"}
    language = prompts["code_review"].arguments[1]
    assert language["completions"] == ["python", "javascript", "typescript", "go", "rust"]
    assert [m["content"]["type"] for m in prompts["describe_logo"].messages] == ["image", "resource"]
    resources = {r.uri: r for r in Resource.objects.filter(tenant=tenant)}
    assert set(resources) == {"demo://readme", "demo://logo.png", "demo://config.json", "ui://demo/dice.html"}
    # The demo's MCP App (AMB-272): roll_dice shows it, roll_again is its button's, for the app only.
    assert resources["ui://demo/dice.html"].mime_type == "text/html;profile=mcp-app"
    assert tools["roll_dice"].meta == {"ui": {"resourceUri": "ui://demo/dice.html"}}
    assert tools["roll_again"].meta["ui"]["visibility"] == ["app"]
    assert bytes(resources["demo://logo.png"].blob) == logo()
    assert resources["demo://readme"].mime_type == "text/markdown"
    template = ResourceTemplate.objects.get(tenant=tenant)
    assert (template.uri_template, template.name) == ("demo://users/{user_id}/profile", "user-profile")
    assert template.completions == {"user_id": ["1", "2", "3", "42", "100"]}
    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and admin.is_staff
    assert "Admin login: admin / " in output
    assert "MCP URL: http://127.0.0.1:8000/t/demo/mcp" in output


def test_every_seeded_row_passes_the_admin_validation():
    seed("--tenant-only")
    for model in (Tool, Prompt, Resource, ResourceTemplate):
        for row in model.objects.all():
            row.full_clean()


def test_seed_demo_is_idempotent_and_a_second_run_changes_nothing(
    monkeypatch, django_capture_on_commit_callbacks
):
    monkeypatch.setenv("MCP_ADMIN_PASSWORD", "demo-admin-pw")
    with django_capture_on_commit_callbacks(execute=True):
        first = seed()
    version, history = Tenant.objects.get(slug="demo").definitions_version, history_count()
    counts = [m.objects.count() for m in (Tenant, Tool, Prompt, Resource, ResourceTemplate)]
    with django_capture_on_commit_callbacks(execute=True):
        second = seed()
    assert "admin / demo-admin-pw" in first
    # The password is printed only when set; the way to sign in, on every run (AMB-236).
    assert "demo-admin-pw" not in second and "Admin login: admin (password unchanged" in second
    assert f"Demo tenant 'demo': tenant created; {demo_rows()} created." in first
    assert f"Demo tenant 'demo': tenant kept; {demo_rows()} kept." in second
    assert [m.objects.count() for m in (Tenant, Tool, Prompt, Resource, ResourceTemplate)] == counts
    assert Tenant.objects.get(slug="demo").definitions_version == version
    assert history_count() == history
    assert get_user_model().objects.get(username="admin").check_password("demo-admin-pw")


def test_seed_demo_reset_of_unedited_tenants_saves_nothing_and_records_no_history(
    django_capture_on_commit_callbacks,
):
    seed("--tenant-only")
    version, history = Tenant.objects.get(slug="demo").definitions_version, history_count()
    with django_capture_on_commit_callbacks(execute=True):
        output = seed("--tenant-only", "--reset")
    assert f"Demo tenant 'demo': tenant unchanged; {demo_rows()} unchanged." in output
    assert "OAuth tenant 'secure': tenant unchanged; 2 tools and 1 resource unchanged." in output
    assert (Tenant.objects.get(slug="demo").definitions_version, history_count()) == (version, history)


def test_seed_demo_keeps_the_users_edits_to_demo_definitions_on_restart(django_capture_on_commit_callbacks):
    seed("--tenant-only")
    Tool.objects.filter(name="echo").update(description="edited")
    Tool.objects.filter(name="add").delete()
    with django_capture_on_commit_callbacks(execute=True):
        output = seed("--tenant-only")
    assert "Demo tenant 'demo': tenant kept; 1 tool created; " in output
    assert f"tools, {demo_rows().split(' tools, ')[1]} kept." in output
    assert Tool.objects.get(name="echo").description == "edited"
    assert Tool.objects.filter(name="add").exists()  # a missing demo row is recreated


def test_seed_demo_reset_restores_an_edited_demo_definition_and_announces_it(
    django_capture_on_commit_callbacks,
):
    seed("--tenant-only")
    Tool.objects.filter(name="echo").update(description="edited")
    tenant = Tenant.objects.get(slug="demo")
    with django_capture_on_commit_callbacks(execute=True):
        assert "; 1 tool updated; " in seed("--tenant-only", "--reset")
    assert Tool.objects.get(name="echo").description == "Return the message unchanged."
    assert Tenant.objects.get(pk=tenant.pk).definitions_version == tenant.definitions_version + 1


def test_print_login_sets_and_prints_a_known_password_for_an_existing_admin(monkeypatch):
    monkeypatch.delenv("MCP_ADMIN_PASSWORD", raising=False)
    seed()
    output = seed("--print-login")
    password = output.split("Admin login: admin / ")[1].split()[0]
    assert get_user_model().objects.get(username="admin").check_password(password)


def test_tenant_only_creates_no_admin_account():
    seed("--tenant-only")
    assert not get_user_model().objects.filter(username="admin").exists()
