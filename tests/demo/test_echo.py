"""The demo echo endpoint the seeded fetch_json tool posts to."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from mcp_app.demo import seed


def test_the_echo_endpoint_answers_the_json_it_was_sent():
    response = Client().post("/demo/echo", data=json.dumps({"x": [1, 2]}), content_type="application/json")
    assert response.status_code == 200
    assert response.json()["echo"] == {"x": [1, 2]}


@pytest.mark.parametrize(("body", "status"), [(b"{not json", 400), (b'"' + b"a" * 70_000 + b'"', 413)])
def test_the_echo_endpoint_refuses_what_is_not_a_small_json_body(body, status):
    response = Client().post("/demo/echo", data=body, content_type="application/json")
    assert response.status_code == status
    assert response.json()["error"]


def test_the_echo_endpoint_takes_posts_only():
    assert Client().get("/demo/echo").status_code == 405


def test_fetch_json_is_seeded_to_post_to_this_platforms_own_echo_endpoint(settings):
    settings.MCP_PUBLIC_URL = "https://mcp.example.com"
    [tool] = [t for t in seed.load(seed.DEMO_SLUG)["tools"] if t["name"] == "fetch_json"]
    assert tool["handler_config"]["url"] == "https://mcp.example.com/demo/echo"
