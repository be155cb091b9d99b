"""OpenAPI → http tools: the OAI's Petstore descriptions imported, then called through the dispatcher
against a local Petstore that checks the method, path, query and body it receives."""

from __future__ import annotations

import json
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from django.db import connections

from mcp_app.handlers.secrets import decrypt_secrets
from mcp_app.models import Tool
from mcp_app.portability.document import DocumentError
from mcp_app.portability.openapi import OpenApiError, parse, tool_name
from mcp_app.portability.openapi_tools import Settings, fetch, import_operations, read
from mcp_app.protocol.dispatch import dispatch
from tests.portability.support import FIXTURES, TOKEN, running_petstore
from tests.support import make_ctx

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def petstore(settings):
    settings.MCP_HTTP_HANDLER_ALLOW = ["127.0.0.1"]  # the stub listens on loopback, which the guard refuses
    with running_petstore() as store:
        yield store


@pytest.fixture(autouse=True)
async def _close_worker_connections() -> Any:
    yield
    await sync_to_async(connections.close_all)()


def description(name: str, source_url: str = ""):
    return read((FIXTURES / name).read_text(), source_url)


def import_all(tenant, name: str, base_url: str, **settings: Any):
    spec = description(name)
    keys = [op.key for op in spec.operations if op.supported]
    return import_operations(
        tenant,
        spec,
        keys,
        Settings(base_url=base_url, auth_header="Authorization", auth_value=TOKEN, **settings),
    )


async def call(tenant, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    message = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }
    response = await dispatch(make_ctx(tenant, "2025-06-18"), message)
    assert "result" in response, response
    return response["result"]


def test_the_petstore_operations_become_tools_with_schemas_from_parameters_body_and_response():
    spec = description("petstore.yaml")
    assert spec.servers == ["http://petstore.swagger.io/v1"]
    ops = spec.by_key()
    assert sorted(ops) == ["GET /pets", "GET /pets/{petId}", "POST /pets"]
    show = ops["GET /pets/{petId}"]
    assert (show.name, show.title) == ("showPetById", "Info for a specific pet")
    assert show.input_schema == {
        "type": "object",
        "properties": {"petId": {"type": "string", "description": "The id of the pet to retrieve"}},
        "required": ["petId"],
    }
    assert show.output_schema == {
        "type": "object",
        "required": ["id", "name"],
        "properties": {
            "id": {"type": "integer", "format": "int64"},
            "name": {"type": "string"},
            "tag": {"type": "string"},
        },
    }
    assert show.parameters == {"petId": {"in": "path"}}
    # The body's properties are arguments beside the parameters; a paged array answer has no output schema.
    assert ops["POST /pets"].input_schema["required"] == ["id", "name"]
    assert ops["GET /pets"].output_schema is None
    assert ops["GET /pets"].input_schema["properties"]["limit"]["maximum"] == 100


async def test_petstore_tools_are_called_end_to_end_against_a_stub_that_checks_each_request(
    tenant_a, petstore
):
    outcome = await sync_to_async(import_all)(tenant_a, "petstore.yaml", f"{petstore.base}/v1")
    assert sorted(outcome.created) == ["createPets", "listPets", "showPetById"]

    created = await call(tenant_a, "createPets", {"id": 7, "name": "Tom", "tag": "cat"})
    shown = await call(tenant_a, "showPetById", {"petId": "7"})
    listed = await call(tenant_a, "listPets", {"limit": 1})

    assert not created.get("isError") and not shown.get("isError") and not listed.get("isError")
    assert shown["structuredContent"] == {"id": 7, "name": "Tom", "tag": "cat"}
    assert json.loads(listed["content"][0]["text"]) == [{"id": 1, "name": "Rex", "tag": "dog"}]
    assert petstore.requests == [
        {"method": "POST", "path": "/v1/pets", "query": {}, "body": {"id": 7, "name": "Tom", "tag": "cat"}},
        {"method": "GET", "path": "/v1/pets/7", "query": {}, "body": None},
        {"method": "GET", "path": "/v1/pets", "query": {"limit": ["1"]}, "body": None},
    ]


async def test_the_expanded_petstore_is_called_end_to_end_with_arrays_bodies_and_deletes(tenant_a, petstore):
    await sync_to_async(import_all)(tenant_a, "petstore-expanded.yaml", f"{petstore.base}/v2", timeout=5)

    added = await call(tenant_a, "addPet", {"name": "Kit", "tag": "cat"})
    found = await call(tenant_a, "findPets", {"tags": ["cat", "bird"], "limit": 5})
    one = await call(tenant_a, "find_pet_by_id", {"id": added["structuredContent"]["id"]})
    gone = await call(tenant_a, "deletePet", {"id": 2})
    missing = await call(tenant_a, "find_pet_by_id", {"id": 2})

    assert added["structuredContent"] == {"id": 2, "name": "Kit", "tag": "cat"}
    assert json.loads(found["content"][0]["text"]) == [{"id": 2, "name": "Kit", "tag": "cat"}]
    assert one["structuredContent"] == added["structuredContent"] and not gone.get("isError")
    assert missing["isError"] is True and "HTTP 404" in missing["content"][0]["text"]
    assert [(r["method"], r["path"], r["query"], r["body"]) for r in petstore.requests] == [
        ("POST", "/v2/pets", {}, {"name": "Kit", "tag": "cat"}),
        ("GET", "/v2/pets", {"tags": ["cat", "bird"], "limit": ["5"]}, None),
        ("GET", "/v2/pets/2", {}, None),
        ("DELETE", "/v2/pets/2", {}, None),
        ("GET", "/v2/pets/2", {}, None),
    ]


async def test_a_tool_without_the_auth_header_is_refused_by_the_stub(tenant_a, petstore):
    spec = description("petstore.yaml")
    await sync_to_async(import_operations)(
        tenant_a, spec, ["GET /pets"], Settings(base_url=f"{petstore.base}/v1")
    )
    result = await call(tenant_a, "listPets", {})
    assert result["isError"] is True and "HTTP 401" in result["content"][0]["text"]


def test_the_auth_header_is_a_secret_and_the_timeout_is_set_once_for_all(tenant_a):
    import_all(tenant_a, "petstore-expanded.yaml", "https://pets.example.com/v2", timeout=7.5)
    tools = Tool.objects.filter(tenant=tenant_a)
    assert tools.count() == 4
    for tool in tools:
        assert decrypt_secrets(tool.handler_secrets) == {"Authorization": TOKEN}
        assert TOKEN not in json.dumps(tool.handler_config)
        assert (tool.handler_config["timeout"], tool.timeout_seconds) == (7.5, 8)
        assert tool.handler_config["url"].startswith("https://pets.example.com/v2/pets")
    delete = tools.get(name="deletePet")
    assert delete.handler_config == {
        "url": "https://pets.example.com/v2/pets/{id}",
        "method": "DELETE",
        "timeout": 7.5,
        "parameters": {"id": {"in": "path"}},
    }
    assert delete.annotations == {"openWorldHint": True, "destructiveHint": True}


def test_importing_the_same_operations_again_changes_nothing_and_keeps_the_tenants_own_choices(tenant_a):
    import_all(tenant_a, "petstore.yaml", "https://pets.example.com/v1")
    Tool.objects.filter(tenant=tenant_a, name="listPets").update(enabled=False, approval="once")
    count = Tool.history.count()
    again = import_all(tenant_a, "petstore.yaml", "https://pets.example.com/v1")
    assert sorted(again.unchanged) == ["createPets", "listPets", "showPetById"] and not again.updated
    assert Tool.history.count() == count
    moved = import_all(tenant_a, "petstore.yaml", "https://pets.example.org/v1")
    assert sorted(moved.updated) == ["createPets", "listPets", "showPetById"]
    listed = Tool.objects.get(tenant=tenant_a, name="listPets")
    assert (listed.enabled, listed.approval) == (False, "once")


def test_an_operation_the_http_kind_cannot_send_is_listed_with_the_reason_and_refused(tenant_a):
    spec = description("uspto.yaml")
    assert spec.servers == ["https://developer.uspto.gov/ds-api"]
    search = spec.by_key()["POST /{dataset}/{version}/records"]
    assert not search.supported and "application/x-www-form-urlencoded" in search.reason
    with pytest.raises(DocumentError) as caught:
        import_operations(tenant_a, spec, [search.key, "GET /"], Settings(base_url=spec.servers[0]))
    assert caught.value.problems == [(search.key, search.reason)]
    assert not Tool.objects.filter(tenant=tenant_a).exists()
    fields = spec.by_key()["GET /{dataset}/{version}/fields"]
    assert fields.name == "list-searchable-fields" and fields.parameters == {
        "dataset": {"in": "path"},
        "version": {"in": "path"},
    }


def test_a_relative_server_url_is_resolved_against_the_documents_own_url():
    spec = parse(
        {"openapi": "3.1.0", "servers": [{"url": "/api/v3"}], "paths": {}},
        "https://docs.example.com/openapi.json",
    )
    assert spec.servers == ["https://docs.example.com/api/v3"]


def test_names_are_made_to_fit_the_tool_name_rule_and_never_collide():
    taken: set[str] = set()
    assert [tool_name(raw, taken) for raw in ("find pet by id", "find/pet/by/id", "x" * 80, "x" * 80, "é")] == [
        "find_pet_by_id", "find_pet_by_id_2", "x" * 64, "x" * 62 + "_2", "operation",
    ]  # fmt: skip


def test_nested_and_recursive_refs_are_inlined_and_the_recursion_is_cut():
    document = {
        "openapi": "3.0.3",
        "paths": {
            "/nodes": {
                "post": {
                    "operationId": "addNode",
                    "requestBody": {"$ref": "#/components/requestBodies/NodeBody"},
                    "responses": {"200": {"$ref": "#/components/responses/NodeReply"}},
                }
            }
        },
        "components": {
            "requestBodies": {
                "NodeBody": {
                    "required": True,
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                }
            },
            "responses": {
                "NodeReply": {
                    "description": "ok",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Node"}}},
                }
            },
            "schemas": {
                "Node": {
                    "type": "object",
                    "properties": {
                        "label": {"$ref": "#/components/schemas/Label"},
                        "children": {"type": "array", "items": {"$ref": "#/components/schemas/Node"}},
                        "weight": {
                            "type": "number",
                            "minimum": 0,
                            "exclusiveMinimum": True,
                            "nullable": True,
                        },
                    },
                },
                "Label": {"type": "string", "example": "a"},
            },
        },
    }
    [op] = parse(document).operations
    properties = op.input_schema["properties"]
    assert properties["label"] == {"type": "string"}
    assert properties["children"] == {
        "type": "array",
        "items": {"description": "A Node (recursive: not expanded further)."},
    }
    assert properties["weight"] == {"type": ["number", "null"], "exclusiveMinimum": 0}
    assert op.output_schema["properties"]["children"]["items"]["description"].startswith("A Node (recursive")


def test_a_ref_is_a_json_pointer_with_its_escapes_and_one_to_nothing_or_outside_says_so():
    def reply(schema_ref: str) -> dict:
        return {
            "200": {"description": "ok", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}
        }

    document = {
        "openapi": "3.1.0",
        "paths": {
            "/pets/{id}": {
                "parameters": [{"name": "id", "in": "path", "schema": {"type": "integer", "minimum": 1}}],
                "get": {
                    "operationId": "getPet",
                    # The path's own parameter, by a pointer with ~1 for "/" and %7B %7D for the braces.
                    "parameters": [{"$ref": "#/paths/~1pets~1%7Bid%7D/parameters/0"}],
                    "responses": reply("#/components/schemas/Pet"),
                },
            },
            "/a": {"get": {"operationId": "nowhere", "responses": reply("#/components/schemas/Nope")}},
            "/b": {"get": {"operationId": "outside", "responses": reply("https://example.com/pet.json")}},
        },
        "components": {"schemas": {"Pet": {"type": "object", "properties": {"name": {"type": "string"}}}}},
    }
    ops = parse(document).by_key()
    pet = ops["GET /pets/{id}"]
    assert pet.supported and pet.input_schema["properties"]["id"] == {"type": "integer", "minimum": 1}
    assert pet.output_schema == {"type": "object", "properties": {"name": {"type": "string"}}}
    assert (
        ops["GET /a"].reason == "The reference '#/components/schemas/Nope' points to nothing in the document."
    )
    assert "points outside the document" in ops["GET /b"].reason


def test_a_ref_that_expands_without_bound_is_refused_with_a_reason():
    # Each level refers to the one below twice: 2**30 nodes if nothing stopped it.
    schemas = {
        f"L{i}": {
            "type": "object",
            "properties": {
                "a": {"$ref": f"#/components/schemas/L{i + 1}"},
                "b": {"$ref": f"#/components/schemas/L{i + 1}"},
            },
        }
        for i in range(30)
    }
    schemas["L30"] = {"type": "string"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    document = {
        "openapi": "3.1.0",
        "paths": {"/x": {"post": {"requestBody": body}}},
        "components": {"schemas": schemas},
    }
    [op] = parse(document).operations
    assert not op.supported and "too large" in op.reason


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"swagger": "2.0"}, "Swagger 2.0"),
        ({"openapi": "4.0.0", "paths": {}}, "Only OpenAPI 3.0 and 3.1"),
        ({"openapi": "3.0.0"}, "no 'paths'"),
        (["not", "a", "document"], "not an OpenAPI document"),
    ],
)
def test_a_document_that_is_not_openapi_3_is_refused_saying_why(document, message):
    with pytest.raises(OpenApiError, match=message):
        parse(document)


def test_a_document_is_fetched_by_url_through_the_ssrf_guard(petstore, settings):
    raw, url = fetch(f"{petstore.base}/openapi.yaml")
    assert sorted(read(raw, url).by_key()) == [
        "DELETE /pets/{id}",
        "GET /pets",
        "GET /pets/{id}",
        "POST /pets",
    ]
    settings.MCP_HTTP_HANDLER_ALLOW = []
    with pytest.raises(OpenApiError, match="loopback"):
        fetch(f"{petstore.base}/openapi.yaml")


def test_bad_settings_are_each_reported_and_nothing_is_created(tenant_a):
    spec = description("petstore.yaml")
    settings = Settings(base_url="ftp://pets", timeout=0, auth_header="Bad Header", auth_value="x\ny")
    with pytest.raises(DocumentError) as caught:
        import_operations(tenant_a, spec, ["GET /pets", "GET /nowhere"], settings)
    assert [p for p, _m in caught.value.problems] == [
        "base_url",
        "timeout",
        "auth_header",
        "auth_value",
        "GET /nowhere",
    ]
    assert not Tool.objects.filter(tenant=tenant_a).exists()
