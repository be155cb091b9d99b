"""The platform as an MCP Registry (AMB-372): the v0.1 read endpoints and each listed tenant's server.json,
every answer checked against the registry's published schemas (tests/registry/schemas/); an unlisted,
inactive or missing tenant answers exactly alike; bad input is a 400 in the spec's error shape; the
owner lists a tenant in the admin, the API and the tenant document."""

from __future__ import annotations

from urllib.parse import quote

import pytest
from django.urls import reverse

from mcp_app.portability.document import export_tenant
from mcp_app.portability.importer import import_document
from mcp_app.registry import names
from tenants.models import Tenant
from tests.api.conftest import API, ApiClient
from tests.registry.schemas import check_error, check_server_json, check_server_list, check_server_response
from tests.tenants.test_tenant_admin import tenant_form_data

pytestmark = pytest.mark.django_db
PUBLIC = "https://mcp.example.com"
NS = "com.example.mcp"


@pytest.fixture(autouse=True)
def _public_url(settings) -> None:
    settings.MCP_PUBLIC_URL = PUBLIC
    settings.MCP_REGISTRY_NAMESPACE = ""


def listed(slug: str, **fields) -> Tenant:
    return Tenant.objects.create(
        slug=slug, name=fields.pop("name", slug.title()), registry_listed=True, **fields
    )


def get(client, path: str):
    response = client.get(path)
    assert response["Content-Type"] == "application/json", response.content[:200]
    return response.status_code, response.json()


def test_a_listed_oauth_tenant_is_a_server_json_naming_its_mcp_url_and_its_oauth_metadata(client):
    listed(
        "weather", name="Weather", title="Weather API", description="Forecasts. " * 30, server_version="2.1.0",
        icons=[{"src": "https://mcp.example.com/w.png", "mimeType": "image/png", "sizes": ["48x48"]},
               {"src": "data:image/png;base64,AAAA"}, {"src": "http://plain.example/w.png"}],
    )  # fmt: skip
    status, document = get(client, "/t/weather/server.json")
    assert status == 200
    check_server_json(document)
    assert document["name"] == f"{NS}/weather"
    assert document["remotes"] == [{"type": "streamable-http", "url": f"{PUBLIC}/t/weather/mcp"}]
    assert document["version"] == "2.1.0" and document["title"] == "Weather API"
    assert len(document["description"]) <= 100 and document["description"].endswith("Forecasts.…")
    assert document["icons"] == [
        {"src": "https://mcp.example.com/w.png", "mimeType": "image/png", "sizes": ["48x48"]}
    ]
    assert document["websiteUrl"] == f"{PUBLIC}/t/weather/connect"
    oauth = document["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["authorization"]
    assert oauth == {
        "required": "oauth2.1",
        "protectedResourceMetadata": f"{PUBLIC}/.well-known/oauth-protected-resource/t/weather/mcp",
    }
    # That URL is the platform's RFC 9728 metadata of that endpoint.
    metadata = client.get("/.well-known/oauth-protected-resource/t/weather/mcp")
    assert metadata.status_code == 200 and metadata.json()["resource"] == f"{PUBLIC}/t/weather/mcp"


def test_a_public_tenant_says_nothing_of_oauth_and_a_bare_one_is_still_valid(client):
    listed("open", name="O", auth_mode="public")
    status, document = get(client, "/t/open/server.json")
    check_server_json(document)
    assert "_meta" not in document and document["description"] == "O" and document["title"] == "O"


def test_the_list_pages_by_cursor_searches_the_name_and_filters_by_version_and_date(client):
    for slug in ("alpha", "beta", "gamma", "delta", "epsilon"):
        listed(slug)
    Tenant.objects.create(slug="hidden", name="Hidden")  # not listed
    listed("asleep", is_active=False)
    status, first = get(client, "/v0.1/servers?limit=2")
    assert status == 200
    check_server_list(first)
    assert [s["server"]["name"] for s in first["servers"]] == [f"{NS}/alpha", f"{NS}/beta"]
    assert first["metadata"] == {"count": 2, "nextCursor": f"{NS}/beta"}
    seen = [s["server"]["name"] for s in first["servers"]]
    cursor = first["metadata"]["nextCursor"]
    while cursor:
        status, page = get(client, f"/v0.1/servers?limit=2&cursor={quote(cursor, safe='')}")
        check_server_list(page)
        seen += [s["server"]["name"] for s in page["servers"]]
        cursor = page["metadata"].get("nextCursor")
    assert seen == [f"{NS}/{s}" for s in ("alpha", "beta", "delta", "epsilon", "gamma")]
    official = first["servers"][0]["_meta"]["io.modelcontextprotocol.registry/official"]
    assert official["status"] == "active" and official["isLatest"] is True

    _, found = get(client, "/v0.1/servers?search=ELTA")
    assert [s["server"]["name"] for s in found["servers"]] == [f"{NS}/delta"]
    _, everything = get(client, f"/v0.1/servers?search={NS}/")  # the namespace is part of the name
    assert everything["metadata"]["count"] == 5
    _, none = get(client, "/v0.1/servers?search=hidden")
    check_server_list(none)
    assert none == {"servers": [], "metadata": {"count": 0}}

    Tenant.objects.filter(slug="beta").update(server_version="9.9.9")
    _, nines = get(client, "/v0.1/servers?version=9.9.9")
    assert [s["server"]["version"] for s in nines["servers"]] == ["9.9.9"]
    _, latest = get(client, "/v0.1/servers?version=latest")
    assert latest["metadata"]["count"] == 5
    _, later = get(client, "/v0.1/servers?updated_since=2999-01-01T00:00:00Z")
    assert later["metadata"]["count"] == 0
    _, earlier = get(client, "/v0.1/servers?updated_since=2000-01-01T00:00:00%2B02:00")
    assert earlier["metadata"]["count"] == 5


def test_a_servers_versions_and_one_version_by_number_or_latest(client):
    listed("weather", server_version="1.4.0")
    for path in (
        f"/v0.1/servers/{quote(NS + '/weather', safe='')}/versions",
        f"/v0.1/servers/{NS}/weather/versions",
    ):
        status, versions = get(client, path)
        assert status == 200
        check_server_list(versions)
        assert [s["server"]["version"] for s in versions["servers"]] == ["1.4.0"]
    for version in ("1.4.0", "latest"):
        status, one = get(client, f"/v0.1/servers/{quote(NS + '/weather', safe='')}/versions/{version}")
        assert status == 200
        check_server_response(one)
        assert one["server"]["name"] == f"{NS}/weather"
    status, missing = get(client, f"/v0.1/servers/{NS}/weather/versions/1.3.0")
    assert status == 404 and missing == {"error": "Server version not found"}


def test_unlisted_inactive_missing_and_foreign_names_answer_exactly_alike(client):
    listed("shown")
    Tenant.objects.create(slug="unlisted", name="U")
    listed("inactive", is_active=False)
    answers = set()
    for slug in ("unlisted", "inactive", "missing"):
        for path in (
            f"/t/{slug}/server.json",
            f"/v0.1/servers/{NS}/{slug}/versions",
            f"/v0.1/servers/{NS}/{slug}/versions/latest",
            f"/v0.1/servers/{NS}/{slug}/versions/1.0.0",
        ):
            response = client.get(path)
            check_error(response.json())
            answers.add((response.status_code, response.content, response["Content-Type"]))
    for path in ("/v0.1/servers/io.github.someone/shown/versions", "/v0.1/servers/shown/versions/latest"):
        response = client.get(path)
        answers.add((response.status_code, response.content, response["Content-Type"]))
    assert answers == {(404, b'{"error": "Server not found"}', "application/json")}


@pytest.mark.parametrize(
    "query, says",
    [
        ("limit=0", "limit"), ("limit=101", "limit"), ("limit=ten", "limit"), ("limit=-1", "limit"),
        ("cursor=not-a-name", "cursor"), ("cursor=io.github.other/alpha", "cursor"),
        ("updated_since=yesterday", "updated_since"), ("updated_since=2025-01-01T00:00:00", "updated_since"),
        ("updated_since=2025-13-45T00:00:00Z", "updated_since"), ("search=" + "x" * 201, "search"),
    ],
)  # fmt: skip
def test_bad_input_is_a_400_saying_which_parameter(client, query, says):
    listed("alpha")
    status, body = get(client, f"/v0.1/servers?{query}")
    assert status == 400, body
    check_error(body)
    assert body["error"].startswith(says)


def test_only_reads_are_served(client):
    listed("alpha")
    assert client.post("/v0.1/servers", {}).status_code == 405
    assert client.delete(f"/v0.1/servers/{NS}/alpha/versions/latest").status_code == 405


def test_names_follow_the_public_host_or_the_operators_namespace(settings):
    settings.MCP_PUBLIC_URL = "https://Tools.Example.org:8443"
    assert names.server_name("weather") == "org.example.tools/weather"
    settings.MCP_PUBLIC_URL = "http://[::1]:8000"
    assert names.namespace() == "--1"  # an IPv6 literal: the operator should name one
    settings.MCP_REGISTRY_NAMESPACE = "io.acme"
    assert names.server_name("weather") == "io.acme/weather"
    assert names.slug_of("io.acme/weather") == "weather"
    assert names.slug_of("io.other/weather") is None and names.slug_of("io.acme/Weather") is None


def test_the_owner_lists_a_tenant_in_the_admin_the_api_and_the_document(client, alice, tenant_a):
    assert not tenant_a.registry_listed  # off by default
    client.force_login(alice)
    url = reverse("admin:tenants_tenant_change", args=[tenant_a.pk])
    assert 'name="registry_listed"' in client.get(url).content.decode()
    assert client.post(url, tenant_form_data(tenant_a, registry_listed="on")).status_code == 302
    tenant_a.refresh_from_db()
    assert tenant_a.registry_listed
    assert client.get("/t/tenant-a/server.json").status_code == 200

    api = ApiClient(alice)
    assert api.call("GET", f"{API}/tenant-a/").json()["registry_listed"] is True
    changed = api.call("PATCH", f"{API}/tenant-a/", {"registry_listed": False})
    assert changed.status_code == 200 and changed.json()["registry_listed"] is False
    refused = api.call("PATCH", f"{API}/tenant-a/", {"registry_listed": "perhaps"})
    assert refused.status_code == 400 and "registry_listed" in refused.json()["error"]["fields"]
    assert client.get("/t/tenant-a/server.json").status_code == 404

    tenant_a.registry_listed = True
    tenant_a.save()
    document = export_tenant(tenant_a)
    assert document["settings"]["registry_listed"] is True
    copy = Tenant.objects.create(slug="copy", name="Copy")
    import_document(copy, document)
    copy.refresh_from_db()
    assert copy.registry_listed is True
    assert client.get("/t/copy/server.json").json()["name"] == f"{NS}/copy"


def test_an_address_past_its_reads_a_minute_is_told_when_to_come_back(client, settings):
    settings.MCP_REGISTRY_READS_PER_MINUTE = 3
    listed("weather")
    paths = [
        "/v0.1/servers",
        f"/v0.1/servers/{quote(NS + '/weather', safe='')}/versions",
        "/t/weather/server.json",
    ]
    assert [client.get(path).status_code for path in paths] == [200, 200, 200]
    refused = client.get("/v0.1/servers")
    assert refused.status_code == 429 and refused["Content-Type"] == "application/json"
    assert refused.json()["error"].startswith("Too many registry reads from this address; retry in ")
    assert 1 <= int(refused["Retry-After"]) <= 60 and refused["Cache-Control"] == "no-store"
    check_error(refused.json())
    assert client.get("/v0.1/servers", REMOTE_ADDR="192.0.2.7").status_code == 200  # another address
