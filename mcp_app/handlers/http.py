"""The ``http`` kind: send the arguments to the tenant's own endpoint and map the reply.

``handler_config``: ``{"url": "https://…", "method": "POST", "headers": {…}, "timeout": 10}``, and
``parameters``/``body`` to put arguments in the URL's path, the query or headers (http_params.py),
and ``connection`` to act as the caller: the name of one of the tenant's providers, whose access
token of the calling person is sent as ``Authorization: Bearer`` (over any secret Authorization
header; a person with no connection is asked to connect first: accounts.py, AMB-215).
``method`` is POST (default), PUT or PATCH (arguments as a JSON body), or GET or DELETE (arguments
as query parameters, non-string values JSON-encoded). ``headers`` holds non-secret headers only;
secret headers (``Authorization``, API keys) are stored encrypted in ``Tool.handler_secrets`` as a
JSON object of header name → value (``secrets.encrypt_secrets``) and merged over them at call time.
The MCP client's own credentials are never forwarded (AU-45): nothing from the incoming request
reaches the upstream call except the arguments.

Reply mapping: non-2xx → error result "Upstream returned HTTP <status>"; a JSON object with a
``content`` list → used as the CallToolResult (``structuredContent``/``isError`` kept); any other JSON
object → ``structuredContent`` plus a text block of its JSON; other JSON → a text block of it;
``image/*`` or ``audio/*`` → an image/audio block; anything else → a text block. Redirects are not
followed (a 3xx is an error result), so a redirect cannot lead past the SSRF guard. The reply is
read as a stream and abandoned past ``settings.MCP_HTTP_HANDLER_MAX_RESPONSE_BYTES``.

A reply of ``Content-Type: application/x-ndjson`` (or ``application/jsonl``) is a stream of events
(progress, log, ask, result), relayed as they arrive (http_stream.py): the size cap and the tool's
timeout bound the whole stream, the configured timeout each silence. Every call carries an
``Idempotency-Key`` naming it, the same in each 2026-07-28 round, so an endpoint can tell a retry.

``exchange`` (and ``send`` over it) is the one way out of the platform for every kind that calls an
endpoint (the llm kind's too): the SSRF guard, the pinned address, the secret headers, no redirects
and the size cap.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import functools
import json
import logging
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
from django.conf import settings
from django.utils.crypto import salted_hmac

from lib import nesting
from mcp_app.core import ssrf
from mcp_app.core.context import RequestContext
from mcp_app.core.errors import ToolError
from mcp_app.core.types import ToolDef
from mcp_app.handlers import accounts, http_params, http_stream
from mcp_app.handlers.secrets import SecretsError, decrypt_secrets

logger = logging.getLogger(__name__)

METHODS = ("POST", "GET", "PUT", "PATCH", "DELETE")
_QUERY_METHODS = ("GET", "DELETE")
DEFAULT_TIMEOUT = 30.0
# Headers the handler sets itself, or that would let a config smuggle a second request.
_RESERVED_HEADERS = frozenset(
    {
        "host",
        "content-length",
        "transfer-encoding",
        "connection",
        "upgrade",
        "te",
        "trailer",
        "keep-alive",
        "idempotency-key",
    }
)
# Credentials belong in the encrypted secret headers, not in the readable config.
_SECRET_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key", "api-key"})
USER_AGENT = "django-mcp-platform http-handler"
_ACCEPT = "application/json, text/plain;q=0.9, */*;q=0.5"
# The http kind also follows a stream of events (http_stream), so it says it takes one.
_ACCEPT_EVENTS = f"application/json, {', '.join(http_stream.STREAM_TYPES)}, text/plain;q=0.9, */*;q=0.5"
_CALL_KEY_SALT = "mcp.handlers.http.call-key"


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    # Building a verifying context loads the CA bundle: do it once per process.
    return httpx.create_ssl_context()


def timeout_for(tool: ToolDef, configured: float | None) -> float:
    """The seconds one exchange may take: the configured timeout, capped by the tool's own."""
    seconds = float(configured or DEFAULT_TIMEOUT)
    return max(0.1, min(seconds, float(tool.timeout_seconds or seconds)))


def _headers(tool: ToolDef | None, target: ssrf.Target, accept: str) -> dict[str, str]:
    headers = {"User-Agent": USER_AGENT, "Accept": accept}
    if tool is not None:
        headers.update({str(k): str(v) for k, v in (tool.handler_config.get("headers") or {}).items()})
        try:
            headers.update(decrypt_secrets(tool.handler_secrets))
        except SecretsError as exc:
            raise ToolError(f"The tool's secret headers cannot be used: {exc}") from None
    default_port = 443 if target.scheme == "https" else 80
    headers["Host"] = target.host if target.port == default_port else f"{target.host}:{target.port}"
    return headers


def _query_value(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def status_message(status: int, reason: str = "") -> str:
    """What a non-2xx upstream status tells the model (the body is never echoed: it may hold secrets)."""
    if 300 <= status < 400:
        return f"Upstream returned HTTP {status} (a redirect); redirects are not followed."
    return f"Upstream returned HTTP {status}{' ' + reason if reason else ''}."


def map_reply(status: int, content_type: str, body: bytes, reason: str = "") -> dict[str, Any]:
    """Turn an upstream HTTP reply into a CallToolResult dict."""
    if not 200 <= status < 300:
        return _error(status_message(status, reason))
    mime = content_type.split(";", 1)[0].strip().lower()
    if mime.startswith(("image/", "audio/")) and body:
        kind = mime.split("/", 1)[0]
        return {"content": [{"type": kind, "data": base64.b64encode(body).decode("ascii"), "mimeType": mime}]}
    text = body.decode(_charset(content_type), errors="replace")
    if mime == "application/json" or mime.endswith("+json") or (not mime and text.lstrip()[:1] in ("{", "[")):
        try:
            data = nesting.loads(text)
        except nesting.TooDeep as exc:
            return _error(f"The upstream's JSON reply is {exc}.")
        except ValueError:
            return {"content": [{"type": "text", "text": text}]}
        return _map_json(data)
    return {"content": [{"type": "text", "text": text}]}


def _charset(content_type: str) -> str:
    for part in content_type.split(";")[1:]:
        key, _, value = part.partition("=")
        if key.strip().lower() == "charset" and value.strip():
            charset = value.strip().strip('"')
            try:
                "".encode(charset)
            except LookupError:
                break
            return charset
    return "utf-8"


def _map_json(data: Any) -> dict[str, Any]:
    if (
        isinstance(data, dict)
        and isinstance(data.get("content"), list)
        and all(isinstance(b, dict) for b in data["content"])
    ):
        result: dict[str, Any] = {"content": data["content"]}
        if isinstance(data.get("structuredContent"), dict):
            result["structuredContent"] = data["structuredContent"]
        if data.get("isError") is True:
            result["isError"] = True
        return result
    text = json.dumps(data, ensure_ascii=False)
    if isinstance(data, dict):
        return {"content": [{"type": "text", "text": text}], "structuredContent": data}
    return {"content": [{"type": "text", "text": text}]}


def _error(message: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": message}], "isError": True}


@dataclass(frozen=True)
class Reply:
    """An upstream reply: its status, and the body of a 2xx one (read within the size cap)."""

    status: int
    reason: str
    content_type: str
    body: bytes


@dataclass(frozen=True)
class Opened:
    """An upstream reply whose body has not been read yet (see ``exchange``)."""

    response: httpx.Response
    # The deadline of the whole exchange (a streamed reply lifts it: the tool's own timeout bounds it).
    deadline: asyncio.Timeout
    limit: int

    async def chunks(self) -> AsyncIterator[bytes]:
        """The body as it arrives; ToolError once it passes the size cap."""
        declared = self.response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > self.limit:
            raise ToolError(f"The upstream reply is larger than {self.limit} bytes.")
        received = 0
        async for chunk in self.response.aiter_bytes():
            received += len(chunk)
            if received > self.limit:
                raise ToolError(f"The upstream reply is larger than {self.limit} bytes.")
            yield chunk

    async def body(self) -> bytes:
        return b"".join([chunk async for chunk in self.chunks()])


@contextlib.asynccontextmanager
async def exchange(
    ctx: RequestContext | None,
    tool: ToolDef | None,
    method: str,
    url: str,
    timeout: float,
    *,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    accept: str = _ACCEPT,
    headers: dict[str, str] | None = None,
) -> AsyncIterator[Opened]:
    """Send one request to ``url`` through the SSRF guard, with the tool's secret headers; yield the reply.

    The body is read inside the block (within ``timeout``, for the whole exchange, and the size cap);
    leaving the block closes the connection. Raises ToolError (SsrfRefused included) when the URL is
    refused, the upstream cannot be reached, does not answer within ``timeout`` or fails mid-reply.
    Every kind that calls out goes through here, so the guard, the pinning and the cap have one
    implementation. ``headers`` are the platform's own additions, over the configured ones. Without
    a tool (the platform reading a document for itself, e.g. an OpenAPI description to import) no
    configured or secret header is sent.
    """
    target = await ssrf.vet_url(url)
    # Connect to the vetted address; the name goes in Host and SNI so TLS still checks it.
    pinned = httpx.URL(url).copy_with(host=target.ip)
    request_kwargs: dict[str, Any] = {"headers": {**_headers(tool, target, accept), **(headers or {})}}
    if params is not None:
        request_kwargs["params"] = params
    if json_body is not None:
        request_kwargs["json"] = json_body
    if target.scheme == "https":
        request_kwargs["extensions"] = {"sni_hostname": target.host}
    limit = settings.MCP_HTTP_HANDLER_MAX_RESPONSE_BYTES
    try:
        # trust_env=False: a proxy from the environment would resolve the name again.
        async with (
            asyncio.timeout(timeout) as deadline,
            httpx.AsyncClient(
                verify=_ssl_context(), timeout=timeout, follow_redirects=False, trust_env=False
            ) as client,
            client.stream(method, pinned, **request_kwargs) as response,
        ):
            yield Opened(response, deadline, limit)
    except (TimeoutError, httpx.TimeoutException):
        raise ToolError(f"The upstream service did not answer within {timeout:g} seconds.") from None
    except httpx.ConnectError:
        raise ToolError(f"Could not connect to the upstream service at {target.host}.") from None
    except httpx.HTTPError as exc:
        who = f"tool {tool.name!r} of tenant {ctx.tenant.slug}" if tool and ctx else "platform fetch"
        logger.warning("%s: %s", who, type(exc).__name__)
        raise ToolError("The request to the upstream service failed.") from None


async def send(
    ctx: RequestContext | None,
    tool: ToolDef | None,
    method: str,
    url: str,
    timeout: float,
    *,
    params: dict[str, Any] | None = None,
    json_body: Any = None,
    headers: dict[str, str] | None = None,
) -> Reply:
    """Send one request through ``exchange`` and read the reply: the status, and a 2xx reply's body."""
    async with exchange(
        ctx, tool, method, url, timeout, params=params, json_body=json_body, headers=headers
    ) as opened:
        response = opened.response
        if not 200 <= response.status_code < 300:
            return Reply(response.status_code, response.reason_phrase, "", b"")
        body = await opened.body()
        return Reply(response.status_code, "", response.headers.get("content-type", ""), body)


def _call_key(ctx: RequestContext) -> dict[str, str]:
    """An Idempotency-Key naming the call, the same in each of its 2026-07-28 rounds.

    A streamed reply that asks is started again on the retry of such a round (http_stream): the
    endpoint can tell it is the same call. Derived, so the call's own id (which keys what a person
    submits on a URL-mode form) never leaves the platform.
    """
    if not ctx.call_id:
        return {}
    return {"Idempotency-Key": salted_hmac(_CALL_KEY_SALT, ctx.call_id).hexdigest()[:32]}


async def run(ctx: RequestContext, tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call the tool's endpoint with the arguments and map the reply (or follow its stream of events)."""
    config = tool.handler_config
    method = str(config.get("method") or "POST").upper()
    if method not in METHODS:
        raise ToolError(f"The tool's HTTP method {method!r} is not supported.")
    query = method in _QUERY_METHODS
    url = str(config.get("url", ""))
    timeout = timeout_for(tool, config.get("timeout"))
    if http_params.uses_placement(config):
        placed = http_params.build(config, url, query, arguments)
    else:
        placed = http_params.Request(
            url,
            params={k: _query_value(v) for k, v in arguments.items()} if query else None,
            json_body=None if query else arguments,
        )

    # The caller's own account (AMB-215): asked for before anything is sent, so a person who must
    # connect first does so before the endpoint hears of the call.
    provider = config.get("connection")
    as_person = {"Authorization": f"Bearer {await accounts.access_token(ctx, provider)}"} if provider else {}

    async def post_reply(reply_url: str, answer: dict[str, Any]) -> None:
        reply = await send(ctx, tool, "POST", reply_url, timeout, json_body=answer, headers=as_person)
        if not 200 <= reply.status < 300:
            raise ToolError(
                "The endpoint did not take the answer to its question: "
                + status_message(reply.status, reply.reason)
            )

    async with exchange(
        ctx,
        tool,
        method,
        placed.url,
        timeout,
        params=placed.params,
        json_body=placed.json_body,
        accept=_ACCEPT_EVENTS,
        headers={**placed.headers, **_call_key(ctx), **as_person},
    ) as opened:
        response = opened.response
        content_type = response.headers.get("content-type", "")
        if not 200 <= response.status_code < 300:
            return _error(status_message(response.status_code, response.reason_phrase))
        if not http_stream.is_stream(content_type):
            return map_reply(response.status_code, content_type, await opened.body())
        # A long tool streams for as long as it runs: the tool's timeout (registry.run_inline) bounds
        # the whole stream, the configured one each silence (httpx's read timeout).
        opened.deadline.reschedule(None)
        try:
            event = await http_stream.follow(ctx, opened.chunks(), url, post_reply)
        except httpx.ReadTimeout:
            raise ToolError(f"The endpoint's stream sent nothing for {timeout:g} seconds.") from None
        return _map_json(event)


def config_problems(config: dict[str, Any]) -> list[str]:
    """What the ``handler.http`` schema cannot say, by hand and why.

    The URL goes through the SSRF guard's own parsing (ssrf.split_url), the rules the call applies;
    header names are compared without case against the lists the request builder uses (a JSON Schema
    pattern has no case-insensitive flag); parameters are checked against the URL's placeholders.
    """
    found: list[str] = []
    url = config.get("url")
    if isinstance(url, str) and url:
        try:
            ssrf.split_url(url)
        except ToolError as exc:
            found.append(exc.message)
    headers = config.get("headers")
    for name in headers if isinstance(headers, dict) else ():
        lowered = str(name).lower()
        if lowered in _RESERVED_HEADERS:
            found.append(f"The header {name!r} is set by the platform and cannot be configured.")
        elif lowered in _SECRET_HEADERS:
            found.append(f"Put the {name!r} header in the secret headers, where it is stored encrypted.")
    if http_params.uses_placement(config) and isinstance(url, str):
        found += http_params.problems(config, url, _RESERVED_HEADERS, _SECRET_HEADERS)
    return found
