"""The API of a tenant's upstream MCP servers: the rows, Test connection, sync, and their remote tools.

The same rules as the definitions (mcp_app/api/views.py): the URL's tenant's rows only (another
tenant's upstream is a 404 like a missing one), owners and editors change, viewers read, every write
through `full_clean`. Secret headers are write-only (`secrets`; reads give `secret_names`), as is the
OAuth client secret (`oauth_client_secret`; reads give `oauth_client_secret_set`). Test
connection is a POST and needs the editor role, as in the admin: it calls out with the secrets. Every
change of a published tool goes through mcp_app/upstreams/service.py, the admin's one implementation.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import filters, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app import federation
from mcp_app.api import upstream_registry
from mcp_app.api.errors import ErrorSerializer, error_response
from mcp_app.api.serializers import READ_ONLY, CleanedModelSerializer, SecretHeadersMixin
from mcp_app.api.views import ID, SLUG, DefinitionViewSet, TenantScoped
from mcp_app.catalog.apart import run_apart
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Approval, Tool, Upstream, UpstreamTool
from mcp_app.registry.client import RegistryError
from mcp_app.upstreams import service

UNREACHABLE = "upstream_unreachable"
REFUSED = "conflict"


class UpstreamSerializer(SecretHeadersMixin, CleanedModelSerializer):
    secrets_field = "secret_headers"
    oauth_client_secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_null=True,
        trim_whitespace=False,
        max_length=4096,
        help_text="The OAuth client's secret (AMB-198), stored encrypted and never returned: a value "
        "replaces it, absent or null keeps it. Removed with the client id.",
    )
    oauth_client_secret_set = serializers.SerializerMethodField(help_text="Whether a client secret is stored.")

    class Meta:
        model = Upstream
        exclude = ("tenant", "secret_headers")
        read_only_fields = (
            *READ_ONLY, "last_protocol_version", "last_server_info", "last_capabilities", "last_synced_at",
            "last_error",
        )  # fmt: skip

    def get_oauth_client_secret_set(self, row: Upstream) -> bool:
        return bool(row.oauth_client_secret)

    def candidate(self, attrs: dict[str, Any]) -> Any:
        return super().candidate({k: v for k, v in attrs.items() if k != "oauth_client_secret"})

    def _with_secrets(self, validated: dict[str, Any]) -> dict[str, Any]:
        validated = super()._with_secrets(validated)
        secret = validated.pop("oauth_client_secret", None)
        if secret:
            validated["oauth_client_secret"] = encrypt_secrets({"client_secret": secret})
        if "oauth_client_id" in validated and not validated["oauth_client_id"]:
            validated["oauth_client_secret"] = ""  # no client, no secret of one kept
        return validated


class OfferingSerializer(serializers.Serializer):
    """What the upstream offers now, as its wire gave it (the admin's Test connection)."""

    protocol_version = serializers.CharField()
    server_info = serializers.DictField()
    capabilities = serializers.DictField()
    instructions = serializers.CharField(allow_blank=True)
    tools = serializers.ListField(child=serializers.DictField())
    prompts = serializers.ListField(child=serializers.DictField())
    resources = serializers.ListField(child=serializers.DictField())
    resource_templates = serializers.ListField(child=serializers.DictField())


class SyncReportSerializer(serializers.Serializer):
    """What one sync found: remote tool names per outcome."""

    new = serializers.ListField(child=serializers.CharField())
    published = serializers.ListField(child=serializers.CharField())
    changed = serializers.ListField(
        child=serializers.CharField(), help_text="Held for review (diff, accept)."
    )
    gone = serializers.ListField(child=serializers.CharField())
    back = serializers.ListField(child=serializers.CharField())
    not_published = serializers.DictField(
        child=serializers.CharField(), help_text="New tools publish_new could not publish → why."
    )


class RemoteToolSerializer(serializers.ModelSerializer):
    upstream_name = serializers.CharField(source="upstream.name", read_only=True)
    tool_name = serializers.CharField(
        source="tool.name", read_only=True, allow_null=True, default=None, help_text="The published tool."
    )
    published = serializers.BooleanField(read_only=True)
    pending_review = serializers.BooleanField(
        read_only=True, help_text="Published, and the upstream now offers another definition (see diff)."
    )

    class Meta:
        model = UpstreamTool
        fields = (
            "id", "upstream", "upstream_name", "remote_name", "offered", "pinned", "tool", "tool_name",
            "published", "pending_review", "first_seen_at", "last_seen_at", "gone_at", "withdrawn",
        )  # fmt: skip
        read_only_fields = fields


class PublishSerializer(serializers.Serializer):
    """How a remote tool is published (the admin's publish form)."""

    name = serializers.CharField(
        max_length=64,
        required=False,
        validators=Tool._meta.get_field("name").validators,
        help_text="The tool's name here (default: the prefix + the remote name).",
    )
    approval = serializers.ChoiceField(choices=Approval.choices, default=Approval.OFF)
    fixed = serializers.DictField(
        required=False,
        default=dict,
        help_text='Arguments always sent with this value and hidden from clients, e.g. {"repo": "acme/api"}.',
    )


class FieldDiffSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The reviewed field (title, description, inputSchema, ...).")
    pinned = serializers.JSONField(allow_null=True)
    offered = serializers.JSONField(allow_null=True)
    lines = serializers.ListField(
        child=serializers.ListField(
            child=serializers.CharField(allow_blank=True), min_length=2, max_length=2
        ),
        help_text='[kind, text]: "-" pinned only, "+" offered only, " " both, "@" a hunk header.',
    )
    overridden = serializers.BooleanField(help_text="The owner changed this field: accepting leaves it.")


def _unreachable(exc: federation.UpstreamError) -> Response:
    return error_response(502, UNREACHABLE, exc.message)


@extend_schema_view(**{a: extend_schema(parameters=[SLUG]) for a in ("list", "create")})
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID]) for a in ("retrieve", "update", "partial_update", "destroy")}
)
class UpstreamViewSet(DefinitionViewSet):
    """Upstream MCP servers whose tools the tenant publishes; owners and editors change them."""

    model = Upstream
    serializer_class = UpstreamSerializer
    search_fields = ["name", "url"]
    filterset_fields = {"name": ["exact"], "enabled": ["exact"], "mode": ["exact"]}

    @extend_schema(
        parameters=[SLUG, ID], request=None, responses={200: OfferingSerializer, 502: ErrorSerializer}
    )
    @action(detail=True, methods=["post"])
    def test(self, request: Request, slug: str, pk: str) -> Response:
        """Ask the upstream what it offers now (Test connection); nothing is published."""
        upstream = self.get_object()
        try:
            offering = service.discover(upstream)
        except federation.UpstreamError as exc:
            return _unreachable(exc)
        return Response(OfferingSerializer(offering).data)

    @extend_schema(
        parameters=[SLUG, ID], request=None, responses={200: SyncReportSerializer, 502: ErrorSerializer}
    )
    @action(detail=True, methods=["post"])
    def sync(self, request: Request, slug: str, pk: str) -> Response:
        """Record the upstream's tools now: new, changed (held for review), gone, back."""
        upstream = self.get_object()
        try:
            # A sync may publish thousands of tools: in a process of its own (AMB-277).
            report = run_apart(service.sync, upstream)
        except federation.UpstreamError as exc:
            return _unreachable(exc)
        return Response(SyncReportSerializer(report).data)

    @extend_schema(
        parameters=[SLUG],
        request=upstream_registry.SearchSerializer,
        responses={200: upstream_registry.SearchResultSerializer, 502: ErrorSerializer},
    )
    @action(detail=False, methods=["post"], url_path="registry-search")
    def registry_search(self, request: Request, slug: str) -> Response:
        """Search a registry (the official one by default): each entry as the upstream it would make (AMB-373)."""
        body = upstream_registry.SearchSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            found = upstream_registry.search(body.validated_data)
        except RegistryError as exc:
            return error_response(502, upstream_registry.UNREACHABLE, exc.message)
        return Response(upstream_registry.SearchResultSerializer(found).data)

    @extend_schema(
        parameters=[SLUG],
        request=upstream_registry.FromRegistrySerializer,
        responses={201: UpstreamSerializer, 502: ErrorSerializer},
    )
    @action(detail=False, methods=["post"], url_path="from-registry")
    def from_registry(self, request: Request, slug: str) -> Response:
        """Add an upstream from a registry's entry (read again from the registry); nothing is published (AMB-373)."""
        body = upstream_registry.FromRegistrySerializer(data=request.data)
        body.is_valid(raise_exception=True)
        try:
            fields = upstream_registry.upstream_fields(body.validated_data)
        except RegistryError as exc:
            return error_response(502, upstream_registry.UNREACHABLE, exc.message)
        serializer = self.get_serializer(data=fields)
        serializer.is_valid(raise_exception=True)
        self.perform_create(serializer)
        return Response(serializer.data, status=status.HTTP_201_CREATED)


ROW = [SLUG, ID]


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    retrieve=extend_schema(parameters=ROW),
    diff=extend_schema(parameters=ROW, responses={200: FieldDiffSerializer(many=True)}),
    publish=extend_schema(
        parameters=ROW, request=PublishSerializer, responses={201: RemoteToolSerializer, 409: ErrorSerializer}
    ),
    unpublish=extend_schema(parameters=ROW, request=None, responses={200: RemoteToolSerializer}),
    accept=extend_schema(
        parameters=ROW, request=None, responses={200: RemoteToolSerializer, 409: ErrorSerializer}
    ),
)
class RemoteToolViewSet(
    TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet
):
    """The tools the tenant's upstreams offer (or offered), as the last sync saw them; filter by upstream."""

    model = UpstreamTool
    serializer_class = RemoteToolSerializer
    filter_backends = [DjangoFilterBackend, filters.OrderingFilter]
    filterset_fields = {"upstream": ["exact"], "remote_name": ["exact"], "tool": ["isnull"]}
    ordering = ["upstream", "remote_name", "id"]
    ordering_fields = ["id", "remote_name", "last_seen_at"]

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("upstream", "tool")

    def _refusal(self, exc: service.UpstreamProblem) -> Response:
        return error_response(409, REFUSED, str(exc))

    @action(detail=True, methods=["get"])
    def diff(self, request: Request, slug: str, pk: str) -> Response:
        """What changed upstream since it was published or last accepted (empty: nothing to review)."""
        row = self.get_object()
        return Response(FieldDiffSerializer(service.diff(row) if row.pending_review else [], many=True).data)

    @action(detail=True, methods=["post"])
    def publish(self, request: Request, slug: str, pk: str) -> Response:
        """Publish the remote tool as a tool of the tenant, pinning what the upstream offers now."""
        row = self.get_object()
        body = PublishSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data: dict[str, Any] = body.validated_data
        try:
            service.publish(
                row, name=data.get("name"), fixed=data["fixed"], approval=data["approval"], user=request.user
            )
        except service.UpstreamProblem as exc:
            return self._refusal(exc)
        return Response(self.get_serializer(self.get_object()).data, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def unpublish(self, request: Request, slug: str, pk: str) -> Response:
        """Take the remote tool out of the tenant's tools (its tool is deleted; history keeps it)."""
        row = self.get_object()
        service.unpublish(row, request.user)
        return Response(self.get_serializer(self.get_object()).data)

    @action(detail=True, methods=["post"])
    def accept(self, request: Request, slug: str, pk: str) -> Response:
        """Apply the upstream's changed definition to the fields of the published tool the owner did not change."""
        row = self.get_object()
        try:
            service.accept(row, request.user)
        except service.UpstreamProblem as exc:
            return self._refusal(exc)
        return Response(self.get_serializer(self.get_object()).data)
