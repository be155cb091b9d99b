"""The `llm` kind: a tool that asks the client's model, or the tenant's own endpoint (handlers/llm.py).

The client's model is a fake `ctx.ask` here (the eras' transport is tests/protocol/test_asking.py's);
the endpoint is a chat completions stub on 127.0.0.1, admitted through MCP_HTTP_HANDLER_ALLOW.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

import pytest
from django.core.exceptions import ValidationError

from mcp_app.handlers import registry
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Tool
from tests.handlers.support import QuietServer, make_tool
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx

PROMPT_CONFIG = {
    "prompt": "Summarise: {{ text }}",
    "system": "You write in {{ language }}.",
    "max_tokens": 200,
}
SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}


def refused(config: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as caught:
        registry.validate_config("llm", config)
    return " ".join(caught.value.messages)


# --- configuration --------------------------------------------------------------------------------


def test_a_prompt_with_every_sampling_option_is_accepted():
    registry.validate_config(
        "llm",
        {
            **PROMPT_CONFIG,
            "temperature": 0.2,
            "model_preferences": {"hints": [{"name": "sonnet"}], "costPriority": 0.3, "speedPriority": 1},
        },
    )


def test_a_prompt_sent_to_an_endpoint_is_accepted():
    registry.validate_config(
        "llm",
        {
            "prompt": "{{ q }}",
            "endpoint": {"url": "https://api.example.com/v1/chat/completions", "model": "m"},
        },
    )


@pytest.mark.parametrize(
    ("config", "says"),
    [
        ({"system": "x"}, "needs 'prompt'"),
        ({"prompt": "  "}, "'prompt' must be a non-empty template"),
        ({"prompt": "{% include 'x' %}"}, "not allowed"),
        ({"prompt": "x", "system": 3}, "'system' must be a non-empty template"),
        ({"prompt": "x", "max_tokens": 0}, "'max_tokens' must be a whole number from 1 to 64000"),
        ({"prompt": "x", "max_tokens": 1_000_000}, "'max_tokens' must be"),
        ({"prompt": "x", "max_tokens": 10.5}, "'max_tokens' must be"),
        ({"prompt": "x", "temperature": 3}, "'temperature' must be a number from 0 to 2"),
        ({"prompt": "x", "temperature": True}, "'temperature' must be"),
        ({"prompt": "x", "model_preferences": ["sonnet"]}, "'model_preferences' must be an object"),
        ({"prompt": "x", "model_preferences": {"hints": ["sonnet"]}}, "'hints' must be a list of"),
        ({"prompt": "x", "model_preferences": {"hints": [{"name": ""}]}}, "'hints' must be a list of"),
        (
            {"prompt": "x", "model_preferences": {"costPriority": 1.5}},
            "'costPriority' of 'model_preferences' must be a number from 0 to 1",
        ),
        ({"prompt": "x", "model_preferences": {"intelligencePriority": -0.1}}, "'intelligencePriority' of 'model_preferences' must"),
        ({"prompt": "x", "model_preferences": {"model": "gpt"}}, "may not have model"),
        ({"prompt": "x", "endpoint": "https://api.example.com/"}, "'endpoint' must be an object"),
        ({"prompt": "x", "endpoint": {"model": "m"}}, "'endpoint' needs 'url'"),
        ({"prompt": "x", "endpoint": {"url": "ftp://example.com/", "model": "m"}}, "must use http or https"),
        (
            {"prompt": "x", "endpoint": {"url": "https://k@example.com/", "model": "m"}},
            "must not contain credentials",
        ),
        ({"prompt": "x", "endpoint": {"url": "https://example.com/"}}, "'endpoint' needs 'model'"),
        (
            {"prompt": "x", "endpoint": {"url": "https://example.com/", "model": "m", "timeout": 0}},
            "'timeout'",
        ),
        (
            {"prompt": "x", "endpoint": {"url": "https://example.com/", "model": "m", "key": "sk"}},
            "Unknown 'endpoint'",
        ),
        (
            {
                "prompt": "x",
                "endpoint": {"url": "https://example.com/", "model": "m"},
                "model_preferences": {"speedPriority": 1},
            },
            "Remove one of them",
        ),
        ({"prompt": "x", "tools": []}, "Unknown llm handler keys: tools"),
    ],
)
def test_a_configuration_that_cannot_ask_a_model_is_refused_with_the_reason(config, says):
    assert says in refused(config)


# --- the client's model (sampling) -----------------------------------------------------------------


class FakeModel:
    """Stands in for ctx.ask: records each question and answers with `answer` (a CreateMessageResult)."""

    def __init__(self, answer: dict[str, Any] | None = None) -> None:
        self.asked: list[dict[str, Any]] = []
        self.answer = answer or {
            "role": "assistant",
            "content": {"type": "text", "text": "Short."},
            "model": "m",
        }

    async def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        self.asked.append(request)
        return self.answer


def says(text: str, **fields: Any) -> dict[str, Any]:
    return {"role": "assistant", "content": {"type": "text", "text": text}, "model": "fake-1", **fields}


async def run(tenant: Any, model: FakeModel, config: dict[str, Any], arguments: dict[str, Any], **tool: Any):
    ctx = make_ctx(tenant, ask=model)
    return await registry.run_inline(ctx, make_tool("llm", config, **tool), arguments)


async def test_the_client_is_asked_the_filled_prompt_system_prompt_and_limits_and_its_text_is_returned(
    tenant_a,
):
    model = FakeModel(says("A cat sat."))
    config = {
        **PROMPT_CONFIG,
        "temperature": 0.5,
        "model_preferences": {"hints": [{"name": "haiku"}], "speedPriority": 0.9},
    }
    result = await run(tenant_a, model, config, {"text": "The cat sat on the mat.", "language": "English"})
    assert model.asked == [
        {
            "method": "sampling/createMessage",
            "params": {
                "messages": [
                    {
                        "role": "user",
                        "content": {"type": "text", "text": "Summarise: The cat sat on the mat."},
                    }
                ],
                "maxTokens": 200,
                "systemPrompt": "You write in English.",
                "temperature": 0.5,
                "modelPreferences": {"hints": [{"name": "haiku"}], "speedPriority": 0.9},
            },
        }
    ]
    assert result == {"content": [{"type": "text", "text": "A cat sat."}]}


async def test_without_options_the_client_is_asked_with_the_default_token_limit_and_nothing_else(tenant_a):
    model = FakeModel()
    await run(tenant_a, model, {"prompt": "Hi {{ name }}"}, {"name": "Ada"})
    assert model.asked[0]["params"] == {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Hi Ada"}}],
        "maxTokens": 1000,
    }


async def test_an_answer_given_as_a_list_of_blocks_returns_its_text(tenant_a):
    answer = {
        "role": "assistant",
        "content": [{"type": "text", "text": "one"}, {"type": "text", "text": "two"}],
    }
    result = await run(tenant_a, FakeModel({**answer, "model": "m"}), {"prompt": "x"}, {})
    assert result == {"content": [{"type": "text", "text": "one\ntwo"}]}


async def test_an_answer_that_is_not_text_is_an_error_result_naming_what_came(tenant_a):
    image = {
        "role": "assistant",
        "content": {"type": "image", "data": "AA==", "mimeType": "image/png"},
        "model": "m",
    }
    result = await run(tenant_a, FakeModel(image), {"prompt": "x"}, {})
    assert result == {
        "content": [{"type": "text", "text": "The client's model answered with image content, not text."}],
        "isError": True,
    }


@pytest.mark.parametrize(
    "answer", ['{"city": "Paris"}', '```json\n{"city": "Paris"}\n```', ' ```\n{"city": "Paris"}```\n']
)
async def test_with_an_output_schema_the_json_answer_becomes_structured_content(tenant_a, answer):
    result = await run(tenant_a, FakeModel(says(answer)), {"prompt": "x"}, {}, output_schema=SCHEMA)
    assert result == {
        "content": [{"type": "text", "text": '{"city": "Paris"}'}],
        "structuredContent": {"city": "Paris"},
    }


@pytest.mark.parametrize(
    ("answer", "text"),
    [
        ("The city is Paris.", "The model's answer was not JSON, and this tool returns structured output."),
        # AMB-115: a RecursionError before, an internal error.
        (
            "[" * 5_000 + "]" * 5_000,
            "The model's answer is JSON nested deeper than 64 levels, and this tool returns structured output.",
        ),
    ],
    ids=["prose", "5,000 deep"],
)
async def test_with_an_output_schema_an_answer_that_is_not_usable_json_is_an_error_result(tenant_a, answer, text):
    result = await run(tenant_a, FakeModel(says(answer)), {"prompt": "x"}, {}, output_schema=SCHEMA)
    assert result["isError"] is True
    assert result["content"][0]["text"] == text


async def test_a_json_answer_cut_at_the_token_limit_says_so(tenant_a):
    cut = says('{"city": "Par', stopReason="maxTokens")
    result = await run(tenant_a, FakeModel(cut), {"prompt": "x", "max_tokens": 5}, {}, output_schema=SCHEMA)
    assert "(it stopped at the 5-token limit)" in result["content"][0]["text"]


async def test_a_request_that_cannot_carry_a_question_is_an_error_result_naming_sampling(ctx):
    # `ctx` has no asker, as for a request other than tools/call.
    result = await registry.run_inline(ctx, make_tool("llm", {"prompt": "x"}), {})
    assert result["isError"] is True and "sampling/createMessage" in result["content"][0]["text"]


@pytest.fixture
def summarize_tool(transactional_db, tenant_a):
    Tool.objects.create(
        tenant=tenant_a,
        name="summarize",
        input_schema={"type": "object", "properties": {"text": {"type": "string"}}},
        handler="llm",
        handler_config={"prompt": "Summarise: {{ text }}", "max_tokens": 50},
    )
    return tenant_a


async def test_a_modern_call_asks_the_model_in_a_round_and_returns_its_text_on_the_retry(summarize_tool):
    ctx = make_ctx(summarize_tool, version="2026-07-28", session=None, client_capabilities={"sampling": {}})
    params = {"name": "summarize", "arguments": {"text": "long"}}
    asked = await result_of(ctx, "tools/call", params)
    question = asked["inputRequests"]["q1"]
    assert question["method"] == "sampling/createMessage" and question["params"]["maxTokens"] == 50
    retry = {**params, "requestState": asked["requestState"], "inputResponses": {"q1": says("short")}}
    assert (await result_of(ctx, "tools/call", retry))["content"] == [{"type": "text", "text": "short"}]


async def test_a_modern_client_without_sampling_gets_minus_32021_not_an_error_result(summarize_tool):
    ctx = make_ctx(summarize_tool, version="2026-07-28", session=None, client_capabilities={})
    error = await error_of(ctx, "tools/call", {"name": "summarize", "arguments": {"text": "x"}})
    assert error["code"] == -32021 and error["data"] == {"requiredCapabilities": {"sampling": {}}}


# --- the tenant's endpoint -------------------------------------------------------------------------


@dataclass
class Completions:
    """A chat completions stub: records what it received; answers `content`, or `status`/`body` as set."""

    url: str = ""
    requests: list[dict[str, Any]] = field(default_factory=list)
    content: Any = "Paris."
    status: int = 200
    body: bytes | None = None
    delay: float = 0.0


@pytest.fixture
def completions() -> Iterator[Completions]:
    stub = Completions()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - signature is http.server's
            return None

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            received = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            stub.requests.append({"headers": dict(self.headers), "body": json.loads(received)})
            time.sleep(stub.delay)
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": stub.content},
                "finish_reason": "stop",
            }
            body = stub.body if stub.body is not None else json.dumps({"choices": [choice]}).encode()
            self.send_response(stub.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            if 300 <= stub.status < 400:
                self.send_header("Location", stub.url + "/elsewhere")
            self.end_headers()
            self.wfile.write(body)

    server = QuietServer(("127.0.0.1", 0), Handler)
    stub.url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    yield stub
    server.shutdown()
    server.server_close()


class NoClientModel(FakeModel):
    async def __call__(self, request: dict[str, Any]) -> dict[str, Any]:
        raise AssertionError("a tool with an endpoint must not ask the client's model")


def endpoint_tool(stub: Completions, secrets: dict[str, str] | None = None, **config: Any) -> dict[str, Any]:
    return {
        "config": {
            **PROMPT_CONFIG,
            "endpoint": {"url": stub.url, "model": "tiny-1", **config.pop("endpoint", {})},
            **config,
        },
        "handler_secrets": encrypt_secrets(secrets) if secrets else "",
    }


async def call_endpoint(
    tenant: Any, stub: Completions, arguments: dict[str, Any] | None = None, **kwargs: Any
):
    tool = endpoint_tool(stub, **kwargs)
    arguments = arguments if arguments is not None else {"text": "Paris is big.", "language": "French"}
    return await run(
        tenant, NoClientModel(), tool["config"], arguments, handler_secrets=tool["handler_secrets"]
    )


async def test_the_endpoint_is_sent_model_messages_and_limits_with_the_secret_key_and_its_answer_returned(
    tenant_a, completions, allow_local
):
    result = await call_endpoint(
        tenant_a, completions, secrets={"Authorization": "Bearer sk-s3cr3t"}, temperature=0.7
    )
    assert result == {"content": [{"type": "text", "text": "Paris."}]}
    [request] = completions.requests
    assert request["body"] == {
        "model": "tiny-1",
        "messages": [
            {"role": "system", "content": "You write in French."},
            {"role": "user", "content": "Summarise: Paris is big."},
        ],
        "max_tokens": 200,
        "temperature": 0.7,
    }
    assert request["headers"]["Authorization"] == "Bearer sk-s3cr3t"
    assert "s3cr3t" not in json.dumps(result)


async def test_an_endpoint_answer_becomes_structured_content_when_the_tool_has_an_output_schema(
    tenant_a, completions, allow_local
):
    completions.content = '```json\n{"city": "Paris"}\n```'
    tool = endpoint_tool(completions)
    result = await run(
        tenant_a, NoClientModel(), tool["config"], {"text": "x", "language": "en"}, output_schema=SCHEMA
    )
    assert result["structuredContent"] == {"city": "Paris"}


async def test_an_endpoint_answer_in_content_parts_is_joined_into_one_text(
    tenant_a, completions, allow_local
):
    completions.content = [{"type": "text", "text": "Par"}, {"type": "text", "text": "is."}]
    assert await call_endpoint(tenant_a, completions) == {"content": [{"type": "text", "text": "Paris."}]}


@pytest.mark.parametrize(
    ("status", "says"),
    [
        (401, "Upstream returned HTTP 401 Unauthorized."),
        (503, "Upstream returned HTTP 503 Service Unavailable."),
        (307, "Upstream returned HTTP 307 (a redirect); redirects are not followed."),
    ],
)
async def test_an_endpoint_status_that_is_not_2xx_is_an_error_result_naming_it_and_not_the_body(
    tenant_a, completions, allow_local, status, says
):
    completions.status, completions.body = status, b'{"error": "key sk-s3cr3t is invalid"}'
    result = await call_endpoint(tenant_a, completions)
    assert result == {"content": [{"type": "text", "text": says}], "isError": True}
    assert len(completions.requests) == 1  # the redirect was not followed


@pytest.mark.parametrize(
    "body",
    [b"not json", b'{"choices": []}', b'{"choices": [{"message": {"content": null}}]}', b'{"error": "x"}'],
)
async def test_an_endpoint_reply_that_is_not_a_chat_completion_is_an_error_result(
    tenant_a, completions, allow_local, body
):
    completions.body = body
    result = await call_endpoint(tenant_a, completions)
    assert result["isError"] is True
    assert result["content"][0]["text"].startswith("The model endpoint")


async def test_a_slow_endpoint_times_out_with_a_clear_error(tenant_a, completions, allow_local):
    completions.delay = 1.0
    result = await call_endpoint(tenant_a, completions, endpoint={"timeout": 0.2})
    assert result == {
        "content": [{"type": "text", "text": "The upstream service did not answer within 0.2 seconds."}],
        "isError": True,
    }


async def test_an_endpoint_reply_over_the_size_cap_is_abandoned(tenant_a, completions, allow_local):
    completions.content = "x" * 20_000  # allow_local caps replies at 16 KiB
    result = await call_endpoint(tenant_a, completions)
    assert result["content"][0]["text"] == "The upstream reply is larger than 16384 bytes."


async def test_an_endpoint_on_a_loopback_address_is_refused_without_the_allow_list(
    tenant_a, completions, settings
):
    settings.MCP_HTTP_HANDLER_ALLOW = []
    result = await call_endpoint(tenant_a, completions)
    assert result == {
        "content": [
            {"type": "text", "text": "The host '127.0.0.1' resolves to a loopback address; refused."}
        ],
        "isError": True,
    }
    assert completions.requests == []
