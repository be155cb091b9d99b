"""A tenant's service clients in the API (AMB-197): owners make one, list them, revoke one.

Making one is `oauth.service_clients.create`, as the admin and `manage.py service_client` do: the
answer to the POST is the only one that carries the secret. The member it acts as is named by
username and must be a member of this tenant; another tenant's client is a 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from django.db import models
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.views import ID, SLUG, TenantScoped
from mcp_app.oauth import resources, service_clients
from tenants import access
from tenants.models import ServiceClient


class ServiceClientSerializer(serializers.ModelSerializer):
    name = serializers.CharField(source="application.name", read_only=True)
    client_id = serializers.CharField(source="application.client_id", read_only=True)
    acts_as = serializers.CharField(source="application.user.username", read_only=True)
    created_by : serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    audience = serializers.SerializerMethodField(help_text="The MCP endpoint its tokens are for.")

    class Meta:
        model = ServiceClient
        fields: tuple[str, ...] = ("id", "name", "client_id", "acts_as", "scope", "audience", "created_by", "created_at")
        read_only_fields = fields

    def get_audience(self, row: ServiceClient) -> str:
        return resources.canonical_uri(row.tenant.slug)


class MadeSerializer(ServiceClientSerializer):
    client_secret = serializers.CharField(read_only=True, help_text="Shown in this answer only.")
    token_endpoint = serializers.CharField(read_only=True)

    class Meta(ServiceClientSerializer.Meta):
        fields = (*ServiceClientSerializer.Meta.fields, "client_secret", "token_endpoint")
        read_only_fields = fields


class MakeSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=255, help_text="Which program uses it, e.g. 'Nightly CI'.")
    acts_as = serializers.CharField(max_length=150, help_text="The username of the member its tokens act as.")
    scope = serializers.CharField(
        max_length=1000, required=False, allow_blank=True, help_text="Space-separated; blank: the base scopes."
    )


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    create=extend_schema(parameters=[SLUG], request=MakeSerializer, responses={201: MadeSerializer}),
    retrieve=extend_schema(parameters=[SLUG, ID]),
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ServiceClientViewSet(
    TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """Service clients of the tenant (owners only): programs that get its tokens by the client
    credentials grant. POST makes one (its secret in that answer only); DELETE revokes it and its tokens."""

    model = ServiceClient
    serializer_class = ServiceClientSerializer
    read_roles = OWNER_ONLY
    write_roles = OWNER_ONLY

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("application__user", "created_by", "tenant").order_by("-id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = MakeSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        tenant = self.tenant()
        # Looked up among the tenant's members only: a name of another tenant's account answers exactly
        # like one that exists nowhere (AMB-281).
        user = access.member_named(tenant, body.validated_data["acts_as"])
        scope = body.validated_data.get("scope", "")
        why = (
            service_clients.problem(tenant, user, scope)
            if user is not None
            else access.no_member(body.validated_data["acts_as"], tenant)
        )
        if why is not None:
            raise serializers.ValidationError({"acts_as" if "member" in why else "scope": [why]})
        made = service_clients.create(tenant, user, body.validated_data["name"], scope, created_by=request.user)
        out = MadeSerializer(made.row).data
        out |= {"client_secret": made.client_secret, "token_endpoint": resources.issuer() + "/oauth/token"}
        return Response(out, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ServiceClient) -> None:
        service_clients.revoke(instance, self.request.user)
