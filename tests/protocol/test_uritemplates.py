"""RFC 6570 template matching used by resources/read and subscribe (RS-03)."""

from __future__ import annotations

import pytest

from mcp_app.protocol.uritemplates import match, variable_names


@pytest.mark.parametrize(
    ("template", "uri", "expected"),
    [
        ("demo://users/{user_id}/profile", "demo://users/42/profile", {"user_id": "42"}),
        ("demo://users/{user_id}/profile", "demo://users/a%20b/profile", {"user_id": "a b"}),
        ("demo://pair/{a},{b}", "demo://pair/x,y", {"a": "x", "b": "y"}),
        ("file:///{+path}", "file:///etc/app/config.txt", {"path": "etc/app/config.txt"}),
        ("docs://{+path}/raw", "docs://a/b/raw", {"path": "a/b"}),
        ("doc://page{#section}", "doc://page#intro", {"section": "intro"}),
        ("doc://page{#section}", "doc://page", {}),
        ("doc://files{/name}", "doc://files/readme", {"name": "readme"}),
        ("doc://file{.ext}", "doc://file.txt", {"ext": "txt"}),
        ("doc://map{;x,y}", "doc://map;x=1;y=2", {"x": "1", "y": "2"}),
        ("search://q{?term,page}", "search://q?page=2&term=mcp%20spec", {"term": "mcp spec", "page": "2"}),
        ("search://q{?term}{&page}", "search://q?term=a&page=3", {"term": "a", "page": "3"}),
        ("search://q{?term}", "search://q", {}),
        ("static://no-variables", "static://no-variables", {}),
    ],
)
def test_rs03_a_uri_expanded_from_a_template_yields_its_variables(template, uri, expected):
    assert match(template, uri) == expected


@pytest.mark.parametrize(
    ("template", "uri"),
    [
        ("demo://users/{user_id}/profile", "demo://users//profile"),
        ("demo://users/{user_id}/profile", "demo://users/1/2/profile"),
        ("demo://users/{user_id}/profile", "demo://users/1/profile/extra"),
        ("demo://users/{user_id}/profile", "other://users/1/profile"),
        ("demo://users/{user_id}/profile", "demo://users/1/profile?x=1"),
        ("demo://{unclosed", "demo://x"),
        ("file:///{+path}", "file:///" + "a" * 10_000),
    ],
)
def test_rs03_a_uri_that_is_not_an_expansion_does_not_match(template, uri):
    assert match(template, uri) is None


def test_variable_names_lists_path_and_query_variables():
    assert variable_names("demo://{a}/{+b}{?c,d}") == ("a", "b", "c", "d")
