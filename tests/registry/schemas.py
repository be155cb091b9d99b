"""The registry's published schemas (tests/registry/schemas/, their commits in its README) as validators."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft7Validator, Draft202012Validator, FormatChecker
from referencing import Registry, Resource

HERE = Path(__file__).parent / "schemas"
SERVER_SCHEMA = json.loads((HERE / "server.schema.json").read_text())
API = yaml.safe_load((HERE / "registry-api.yaml").read_text())


@cache
def _registry() -> Registry:
    return Registry().with_resource(SERVER_SCHEMA["$id"], Resource.from_contents(SERVER_SCHEMA))


def _api(component: str) -> Draft202012Validator:
    schema = {"$ref": f"#/components/schemas/{component}", **API}
    return Draft202012Validator(schema, registry=_registry(), format_checker=FormatChecker())


def check_server_json(document: Any) -> None:
    """Raise jsonschema's ValidationError unless ``document`` is a valid server.json."""
    Draft7Validator(SERVER_SCHEMA, format_checker=FormatChecker()).validate(document)


def check_server_list(document: Any) -> None:
    _api("ServerList").validate(document)
    for item in document["servers"]:
        check_server_json(item["server"])


def check_server_response(document: Any) -> None:
    _api("ServerResponse").validate(document)
    check_server_json(document["server"])


def check_error(document: Any) -> None:
    _api("Error").validate(document)
    assert set(document) == {"error"} and isinstance(document["error"], str), document
