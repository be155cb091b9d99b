"""The API of a tenant's policies (AMB-347) and their simulator (AMB-350): owners write (a draft
with `?draft=true`, published with `publish/`, AMB-362), members read.

As every tenant-scoped API: the URL's tenant's rows only (another tenant's policy is a 404 like a
missing one), every write through `full_clean`, so a condition that cannot be used is a 400 naming why.
`POST policy/simulate/` answers what the one decision says for a described caller, target and
arguments, and that caller's lists, without running anything.
"""

from __future__ import annotations

from typing import Any

from asgiref.sync import async_to_sync
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_app.api.permissions import OWNER_ONLY, TenantRole, tenant_of
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import DRAFT, ID, SLUG, DefinitionViewSet
from mcp_app.catalog.loader import tenant_info
from mcp_app.drafts import trial
from mcp_app.models import Policy
from mcp_app.protocol.simulate import AUTHS, KINDS, SimulatedCaller, SimulationError
from tenants.models import Role


class PolicySerializer(CleanedModelSerializer):
    confirm_no_tools = serializers.BooleanField(
        write_only=True, required=False, default=False,
        help_text="Save though, after this policy, no member of the tenant would have a single tool in its list.",
    )  # fmt: skip

    class Meta:
        model = Policy
        exclude = ("tenant",)
        read_only_fields = ("id", "updated_at", "version", "draft")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        self.confirmed = bool(attrs.pop("confirm_no_tools", False))  # not a column: the check reads it
        return super().validate(attrs)

    def candidate(self, attrs: dict[str, Any]) -> Policy:
        row = super().candidate(attrs)
        assert isinstance(row, Policy)
        row.confirm_no_tools = getattr(self, "confirmed", False)
        return row


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class PolicyViewSet(DefinitionViewSet):
    """Who may use which tool, prompt or resource with which arguments; owners change them, members read."""

    model = Policy
    serializer_class = PolicySerializer
    write_roles = OWNER_ONLY
    search_fields = ["name", "description", "condition"]
    ordering_fields = ["id", "name"]


class CallerSerializer(serializers.Serializer):
    auth = serializers.ChoiceField(choices=AUTHS, default="anonymous")
    user = serializers.IntegerField(required=False, allow_null=True, help_text="A user id.")
    role = serializers.ChoiceField(choices=Role.choices, required=False, allow_blank=True, default="")
    subject = serializers.CharField(required=False, allow_blank=True, max_length=500)
    client_id = serializers.CharField(required=False, allow_blank=True, max_length=200)
    scopes = serializers.ListField(child=serializers.CharField(max_length=200), required=False, max_length=50)
    address = serializers.CharField(required=False, allow_blank=True, max_length=100)
    claims = serializers.DictField(
        required=False, default=dict,
        help_text="An identity provider's token's claims (caller.claims), for auth identity_provider.",
    )  # fmt: skip


class SimulateSerializer(serializers.Serializer):
    caller = CallerSerializer(required=False)
    kind = serializers.ChoiceField(choices=KINDS)
    name = serializers.CharField(
        max_length=2000, help_text="A tool's or prompt's name, a resource's URI, a template's URI template."
    )
    arguments = serializers.DictField(required=False, default=dict)
    with_drafts = serializers.BooleanField(
        required=False, default=False,
        help_text="Decide with the tenant's policies, guardrails and quotas as their drafts would be published.",
    )  # fmt: skip
    sample_result = serializers.CharField(
        required=False, default="", allow_blank=True, max_length=100_000,
        help_text="A result's text: what the guardrails on results would do to it.",
    )  # fmt: skip


class SimulateView(APIView):
    """What the tenant's policies decide for a caller, a target and arguments, and that caller's lists."""

    permission_classes = [IsAuthenticated, TenantRole]

    @extend_schema(parameters=[SLUG], request=SimulateSerializer, responses={200: OpenApiTypes.OBJECT})
    def post(self, request: Request, slug: str) -> Response:
        tenant, _role = tenant_of(request, slug)
        body = SimulateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data: dict[str, Any] = body.validated_data
        given = data.get("caller") or {}
        caller = SimulatedCaller(
            auth=given.get("auth", "anonymous"),
            user_id=given.get("user"),
            role=given.get("role", ""),
            subject=given.get("subject", ""),
            client_id=given.get("client_id", ""),
            scopes=tuple(given.get("scopes", ())),
            address=given.get("address", ""),
            claims=given.get("claims", {}),
        )
        try:
            result = async_to_sync(trial.simulated)(
                tenant_info(tenant), caller, data["kind"], data["name"], data["arguments"], data["sample_result"],
                with_drafts=data["with_drafts"],
            )  # fmt: skip
        except SimulationError as exc:
            raise serializers.ValidationError({"detail": str(exc)}) from None
        return Response(result.as_dict())
