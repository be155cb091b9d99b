"""The demo's instructions and readme are made from its definitions, so they name every tool it has."""

from __future__ import annotations

from typing import Any

import pytest
from asgiref.sync import sync_to_async

from mcp_app.demo import definitions, texts
from mcp_app.models import Resource
from tenants.models import Tenant
from tests.protocol.support import result_of
from tests.support import make_ctx

EXTRA = {
    "name": "water_plants",
    "title": "Water the plants",
    "description": "A tool the demo does not have.",
    "input_schema": {"type": "object", "properties": {}},
    "output_schema": None,
    "handler": "template",
    "handler_config": {"text": "Watered."},
}


@pytest.fixture
def with_extra_tool(monkeypatch) -> None:
    """The demo as if a tool were added to its definitions."""
    original = definitions.demo_definitions

    def more(logo: bytes) -> dict[str, list[dict[str, Any]]]:
        rows = original(logo)
        rows["tools"].append(dict(EXTRA))
        rows["resources"][0]["text"] = texts.readme(rows)
        return rows

    monkeypatch.setattr(definitions, "demo_definitions", more)


def test_the_instructions_and_the_readme_name_every_demo_tool_and_prompt():
    rows = definitions.demo_definitions(definitions.demo_logo_png())
    text = texts.instructions(rows)
    readme = rows["resources"][0]["text"]
    for tool in rows["tools"]:
        assert f"{tool['name']} ({tool['title']})" in text
        assert f"`{tool['name']}`" in readme
    for prompt in rows["prompts"]:
        assert prompt["name"] in text
        assert f"`{prompt['name']}`" in readme


@pytest.mark.django_db(transaction=True)  # seed_demo_tenant runs in a thread, on its own connection
async def test_a_tool_added_to_the_demo_shows_up_in_what_initialize_tells_clients(with_extra_tool):
    await sync_to_async(definitions.seed_demo_tenant)(reset=True)
    tenant = await Tenant.objects.aget(slug=definitions.DEMO_SLUG)
    result = await result_of(
        make_ctx(tenant, session=None),
        "initialize",
        {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    )
    assert "water_plants (Water the plants)" in result["instructions"]
    assert "ask_user (Ask the user their name)" in result["instructions"]
    readme = await Resource.objects.aget(tenant=tenant, uri="demo://readme")
    assert "`water_plants`" in readme.text
