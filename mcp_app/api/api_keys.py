"""A tenant's API keys in the API (AMB-202): owners mint one, list them, revoke one.

Minting is `oauth.api_keys.create`, as the admin and `manage.py mcp_key` do: the answer to the POST is
the only one that carries the key. A key acts as a member (named by username) or, with `acts_as`
left out, as the tenant itself. DELETE revokes it (the row stays, shown as revoked); another tenant's
key is a 404 like a missing one.
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
from mcp_app.oauth import api_keys, resources
from tenants import access
from tenants.models import ApiKey


class ApiKeySerializer(serializers.ModelSerializer):
    acts_as = serializers.SerializerMethodField(help_text="A member's username, or null: the tenant itself.")
    allowed_addresses = serializers.SerializerMethodField(help_text="Networks it may come from; empty: any.")
    status = serializers.CharField(read_only=True, help_text="active, expired or revoked.")
    created_by: serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = ApiKey
        fields: tuple[str, ...] = (
            "id", "name", "prefix", "acts_as", "scope", "allowed_addresses", "expires_at", "status",
            "last_used_at", "revoked_at", "created_by", "created_at",
        )  # fmt: skip
        read_only_fields = fields

    def get_acts_as(self, row: ApiKey) -> str | None:
        return row.user.get_username() if row.user is not None else None

    def get_allowed_addresses(self, row: ApiKey) -> list[str]:
        return row.allowed_addresses.split()


class MintedKeySerializer(ApiKeySerializer):
    key = serializers.CharField(read_only=True, help_text="Shown in this answer only.")
    endpoint = serializers.CharField(read_only=True, help_text="Send the key there as Authorization: Bearer.")

    class Meta(ApiKeySerializer.Meta):
        fields = (*ApiKeySerializer.Meta.fields, "key", "endpoint")
        read_only_fields = fields


class MintSerializer(serializers.Serializer):
    name = serializers.CharField(max_length=100, help_text="What uses it, e.g. 'Nightly CI'.")
    acts_as = serializers.CharField(
        max_length=150, required=False, allow_blank=True,
        help_text="The username of the member it acts as; left out: the tenant itself.",
    )  # fmt: skip
    scope = serializers.CharField(
        max_length=1000,
        required=False,
        allow_blank=True,
        help_text="Space-separated; blank: the base scopes.",
    )
    days = serializers.IntegerField(
        required=False, default=api_keys.DEFAULT_DAYS, min_value=1, max_value=api_keys.MAX_DAYS
    )
    allowed_addresses = serializers.ListField(
        child=serializers.CharField(max_length=64), required=False, default=list,
        max_length=api_keys.MAX_ADDRESSES, help_text="Addresses or networks (CIDR); empty: any.",
    )  # fmt: skip


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    create=extend_schema(parameters=[SLUG], request=MintSerializer, responses={201: MintedKeySerializer}),
    retrieve=extend_schema(parameters=[SLUG, ID]),
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ApiKeyViewSet(
    TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """API keys of the tenant (owners only) for headless clients. POST mints one (the key in that
    answer only); DELETE revokes it."""

    model = ApiKey
    serializer_class = ApiKeySerializer
    read_roles = OWNER_ONLY
    write_roles = OWNER_ONLY

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("user", "created_by").order_by("-id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = MintSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        tenant = self.tenant()
        user = None
        if data.get("acts_as"):
            # Looked up among the tenant's members only: a name of another tenant's account answers
            # exactly like one that exists nowhere (AMB-281).
            user = access.member_named(tenant, data["acts_as"])
            if user is None:
                raise serializers.ValidationError({"acts_as": [access.no_member(data["acts_as"], tenant)]})
        addresses = "\n".join(data["allowed_addresses"])
        why = api_keys.problem(tenant, user, data.get("scope", ""), data["days"], addresses)
        if why is not None:
            field = "acts_as" if "member" in why else "allowed_addresses" if "address" in why else "scope"
            raise serializers.ValidationError({field: [why]})
        made = api_keys.create(
            tenant,
            user,
            data["name"],
            data.get("scope", ""),
            data["days"],
            addresses,
            created_by=request.user,
        )
        out = MintedKeySerializer(made.row).data
        out |= {"key": made.key, "endpoint": resources.canonical_uri(tenant.slug)}
        return Response(out, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiKey) -> None:
        api_keys.revoke(instance, self.request.user)
