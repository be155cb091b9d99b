"""The API of a tenant's OAuth providers for connected accounts (AMB-207): owners write, members read.

As the upstreams' API: the URL's tenant's rows only (another tenant's provider is a 404 like a
missing one), every write through `full_clean`. The client secret is write-only (`client_secret`;
reads give `client_secret_set`); `connected` counts the people connected, never their tokens.
"""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers

from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import ID, SLUG, DefinitionViewSet
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.models import Provider


class ProviderSerializer(CleanedModelSerializer):
    client_secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_null=True,
        allow_blank=True,
        trim_whitespace=False,
        max_length=4096,
        help_text='Stored encrypted and never returned: a value replaces it, "" removes it (a public '
        "client), absent or null keeps it.",
    )
    client_secret_set = serializers.SerializerMethodField(help_text="Whether a client secret is stored.")
    connected = serializers.SerializerMethodField(help_text="How many people have connected an account.")
    redirect_uri = serializers.SerializerMethodField(
        help_text="The redirect URI to register at the provider."
    )

    class Meta:
        model = Provider
        exclude = ("tenant",)
        read_only_fields = ("id", "created_at")

    def get_redirect_uri(self, row: Provider) -> str:
        return row.callback_url()

    def get_client_secret_set(self, row: Provider) -> bool:
        return bool(row.client_secret)

    def get_connected(self, row: Provider) -> int:
        return row.connections.count()

    def candidate(self, attrs: dict[str, Any]) -> Any:
        return super().candidate({k: v for k, v in attrs.items() if k != "client_secret"})

    def _sealed(self, validated: dict[str, Any]) -> dict[str, Any]:
        secret = validated.pop("client_secret", None)
        if secret is not None:
            validated["client_secret"] = encrypt_secrets({"client_secret": secret}) if secret else ""
        return validated

    def create(self, validated: dict[str, Any]) -> Provider:
        return super().create(self._sealed(validated))

    def update(self, instance: Provider, validated: dict[str, Any]) -> Provider:
        return super().update(instance, self._sealed(validated))


@extend_schema_view(**{a: extend_schema(parameters=[SLUG]) for a in ("list", "create")})
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID]) for a in ("retrieve", "update", "partial_update", "destroy")}
)
class ProviderViewSet(DefinitionViewSet):
    """OAuth providers whose accounts the tenant's people connect; owners change them, members read."""

    model = Provider
    serializer_class = ProviderSerializer
    write_roles = OWNER_ONLY
    search_fields = ["name", "display_name"]
    ordering_fields = ["id", "name"]
    filterset_fields = {"name": ["exact"]}
