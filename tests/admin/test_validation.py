"""mcp_app/definitions/checks.py and content/fields.py: the checks shared by the models' clean(), the admin and the API."""

from __future__ import annotations

import pytest
from django.core.exceptions import ValidationError

from mcp_app.content import fields
from mcp_app.definitions import checks as v
from mcp_app.handlers import registry
from mcp_app.models import Prompt, ResourceTemplate, Tool


def _schema(name):
    return lambda value: fields.check(name, value)


def _raising(problems):
    def check(*args):
        found = problems(*args)
        if found:
            raise ValidationError(found)

    return check


# The checks as each consumer runs them: a field's schema (content/fields.py), or its whole check.
validate_meta = _schema("meta")
validate_icons = _schema("icons")
validate_annotations = _schema("annotations")
validate_tool_annotations = _schema("tool_annotations")
validate_prompt_messages = _schema("prompt_messages")
validate_resource_uri = _schema("uri")
validate_prompt_arguments = _raising(v.prompt_arguments_problems)
validate_template_completions = _raising(v.template_completions_problems)
validate_handler = registry.validate_config


def refused(fn, *args) -> str:
    with pytest.raises(ValidationError) as info:
        fn(*args)
    return " ".join(info.value.messages)


@pytest.mark.parametrize("key", ["flag", "example.com/flag", "a.b-c.d9/x_y.z-1", "example.com/", "x/1"])
def test_bp12_valid_meta_keys_are_accepted(key):
    validate_meta({key: 1})


@pytest.mark.parametrize(
    "key",
    [
        "modelcontextprotocol.io/x",
        "mcp.dev/x",
        "api.modelcontextprotocol.org/x",
        "tools.mcp.com/x",
        "MCP.dev/x",
    ],
)
def test_bp12_meta_keys_with_reserved_prefixes_are_refused(key):
    assert "reserved for MCP" in refused(validate_meta, {key: 1})


@pytest.mark.parametrize(
    "key", ["", "-x", "x-", "1abc.com/x", "example..com/x", "exa mple/x", "a/b/c", "ex_ample.com/x"]
)
def test_bp12_malformed_meta_keys_are_refused(key):
    assert "not valid" in refused(validate_meta, {key: 1})


def test_meta_must_be_an_object():
    assert "JSON object" in refused(validate_meta, [])


def test_ambiguous_17_schemas_default_to_draft_2020_12_and_honour_their_schema_keyword():
    # prefixItems must be non-empty in 2020-12 and is an unknown (ignored) keyword in draft-07.
    assert "prefixItems" in refused(v.validate_object_schema, {"type": "object", "prefixItems": []})
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "prefixItems": []}
    v.validate_object_schema(draft7)
    assert "Unsupported $schema" in refused(
        v.validate_object_schema, {"$schema": "https://x.test/s", "type": "object"}
    )
    assert "not a valid JSON Schema" in refused(v.validate_object_schema, {"type": "object", "required": "x"})
    assert '"type": "object"' in refused(v.validate_object_schema, {"properties": {}})
    assert "must be a JSON object" in refused(v.validate_object_schema, ["type"])


def test_tl03_tool_annotations_allow_only_the_five_known_keys_with_the_right_types():
    validate_tool_annotations(
        {
            "title": "T",
            "readOnlyHint": True,
            "destructiveHint": False,
            "idempotentHint": True,
            "openWorldHint": False,
        }
    )
    assert "must be a string" in refused(validate_tool_annotations, {"title": 1})
    assert "true or false" in refused(validate_tool_annotations, {"destructiveHint": 0})
    assert "Unknown annotation" in refused(validate_tool_annotations, {"dangerous": True})


def test_icons_need_an_https_or_data_src_and_well_formed_optional_keys():
    validate_icons(
        [
            {
                "src": "https://example.com/i.png",
                "mimeType": "image/png",
                "sizes": ["48x48", "any"],
                "theme": "dark",
            },
            {"src": "data:image/png;base64,iVBORw0KGgo="},
        ]
    )
    assert "https: URL or a data: URI" in refused(validate_icons, [{"src": "javascript:alert(1)"}])
    assert "'sizes'" in refused(validate_icons, [{"src": "https://e.com/i", "sizes": "48x48"}])
    assert "'theme'" in refused(validate_icons, [{"src": "https://e.com/i", "theme": "blue"}])
    assert "unknown keys" in refused(validate_icons, [{"src": "https://e.com/i", "alt": "x"}])
    assert "list" in refused(validate_icons, {"src": "https://e.com/i"})


def test_cb04_annotations_check_audience_priority_and_last_modified():
    validate_annotations({"audience": ["user"], "priority": 0.5, "lastModified": "2025-01-12T15:00:58Z"})
    assert "audience" in refused(validate_annotations, {"audience": ["robot"]})
    assert "priority" in refused(validate_annotations, {"priority": 1.5})
    assert "priority" in refused(validate_annotations, {"priority": True})
    assert "lastModified" in refused(validate_annotations, {"lastModified": "yesterday"})


def test_prompt_arguments_are_checked_including_completions():
    validate_prompt_arguments(
        [
            {"name": "code", "title": "Code", "description": "d", "required": True},
            {"name": "language", "completions": ["python", "go"]},
            {
                "name": "tool",
                "completions": {"argument": "language", "values": {"python": ["ruff"]}, "default": []},
            },
        ]
    )
    assert "twice" in refused(validate_prompt_arguments, [{"name": "a"}, {"name": "a"}])
    assert "'required'" in refused(validate_prompt_arguments, [{"name": "a", "required": "yes"}])
    assert "'name'" in refused(validate_prompt_arguments, [{"title": "no name"}])
    assert "list of strings" in refused(validate_prompt_arguments, [{"name": "a", "completions": [1]}])
    assert "another of" in refused(
        validate_prompt_arguments, [{"name": "a", "completions": {"argument": "zzz", "values": {}}}]
    )


@pytest.mark.parametrize(
    "content",
    [
        {"type": "text", "text": "Hello {{ name }}"},
        {"type": "image", "resource": "demo://logo.png"},
        {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
        {"type": "resource", "uri": "demo://readme"},
        {"type": "resource_link", "uri": "https://example.com/doc", "name": "doc"},
    ],
)
def test_pr02_each_content_spec_type_is_accepted_in_prompt_messages(content):
    validate_prompt_messages([{"role": "user", "content": content}])


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([], "non-empty"),
        ([{"role": "system", "content": {"type": "text", "text": "x"}}], "'role'"),
        ([{"role": "user", "content": {"type": "video"}}], "'type'"),
        ([{"role": "user", "content": {"type": "text", "text": "{% load x %}"}}], "not allowed"),
        (
            [{"role": "user", "content": {"type": "image", "data": "not base64!", "mimeType": "image/png"}}],
            "base64",
        ),
        ([{"role": "user", "content": {"type": "resource", "uri": "relative"}}], "absolute URI"),
        ([{"role": "user", "content": {"type": "text", "text": "x"}, "extra": 1}], "unknown keys"),
    ],
)
def test_pr06_malformed_prompt_messages_are_refused(messages, message):
    assert message in refused(validate_prompt_messages, messages)


@pytest.mark.parametrize("uri", ["demo://readme", "https://example.com/a", "file:///tmp/x", "urn:isbn:123"])
def test_rs08_absolute_resource_uris_are_accepted(uri):
    validate_resource_uri(uri)


@pytest.mark.parametrize("uri", ["readme", "/abs/path", "1x://a", "demo:", "a://b c"])
def test_rs09_relative_or_malformed_resource_uris_are_refused(uri):
    refused(validate_resource_uri, uri)


@pytest.mark.parametrize(
    "template", ["demo://users/{user_id}/profile", "https://e.com/{+path}{?q,lang}", "x://{a.b}/{c:3}/{d*}"]
)
def test_rs03_rfc6570_templates_are_accepted(template):
    v.validate_uri_template(template)


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("demo://users/{user_id", "Unclosed"),
        ("demo://users/user_id}", "Unmatched"),
        ("demo://{a{b}}", "Nested"),
        ("demo://{a b}", "not a valid RFC 6570"),
        ("demo://{!x}", "not a valid RFC 6570"),
        ("users/{id}", "URI scheme"),
        ("demo://static", "at least one"),
        ("demo://a b/{id}", "spaces"),
    ],
)
def test_rs03_invalid_uri_templates_are_refused(template, message):
    assert message in refused(v.validate_uri_template, template)


def test_template_completions_only_for_variables_the_template_has():
    validate_template_completions("demo://u/{id}", {"id": ["1", "2"]})
    assert "no such variable" in refused(validate_template_completions, "demo://u/{id}", {"uid": ["1"]})
    assert "list of strings" in refused(validate_template_completions, "demo://u/{id}", {"id": "1"})


@pytest.mark.django_db
def test_model_clean_reports_every_invalid_field_at_once(tenant_a):
    tool = Tool(
        tenant=tenant_a,
        name="t",
        input_schema={"type": "array"},
        annotations={"x": 1},
        meta={"mcp.dev/a": 1},
        handler="template",
        handler_config={"nope": 1},
    )
    with pytest.raises(ValidationError) as info:
        tool.full_clean()
    assert set(info.value.message_dict) >= {"input_schema", "annotations", "meta", "handler_config"}


@pytest.mark.django_db
def test_resource_template_clean_checks_the_handler_kind_and_completions(tenant_a):
    template = ResourceTemplate(
        tenant=tenant_a,
        uri_template="a://{id}",
        name="t",
        handler="http",
        handler_config={},
        completions={"x": []},
    )
    with pytest.raises(ValidationError) as info:
        template.full_clean()
    assert set(info.value.message_dict) >= {"handler_config", "completions"}


@pytest.mark.django_db
def test_prompt_clean_validates_arguments_and_messages(tenant_a):
    prompt = Prompt(tenant=tenant_a, name="p", arguments=[{"name": 1}], messages=[{"role": "bot"}])
    with pytest.raises(ValidationError) as info:
        prompt.full_clean()
    assert set(info.value.message_dict) >= {"arguments", "messages"}


@pytest.mark.parametrize("kind", ["resource", "resource_link"])
def test_a_prompt_may_embed_a_resource_whose_uri_is_a_template_over_its_arguments(kind):
    validate_prompt_messages([{"role": "user", "content": {"type": kind, "uri": "{{ resourceUri }}"}}])


def test_a_templated_uri_that_does_not_compile_is_refused_with_its_syntax_error():
    messages = [{"role": "user", "content": {"type": "resource", "uri": "{% if resourceUri %}demo://a"}}]
    assert "Template syntax error" in refused(validate_prompt_messages, messages)


def test_tool_content_and_prompt_messages_share_one_content_validator():
    content = {"type": "resource", "uri": "{{ resourceUri }}", "annotations": {"priority": 7}}
    prompt_error = refused(validate_prompt_messages, [{"role": "user", "content": content}])
    tool_error = refused(validate_handler, "template", {"content": [content]})
    assert "priority" in prompt_error and "priority" in tool_error


@pytest.mark.parametrize("kind", ["resource", "resource_link"])
def test_tool_content_may_refer_to_a_resource_whose_uri_is_a_template_over_its_arguments(kind):
    validate_handler("template", {"content": [{"type": kind, "uri": "{{ resourceUri }}"}]})


@pytest.mark.parametrize("kind", ["resource", "resource_link"])
def test_a_plain_uri_that_is_not_absolute_is_still_refused_in_prompts_and_tools(kind):
    content = {"type": kind, "uri": "readme"}
    assert "not an absolute URI" in refused(validate_prompt_messages, [{"role": "user", "content": content}])
    assert "not an absolute URI" in refused(validate_handler, "template", {"content": [content]})


def _header_schema(**properties):
    return {"type": "object", "properties": properties}


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (_header_schema(a={"type": "string", "x-mcp-header": ""}), ["#/properties/a", "empty"]),
        (_header_schema(a={"type": "string", "x-mcp-header": "A\r\nB"}), ["control characters"]),
        (_header_schema(a={"type": "string", "x-mcp-header": "My Region"}), ["'My Region'", "token"]),
        (
            _header_schema(
                a={"type": "string", "x-mcp-header": "Region"}, b={"type": "string", "x-mcp-header": "region"}
            ),
            ["'region'", "#/properties/b", "repeats", "#/properties/a"],
        ),
        (_header_schema(a={"type": "number", "x-mcp-header": "A"}), ["#/properties/a", "'number'"]),
        (
            _header_schema(tags={"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}}),
            ["#/properties/tags/items", "statically reachable"],
        ),
        (
            {"type": "object", "oneOf": [_header_schema(a={"type": "string", "x-mcp-header": "A"})]},
            ["#/oneOf/0/properties/a", "statically reachable"],
        ),
        (
            {"type": "object", "$defs": {"r": {"type": "string", "x-mcp-header": "R"}}},
            ["#/$defs/r", "statically reachable"],
        ),
        (
            {"type": "object", "additionalProperties": {"type": "string", "x-mcp-header": "A"}},
            ["#/additionalProperties", "statically reachable"],
        ),
        ({"type": "object", "x-mcp-header": "A"}, ["schema root"]),
    ],
)
def test_each_invalid_header_annotation_is_refused_in_the_admin_with_where_and_why(schema, words):
    message = refused(v.validate_x_mcp_headers, schema)
    assert message.startswith("Input schema: x-mcp-header")
    for word in words:
        assert word in message


def test_a_header_annotation_under_items_is_refused_in_the_admin():
    schema = _header_schema(tags={"type": "array", "items": {"type": "string", "x-mcp-header": "Tag"}})
    v.validate_object_schema(schema)  # a valid JSON Schema: only the header rule refuses it
    assert "statically reachable" in refused(v.validate_x_mcp_headers, schema)


def test_valid_header_annotations_are_accepted_in_the_admin():
    schema = _header_schema(
        region={"type": "string", "x-mcp-header": "Region"},
        n={"type": "integer", "x-mcp-header": "N"},
        filter={"type": "object", "properties": {"dry": {"type": "boolean", "x-mcp-header": "Dry-Run"}}},
    )
    v.validate_object_schema(schema, "Input schema")
    v.validate_x_mcp_headers(schema)


@pytest.mark.django_db
def test_a_tool_with_an_invalid_header_annotation_fails_clean_on_its_input_schema(tenant_a):
    tool = Tool(
        tenant=tenant_a,
        name="t",
        input_schema=_header_schema(a={"type": "number", "x-mcp-header": "A"}),
        handler="template",
        handler_config={"nope": 1},
    )
    with pytest.raises(ValidationError) as info:
        tool.full_clean()
    assert any("x-mcp-header 'A'" in m for m in info.value.message_dict["input_schema"])


# AMB-117: a reference must stay inside the schema; outside ones are refused at save with where and what.
def _ref(ref: str, **extra) -> dict:
    return {"type": "object", "properties": {"a": {"$ref": ref}}, **extra}


@pytest.mark.parametrize(
    "schema",
    [
        _ref("#/$defs/a", **{"$defs": {"a": {"type": "string"}}}),
        _ref("#"),
        _ref("#name", **{"$defs": {"a": {"$anchor": "name", "type": "string"}}}),
        _ref("https://example.com/root#/$defs/a", **{"$id": "https://example.com/root", "$defs": {"a": {}}}),
        _ref("item", **{"$id": "https://example.com/root", "$defs": {"a": {"$id": "item"}}}),
        {
            "$schema": "http://json-schema.org/draft-07/schema#",
            **_ref("#/definitions/a", definitions={"a": {"type": "string"}}),
        },
        # A "$ref" that is a property's name, or instance data, is no reference.
        {
            "type": "object",
            "properties": {"$ref": {"type": "string"}},
            "default": {"$ref": "https://x.test/"},
        },
    ],
)
def test_a_schema_referring_within_itself_is_accepted(schema):
    v.validate_object_schema(schema, "Input schema")


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (_ref("https://example.com/a.json"), ["'https://example.com/a.json'", "/properties/a"]),
        (_ref("http://169.254.169.254/latest/meta-data"), ["'http://169.254.169.254/latest/meta-data'"]),
        (_ref("defs.json#/a"), ["'defs.json#/a'"]),
        (_ref("#/$defs/missing"), ["'#/$defs/missing'"]),
        ({"type": "object", "$defs": {"d": {"$dynamicRef": "file:///etc/passwd"}}}, ["/$defs/d"]),
        ({"type": "object", "prefixItems": [{"$ref": "../x.json"}]}, ["'../x.json'", "/prefixItems/0"]),
    ],
)
def test_a_schema_referring_outside_itself_is_refused_naming_the_reference_and_where(schema, words):
    message = refused(v.validate_object_schema, schema, "Output schema")
    assert message.startswith("Output schema: the reference")
    assert "nothing is fetched" in message
    for word in words:
        assert word in message


def test_a_tool_with_an_outside_reference_is_refused_by_full_clean_on_either_schema(tenant_a):
    tool = Tool(tenant=tenant_a, name="t", handler="template", handler_config={"text": "x"})
    tool.input_schema = _ref("https://example.com/a.json")
    tool.output_schema = _ref("other.json")
    with pytest.raises(ValidationError) as info:
        tool.full_clean()
    assert set(info.value.message_dict) == {"input_schema", "output_schema"}


def test_a_definition_json_field_nested_past_its_share_of_the_limit_is_refused(tenant_a):
    deep = {"type": "object", "default": [[[]]]}
    for _ in range(53):
        deep["default"] = [deep["default"]]
    tool = Tool(
        tenant=tenant_a, name="t", handler="template", handler_config={"text": "x"}, input_schema=deep
    )
    with pytest.raises(ValidationError) as info:
        tool.full_clean()
    assert info.value.message_dict["input_schema"] == [
        "Nested deeper than 56 levels (MCP_MAX_JSON_DEPTH less 8)."
    ]
    deep["default"] = deep["default"][0]  # 56 deep now
    tool.full_clean()
