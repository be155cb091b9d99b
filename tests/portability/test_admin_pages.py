"""The tenant's Export button, Import page (diff first, then confirm) and OpenAPI import page in the admin."""

from __future__ import annotations

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse
from django.utils.html import escape

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Prompt, Tool
from tenants.models import Membership, Role
from tests.portability.support import FIXTURES

pytestmark = pytest.mark.django_db

VIEWS = ("export", "import", "import-openapi")


def url(name: str, tenant) -> str:
    return reverse(f"admin-portability:{name}", args=[tenant.pk])


def upload(text: str, name: str = "tenant.yaml") -> SimpleUploadedFile:
    return SimpleUploadedFile(name, text.encode(), content_type="application/yaml")


@pytest.fixture
def greet(tenant_a) -> Tool:
    return Tool.objects.create(
        tenant=tenant_a, name="greet", handler="template", handler_config={"text": "Hi"}
    )


@pytest.fixture
def dave(django_user_model, tenant_a):
    """An editor of tenant A: imports definitions, not the tenant's settings."""
    user = django_user_model.objects.create_user("dave", "dave@example.com", "dave-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_a, role=Role.EDITOR)
    return user


def test_the_owner_sees_export_and_import_buttons_on_the_tenant_page(client, alice, tenant_a):
    client.force_login(alice)
    html = client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).content.decode()
    for name in VIEWS:
        assert url(name, tenant_a) in html


def test_a_viewer_sees_no_buttons_and_every_page_is_a_404(client, bob, tenant_a):
    client.force_login(bob)
    html = client.get(reverse("admin:tenants_tenant_change", args=[tenant_a.pk])).content.decode()
    assert url("export", tenant_a) not in html
    for name in VIEWS:
        assert client.get(url(name, tenant_a)).status_code == 404
        assert client.post(url(name, tenant_a), {}).status_code == 404


@pytest.mark.parametrize("name", VIEWS)
def test_charlie_gets_the_same_404_for_tenant_a_as_for_a_tenant_that_does_not_exist(
    client, charlie, tenant_a, greet, name
):
    client.force_login(charlie)
    missing = reverse(f"admin-portability:{name}", args=[999999])
    for method in (client.get, client.post):
        theirs, nowhere = method(url(name, tenant_a)), method(missing)
        assert theirs.status_code == nowhere.status_code == 404
    assert Tool.objects.filter(tenant=tenant_a).count() == 1


def test_signed_out_visitors_are_sent_to_the_admin_login(client, tenant_a):
    response = client.get(url("export", tenant_a))
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_export_downloads_the_tenants_document(client, alice, tenant_a, greet):
    client.force_login(alice)
    response = client.get(url("export", tenant_a))
    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="tenant-a.yaml"'
    document = yaml.safe_load(response.content)
    assert document["tenant"] == "tenant-a" and [t["name"] for t in document["tools"]] == ["greet"]
    as_json = client.get(url("export", tenant_a) + "?format=json")
    assert as_json["Content-Type"] == "application/json" and as_json.json()["tools"][0]["name"] == "greet"


def test_import_shows_the_diff_first_and_changes_only_after_the_confirmation(client, alice, tenant_a, greet):
    client.force_login(alice)
    document = yaml.safe_load(client.get(url("export", tenant_a)).content)
    document["tools"][0]["description"] = "Says hi."
    document["prompts"] = [
        {"name": "review", "messages": [{"role": "user", "content": {"type": "text", "text": "Hi"}}]}
    ]
    text = yaml.safe_dump(document)

    shown = client.post(url("import", tenant_a), {"document": upload(text)})
    assert shown.status_code == 200
    html = shown.content.decode()
    assert "Confirm the import" in html and "description" in html and "review" in html
    greet.refresh_from_db()
    assert greet.description == "" and not Prompt.objects.exists()

    done = client.post(
        url("import", tenant_a), {"step": "confirm", "document_text": shown.context["document_text"]}
    )
    assert done.status_code == 302 and done["Location"] == reverse(
        "admin:tenants_tenant_change", args=[tenant_a.pk]
    )
    greet.refresh_from_db()
    assert greet.description == "Says hi." and Prompt.objects.filter(tenant=tenant_a, name="review").exists()


def test_the_prune_box_deletes_what_the_document_lacks_after_the_confirmation(client, alice, tenant_a, greet):
    client.force_login(alice)
    text = "format: mcp-platform/tenant\nversion: 1\ntools: []\n"
    shown = client.post(url("import", tenant_a), {"document": upload(text), "prune": "on"})
    assert "plan-delete" in shown.content.decode() and Tool.objects.filter(pk=greet.pk).exists()
    client.post(url("import", tenant_a), {"step": "confirm", "prune": "on", "document_text": text})
    assert not Tool.objects.filter(pk=greet.pk).exists()


def test_a_broken_document_is_shown_with_each_problem_at_its_path(client, alice, tenant_a):
    client.force_login(alice)
    text = "format: mcp-platform/tenant\nversion: 1\ntools:\n  - name: bad name\n    handler: template\n"
    response = client.post(url("import", tenant_a), {"document": upload(text)})
    assert response.status_code == 400
    assert response.context["problems"][0][0] == "tools[0].name"
    assert "<code>tools[0].name</code>" in response.content.decode()


@pytest.mark.parametrize(
    "text",
    ["[" * 20_000 + "]" * 20_000, "format: mcp-platform/tenant\nversion: 1\ntools: " + "[" * 20_000],
    ids=["20,000 deep", "20,000 deep and unclosed"],
)
def test_an_upload_nested_past_the_limit_is_shown_as_the_documents_problem_not_a_500(
    client, alice, tenant_a, text
):
    client.force_login(alice)
    response = client.post(url("import", tenant_a), {"document": upload(text)})
    assert response.status_code == 400
    assert response.context["problems"] == [
        ("(document)", "The document cannot be read: nested deeper than 64 levels.")
    ]
    assert not Tool.objects.filter(tenant=tenant_a).exists()


def test_an_editor_imports_definitions_but_not_a_change_of_the_tenants_settings(client, dave, tenant_a):
    client.force_login(dave)
    tools = "format: mcp-platform/tenant\nversion: 1\ntools:\n  - {name: hi, handler: template, handler_config: {text: Hi}}\n"
    client.post(url("import", tenant_a), {"step": "confirm", "document_text": tools})
    assert Tool.objects.filter(tenant=tenant_a, name="hi").exists()
    settings = "format: mcp-platform/tenant\nversion: 1\nsettings: {auth_mode: oauth}\n"
    response = client.post(url("import", tenant_a), {"step": "confirm", "document_text": settings})
    assert response.status_code == 400 and response.context["problems"][0][0] == "settings"
    tenant_a.refresh_from_db()
    assert tenant_a.auth_mode == "public"


def test_the_openapi_page_lists_the_operations_then_creates_the_chosen_tools(client, alice, tenant_a):
    client.force_login(alice)
    listed = client.post(
        url("import-openapi", tenant_a), {"document": upload((FIXTURES / "petstore.yaml").read_text())}
    )
    assert listed.status_code == 200
    html = listed.content.decode()
    assert "showPetById" in html and 'value="http://petstore.swagger.io/v1"' in html

    created = client.post(
        url("import-openapi", tenant_a),
        {
            "step": "create",
            "document_text": listed.context["document_text"],
            "operations": ["GET /pets", "GET /pets/{petId}"],
            "base_url": "https://pets.example.com/v1",
            "auth_header": "Authorization",
            "auth_value": "Bearer abc",
            "timeout": "12",
        },
    )
    assert created.status_code == 302
    tools = {t.name: t for t in Tool.objects.filter(tenant=tenant_a)}
    assert sorted(tools) == ["listPets", "showPetById"]
    assert tools["showPetById"].handler_config["url"] == "https://pets.example.com/v1/pets/{petId}"
    assert decrypt_secrets(tools["listPets"].handler_secrets) == {"Authorization": "Bearer abc"}
    assert tools["listPets"].timeout_seconds == 12


def test_the_openapi_page_shows_why_an_operation_cannot_be_imported(client, alice, tenant_a):
    client.force_login(alice)
    listed = client.post(
        url("import-openapi", tenant_a), {"document": upload((FIXTURES / "uspto.yaml").read_text())}
    )
    assert "Not importable: Its request body is application/x-www-form-urlencoded" in listed.content.decode()


def test_the_openapi_page_reports_a_bad_base_url_and_creates_nothing(client, alice, tenant_a):
    client.force_login(alice)
    text = (FIXTURES / "petstore.yaml").read_text()
    response = client.post(
        url("import-openapi", tenant_a),
        {
            "step": "create",
            "document_text": text,
            "operations": ["GET /pets"],
            "base_url": "ftp://x",
            "timeout": "5",
        },
    )
    assert response.status_code == 400 and response.context["problems"][0][0] == "base_url"
    assert not Tool.objects.filter(tenant=tenant_a).exists()


def test_the_openapi_page_refuses_a_document_that_is_not_openapi(client, alice, tenant_a):
    client.force_login(alice)
    response = client.post(url("import-openapi", tenant_a), {"document": upload("swagger: '2.0'\n")})
    assert response.status_code == 400 and "Swagger 2.0" in response.content.decode()


def test_a_malformed_import_says_each_problem_and_the_title_once(client, alice, tenant_a) -> None:
    client.force_login(alice)
    broken = (
        "format: mcp-platform/tenant\nversion: 1\n"
        "settings: {name: '', auth_mode: weird}\n"
        "tools:\n  - {name: 'bad name!', handler: template, handler_config: {}}\n"
    )
    response = client.post(url("import", tenant_a), {"document": upload(broken)})
    assert response.status_code == 400
    page = response.content.decode()
    problems = response.context["problems"]
    assert len(problems) >= 3
    for _where, message in problems:
        assert page.count(str(escape(message))) == 1, message
    assert page.count(f"<h1>{response.context['title']}</h1>") == 1
