"""The API's views of one tenant's definitions and runs (`/api/v1/tenants/<slug>/...`).

Every queryset is the URL's tenant's rows (`for_tenant`), and the tenant itself comes from
tenants.access, so another tenant's object is a 404 exactly like a missing one. Saves go through the
models (mcp_app/signals/definitions.py announces list_changed / resources/updated after commit, as for the admin).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any, cast

from asgiref.sync import async_to_sync
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_view
from rest_framework import exceptions, filters, generics, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api import serializers as defs
from mcp_app.api.errors import ErrorSerializer, error_response
from mcp_app.api.parsers import BoundedJSONParser
from mcp_app.api.permissions import TenantRole, tenant_of
from mcp_app.drafts import service as drafts
from mcp_app.drafts import trial
from mcp_app.models import Prompt, Resource, ResourceTemplate, Tool, ToolRun
from mcp_app.protocol import tasks
from tenants.models import Tenant, TenantQuerySet

logger = logging.getLogger(__name__)

SLUG = OpenApiParameter(
    "slug", str, OpenApiParameter.PATH, description="The tenant's slug.", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$"
)
ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The object's id.")


# A mixin of DRF's generic views: the type checker sees it as one (request, kwargs, get_serializer_context).
if TYPE_CHECKING:
    _Base = generics.GenericAPIView
else:
    _Base = object


class TenantScoped(_Base):
    """What every view under /tenants/<slug>/ shares: the tenant, its role check, its rows."""

    permission_classes = [IsAuthenticated, TenantRole]
    parser_classes = [BoundedJSONParser]
    model: type[models.Model]

    def tenant(self) -> Tenant:
        return tenant_of(self.request, self.kwargs["slug"])[0]

    def get_queryset(self) -> models.QuerySet:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no tenant in the URL
            return self.model._default_manager.none()
        # Every model of these views is tenant-owned: its manager (`objects`, the default) is a TenantQuerySet's.
        return cast(TenantQuerySet, self.model._default_manager.all()).for_tenant(self.tenant())

    def get_serializer_context(self) -> dict[str, Any]:
        context = {**super().get_serializer_context()}
        if not getattr(self, "swagger_fake_view", False) and "slug" in self.kwargs:
            context["tenant"] = self.tenant()
        return context


class PublishedSerializer(serializers.Serializer):
    published = serializers.ListField(
        child=serializers.DictField(),
        help_text='What was published, each {"kind", "name", "version", "id"}; empty: there was no draft.',
    )


class PublishDraftsSerializer(serializers.Serializer):
    confirm_no_tools = serializers.BooleanField(
        required=False, default=False,
        help_text="Publish though, after the policies published, no member would have a single tool in its list.",
    )  # fmt: skip


def _confirmed(request: Request) -> bool:
    """The body's confirm_no_tools (no body: not confirmed); a value that is no boolean is a 400."""
    body = PublishDraftsSerializer(data=request.data if isinstance(request.data, dict) else {})
    body.is_valid(raise_exception=True)
    return bool(body.validated_data["confirm_no_tools"])


class DiscardedSerializer(serializers.Serializer):
    discarded = serializers.BooleanField(help_text="False: there was no draft to discard.")


def _published(done: list[drafts.Published]) -> Response:
    items = [{"kind": d.kind, "name": d.label, "version": d.version, "id": d.pk} for d in done]
    return Response(PublishedSerializer({"published": items}).data)


DRAFT = OpenApiParameter(
    "draft",
    bool,
    OpenApiParameter.QUERY,
    description="Writes: stage the change as a draft (clients keep the published version until it is "
    "published). Reads: the definition with its draft applied, as Try runs it.",
)


class TrySerializer(serializers.Serializer):
    arguments = serializers.DictField(required=False, default=dict, help_text="The tool's arguments.")
    era = serializers.ChoiceField(
        choices=list(trial.ERAS), required=False, help_text="The protocol revision the client speaks (default: the newest that sees the tool)."
    )


class TriedSerializer(serializers.Serializer):
    definition = serializers.ChoiceField(choices=["draft", "published"], help_text="Which definition ran.")
    era = serializers.CharField(help_text="The protocol revision it was called in.")
    elapsed_ms = serializers.IntegerField()
    result = serializers.DictField(allow_null=True, help_text="The CallToolResult, as that revision shapes it.")
    error = serializers.DictField(allow_null=True, help_text="The JSON-RPC error, when the call was refused.")
    notifications = serializers.ListField(child=serializers.DictField(), help_text="Progress and log messages sent meanwhile.")


class DefinitionViewSet(TenantScoped, viewsets.ModelViewSet):
    """Create, read, update, delete one kind of definition; owners and editors write, viewers read.

    A write publishes at once unless `?draft=true` stages it (AMB-222); `publish/` and `discard/` act
    on one definition's draft, `/tenants/<slug>/publish/` on all of them."""

    filter_backends = [DjangoFilterBackend, filters.SearchFilter, filters.OrderingFilter]
    search_fields = ["name", "title", "description"]
    ordering = ["id"]
    ordering_fields = ["id", "name", "updated_at"]

    def staged(self) -> bool:
        return self.request.query_params.get("draft", "").lower() in ("1", "true", "yes")

    def get_object(self) -> Any:  # a definition; an Upstream in UpstreamViewSet
        obj = super().get_object()
        return drafts.apply_draft(obj) if self.staged() else obj

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "stage": self.staged()}

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.save(tenant=self.tenant())

    @extend_schema(
        parameters=[SLUG, ID], request=PublishDraftsSerializer, responses={200: PublishedSerializer, 409: ErrorSerializer}
    )
    @action(detail=True, methods=["post"])
    def publish(self, request: Request, slug: str, pk: str) -> Response:
        """Publish this definition's draft as its next version (connected clients are told)."""
        try:
            done = drafts.publish(self.get_object(), request.user, confirm_no_tools=_confirmed(request))
        except drafts.PublishError as exc:
            return error_response(409, "conflict", str(exc))
        return _published([done] if done else [])

    @extend_schema(parameters=[SLUG, ID], request=None, responses={200: DiscardedSerializer})
    @action(detail=True, methods=["post"])
    def discard(self, request: Request, slug: str, pk: str) -> Response:
        """Drop the draft: clients keep the published version (a never-published draft is deleted)."""
        return Response(DiscardedSerializer({"discarded": drafts.discard(self.get_object())}).data)


@extend_schema(parameters=[SLUG], request=PublishDraftsSerializer, responses={200: PublishedSerializer, 409: ErrorSerializer})
class PublishAllView(TenantScoped, generics.GenericAPIView):
    """Publish every draft of the tenant as one change: all or none, one list_changed per list."""

    serializer_class = PublishedSerializer

    def post(self, request: Request, slug: str) -> Response:
        try:
            done = drafts.publish_all(self.tenant(), request.user, confirm_no_tools=_confirmed(request))
        except drafts.PublishError as exc:
            return error_response(409, "conflict", f"{exc} Nothing was published.")
        return _published(done)


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ToolViewSet(DefinitionViewSet):
    model = Tool
    serializer_class = defs.ToolSerializer
    filterset_fields = {"name": ["exact"], "enabled": ["exact"], "handler": ["exact"], "execution": ["exact"]}

    @extend_schema(
        parameters=[SLUG, ID], request=TrySerializer, responses={200: TriedSerializer, 400: ErrorSerializer}
    )
    @action(detail=True, methods=["post"], url_path="try")
    def try_(self, request: Request, slug: str, pk: str) -> Response:
        """Call the tool's draft (its published version when it has none) as a client that declares no
        capability would, and return the answer: a pipeline stages, tries, then publishes (AMB-223)."""
        asked = TrySerializer(data=request.data)
        asked.is_valid(raise_exception=True)
        row = drafts.apply_draft(cast(Tool, self.get_object()))  # this viewset's rows are Tools
        row.tenant  # noqa: B018 -- loaded here: the trial reads it without a query
        user_id = request.user.pk
        if user_id is None:  # IsAuthenticated let no anonymous caller in
            raise exceptions.NotAuthenticated()
        try:
            answer = async_to_sync(trial.call_once)(
                row, user_id, f"api-try-{user_id}", asked.validated_data["arguments"],
                asked.validated_data.get("era", ""),
            )  # fmt: skip
        except trial.TrialError as exc:
            return error_response(400, "invalid", str(exc))
        body = {
            "definition": "draft" if drafts.has_draft(row) and row.handler != "upstream" else "published",
            "era": answer.version,
            "elapsed_ms": answer.elapsed_ms,
            "result": answer.response.get("result"),
            "error": answer.response.get("error"),
            "notifications": answer.notifications,
        }
        return Response(TriedSerializer(body).data)


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class PromptViewSet(DefinitionViewSet):
    model = Prompt
    serializer_class = defs.PromptSerializer
    filterset_fields = {"name": ["exact"], "enabled": ["exact"]}


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ResourceViewSet(DefinitionViewSet):
    model = Resource
    parser_classes = [BoundedJSONParser, MultiPartParser]
    search_fields = ["name", "title", "description", "uri"]
    ordering_fields = ["id", "name", "uri", "updated_at"]
    filterset_fields = {"name": ["exact"], "uri": ["exact"], "enabled": ["exact"], "mime_type": ["exact"]}

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return defs.ResourceListSerializer if self.action == "list" else defs.ResourceSerializer


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ResourceTemplateViewSet(DefinitionViewSet):
    model = ResourceTemplate
    serializer_class = defs.ResourceTemplateSerializer
    search_fields = ["name", "title", "description", "uri_template"]
    ordering_fields = ["id", "name", "uri_template", "updated_at"]
    filterset_fields = {"name": ["exact"], "uri_template": ["exact"], "enabled": ["exact"]}


# --- Runs ----------------------------------------------------------------------------------------


ACTIVE = (ToolRun.Status.QUEUED, ToolRun.Status.RUNNING)


class ToolRunSerializer(serializers.ModelSerializer):
    user: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    is_task = serializers.SerializerMethodField()

    class Meta:
        model = ToolRun
        fields = (
            "id", "job_id", "tool", "tool_name", "status", "user", "client_id", "session_id", "queued_at",
            "started_at", "finished_at", "worker", "detail", "arguments", "result", "exchanges", "is_task",
        )  # fmt: skip
        read_only_fields = fields

    def get_is_task(self, run: ToolRun) -> bool:
        return run.task_id is not None


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    retrieve=extend_schema(parameters=[SLUG, ID]),
    cancel=extend_schema(
        parameters=[SLUG, ID],
        request=None,
        responses={202: ToolRunSerializer, 409: ErrorSerializer, 503: ErrorSerializer},
    ),
)
class ToolRunViewSet(TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Background runs and tasks, newest first; owners and editors cancel a queued or running one."""

    model = ToolRun
    serializer_class = ToolRunSerializer
    filter_backends = [DjangoFilterBackend]
    filterset_fields = {"status": ["exact"], "tool_name": ["exact"]}

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("user").order_by("-queued_at", "-id")

    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, slug: str, pk: str) -> Response:
        """Stop the run as the admin's Cancel button does: its waiting caller is told who stopped it."""
        run = self.get_object()
        if run.status not in ACTIVE:
            return error_response(409, "conflict", f"The run is {run.status}: only a queued or running run stops.")
        who = request.user.get_username()
        try:
            tasks.cancel_by_operator(run, who)
        except Exception:
            logger.exception("could not cancel run %s", run.job_id)
            return error_response(503, "unavailable", "The run could not be cancelled: Redis did not answer.")
        return Response(self.get_serializer(run).data, status=status.HTTP_202_ACCEPTED)
