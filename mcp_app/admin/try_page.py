"""The Try page's views (AMB-71): the page, its live stream of one call, and its cancel button.

The page renders a form from the tool's input schema in the browser (static/mcpsite/try_tool.js) and
POSTs the arguments to `try/stream/`, which answers newline-delimited JSON events as the call makes
them (try_tool.stream). `try/cancel/` cancels the user's own running call through the transport's
in-flight table, like `notifications/cancelled`; `try/answer/` answers a question the call asked
(elicitation, approval, sampling, roots), as a client's response does. The stream's POST also names
the era and the capabilities of the client the page plays (try_client.py, AMB-250). Without script the form posts to the page itself
and gets the whole outcome at once. Every URL is the tool's: another tenant's tool is a 404, a viewer
gets 403 (the tool really runs), and each POST needs the CSRF token.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any

from asgiref.sync import async_to_sync
from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseBadRequest,
    HttpResponseNotAllowed,
    JsonResponse,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.template.response import TemplateResponse
from django.urls import path, reverse

from mcp_app.admin import try_client, try_render, try_tool
from mcp_app.core.schema_examples import example_arguments
from mcp_app.core.versions import LATEST
from mcp_app.models import Tool
from mcp_app.oauth.resources import canonical_uri


def _member_id(request: HttpRequest) -> int:
    """The signed-in person's id (the admin's views let no anonymous visitor in)."""
    user_id = request.user.pk
    if user_id is None:
        raise PermissionDenied
    return int(user_id)


# A mixin of a ModelAdmin: the type checker sees it as one (admin_site, get_object, permissions, super()).
if TYPE_CHECKING:
    _AdminBase = admin.ModelAdmin
else:
    _AdminBase = object


class TryPages(_AdminBase):
    """Mixed into the tool's ModelAdmin: the Try page and its two helpers, under the tool's URL."""

    def try_urls(self) -> list[Any]:
        site = self.admin_site
        return [
            path("<path:object_id>/try/stream/", site.admin_view(self.try_stream_view), name="mcp_app_tool_try_stream"),
            path("<path:object_id>/try/cancel/", site.admin_view(self.try_cancel_view), name="mcp_app_tool_try_cancel"),
            path("<path:object_id>/try/answer/", site.admin_view(self.try_answer_view), name="mcp_app_tool_try_answer"),
            path("<path:object_id>/try/", site.admin_view(self.try_view), name="mcp_app_tool_try"),
        ]  # fmt: skip

    def _tool_to_try(self, request: HttpRequest, object_id: str) -> Tool:
        tool = self.get_object(request, object_id)
        # Another tenant's tool is None here, and has_change_permission(None) would be the model's
        # answer: refuse it as a missing one.
        if tool is None:
            raise Http404("No such tool.")
        if not self.has_change_permission(request, tool):
            raise PermissionDenied
        tool.tenant  # noqa: B018 -- loaded here: the async call reads it without a query
        return tool

    def try_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Run the tool once with arguments typed in the admin (editors and owners: it really runs)."""
        tool = self._tool_to_try(request, object_id)
        opts = Tool._meta
        context: dict[str, Any] = {
            **self.admin_site.each_context(request),
            "opts": opts,
            "title": f"Try {tool.name}",
            "tool": tool,
            "mcp_url": canonical_uri(tool.tenant.slug),
            "arguments": json.dumps(example_arguments(tool.input_schema), indent=2),
            "schema": tool.input_schema if isinstance(tool.input_schema, dict) else {},
            "stream_url": reverse("admin:mcp_app_tool_try_stream", args=[tool.pk]),
            "cancel_url": reverse("admin:mcp_app_tool_try_cancel", args=[tool.pk]),
            "answer_url": reverse("admin:mcp_app_tool_try_answer", args=[tool.pk]),
            "eras": try_client.ERAS,
            "capabilities": [
                (name, label, name in try_client.DEFAULT_CAPABILITIES)
                for name, label in try_client.CAPABILITIES.items()
            ],
        }
        try:
            definition = async_to_sync(try_tool.definition_for)(tool)[1]
        except try_tool.TryError as exc:
            context["problem"] = str(exc)
            context["version"] = LATEST
        else:
            context["version"] = try_tool.default_era(definition)
            context["what_happens"] = try_render.what_happens(definition)
        if request.method == "POST":
            context["arguments"] = request.POST.get("arguments", "")
            try:
                arguments = try_tool.parse_arguments(context["arguments"])
                era = try_client.client_from(request.POST["era"], []).version if "era" in request.POST else ""
                context["outcome"] = async_to_sync(try_tool.run)(tool, _member_id(request), arguments, era)
                context["version"] = era or context["version"]
            except (try_tool.TryError, try_client.AnswerError) as exc:
                context["problem"] = str(exc)
        return TemplateResponse(request, "admin/mcp_app/tool/try_tool.html", context)

    def try_stream_view(self, request: HttpRequest, object_id: str) -> HttpResponseBase:
        """One call, answered as newline-delimited JSON events while it runs."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        tool = self._tool_to_try(request, object_id)
        try:
            arguments = try_tool.parse_arguments(request.POST.get("arguments", ""))
            client = None
            if "era" in request.POST:  # the page names its client; a bare POST gets the default one
                client = try_client.client_from(request.POST["era"], request.POST.getlist("capability"))
        except (try_tool.TryError, try_client.AnswerError) as exc:
            events: AsyncIterator[dict[str, Any]] = _one({"event": "problem", "message": str(exc)})
        else:
            run_id = secrets.token_urlsafe(12)
            events = try_tool.stream(tool, _member_id(request), arguments, run_id, client)
        response = StreamingHttpResponse(_lines(events), content_type="application/x-ndjson")
        response["Cache-Control"] = "no-cache"
        response["X-Accel-Buffering"] = "no"  # a proxy in front must pass each line at once
        return response

    def try_cancel_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """Cancel the user's own running call named by `run` (a finished or unknown one: no effect)."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self._tool_to_try(request, object_id)
        run_id = request.POST.get("run", "")
        if not try_tool.RUN_ID.match(run_id):
            return HttpResponseBadRequest("Which call? The form sends the run id the stream started with.")
        reason = f"cancelled in the admin by {request.user.get_username()}"
        async_to_sync(try_tool.cancel)(_member_id(request), run_id, reason)
        return JsonResponse({"cancelling": run_id})

    def try_answer_view(self, request: HttpRequest, object_id: str) -> HttpResponse:
        """The person's answer to a question their running call asked (`run`, `question`, `method`,
        `action`, `content`): delivered as a client's response to that question is."""
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        self._tool_to_try(request, object_id)
        run_id, question = request.POST.get("run", ""), request.POST.get("question", "")
        if not try_tool.RUN_ID.match(run_id) or not try_tool.QUESTION_ID.match(question):
            return HttpResponseBadRequest("Which question? The page sends the ids the stream gave it.")
        try:
            body = try_client.answer_body(
                request.POST.get("method", ""), request.POST.get("action", ""), request.POST.get("content", "")
            )
        except try_client.AnswerError as exc:
            return HttpResponseBadRequest(str(exc))
        async_to_sync(try_tool.answer)(_member_id(request), run_id, question, body)
        return JsonResponse({"answered": question})


async def _one(event: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
    yield event


async def _lines(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for event in events:
        yield (json.dumps(event, ensure_ascii=False) + "\n").encode()
