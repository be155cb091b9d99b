"""The API's views of tenants themselves: the caller's tenants, a tenant's settings, members, clients.

Members read all of it; only owners (and superusers) change settings and members or revoke a
client, as in the admin. Settings never touch `definitions_version` (a definition saved meanwhile may
have bumped it) nor the slug (the endpoint URL every configured client uses).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import models, transaction
from django.db.models.functions import Coalesce
from drf_spectacular.utils import extend_schema, extend_schema_view
from oauth2_provider.models import (
    get_access_token_model,
    get_application_model,
    get_grant_model,
    get_refresh_token_model,
)
from rest_framework import generics, mixins, serializers, status, viewsets
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response

from audit.models import Action
from audit.trail import record
from mcp_app.api import invitations as api_invitations
from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import ID, SLUG, TenantScoped
from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.oauth import external_tokens, resources
from tenants import access, identity_provider
from tenants.models import Membership, Role, Tenant


def mcp_url(tenant: Tenant) -> str:
    return f"{settings.MCP_PUBLIC_URL}/t/{tenant.slug}/mcp"


class TenantSummarySerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="Your role in this tenant.")
    mcp_url = serializers.SerializerMethodField()

    class Meta:
        model = Tenant
        fields = ("slug", "name", "title", "is_active", "auth_mode", "role", "mcp_url")
        read_only_fields = fields

    def get_role(self, tenant: Tenant) -> str:
        roles = self.context["roles"]
        return Role.OWNER if roles is None else roles.get(tenant.pk, "")

    def get_mcp_url(self, tenant: Tenant) -> str:
        return mcp_url(tenant)


class TenantListView(generics.ListAPIView):
    """The tenants you belong to, with your role in each (a superuser: every tenant, as owner)."""

    serializer_class = TenantSummarySerializer
    permission_classes = [IsAuthenticated]

    def get_queryset(self) -> models.QuerySet:
        ids = access.tenant_ids_for(self.request.user)
        tenants = Tenant.objects.order_by("slug")
        return tenants if ids is None else tenants.filter(pk__in=ids)

    def get_serializer_context(self) -> dict[str, Any]:
        return {**super().get_serializer_context(), "roles": access.roles_of(self.request.user)}


class TenantSettingsSerializer(CleanedModelSerializer):
    mcp_url = serializers.SerializerMethodField()
    identity_client_secret = serializers.CharField(
        write_only=True,
        required=False,
        allow_null=True,
        trim_whitespace=False,
        max_length=4096,
        help_text="The secret of `identity.client_id`, the introspection client (AMB-203), stored encrypted "
        "and never returned: a value replaces it, absent or null keeps it. Dropped with introspection_url.",
    )
    identity_client_secret_set = serializers.SerializerMethodField(
        help_text="Whether the identity provider's introspection client secret is stored."
    )

    class Meta:
        model = Tenant
        exclude = ("id",)
        read_only_fields = ("slug", "definitions_version", "created_at", "updated_at")

    def get_mcp_url(self, tenant: Tenant) -> str:
        return mcp_url(tenant)

    def get_identity_client_secret_set(self, tenant: Tenant) -> bool:
        return bool(tenant.identity_client_secret)

    def candidate(self, attrs: dict[str, Any]) -> models.Model:
        row = self.instance
        assert row is not None, "a tenant's settings are changed, never created, here"
        for name, value in attrs.items():
            if name != "identity_client_secret":
                setattr(row, name, value)
        return row

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        identity_after = attrs.get("identity", self.instance.identity if self.instance else {})
        held = bool(
            attrs.get("identity_client_secret") or (self.instance and self.instance.identity_client_secret)
        )
        if refused := external_tokens.unreachable_urls(identity_after):
            raise serializers.ValidationError({"identity": refused})
        if identity_provider.needs_secret(identity_after) and not held:
            raise serializers.ValidationError(
                {
                    "identity_client_secret": [
                        "The introspection client's secret is required with introspection_url."
                    ]
                }
            )
        return attrs

    def update(self, instance: Tenant, validated: dict[str, Any]) -> Tenant:
        secret = validated.pop("identity_client_secret", None)
        if secret:
            instance.identity_client_secret = encrypt_secrets({"client_secret": secret})
        if not identity_provider.needs_secret(validated.get("identity", instance.identity)):
            instance.identity_client_secret = ""  # no introspection, no secret of its client kept
        for name, value in validated.items():
            setattr(instance, name, value)
        skip = {"id", "slug", "definitions_version", "created_at"}
        instance.save(update_fields=[f.name for f in Tenant._meta.concrete_fields if f.name not in skip])
        return instance


@extend_schema_view(get=extend_schema(parameters=[SLUG]), put=extend_schema(parameters=[SLUG]),
                    patch=extend_schema(parameters=[SLUG]))  # fmt: skip
class TenantSettingsView(TenantScoped, generics.RetrieveUpdateAPIView):
    """A tenant's settings (serverInfo, instructions, auth mode, origins, caching, tasks); owners edit."""

    model = Tenant
    serializer_class = TenantSettingsSerializer
    write_roles = OWNER_ONLY

    def get_object(self) -> Tenant:
        return self.tenant()


# --- Members -------------------------------------------------------------------------------------


class MembershipSerializer(serializers.ModelSerializer):
    username: serializers.Field = serializers.SlugRelatedField(
        source="user", slug_field="username", queryset=get_user_model().objects.all(),
        help_text="Username of an existing account (fixed once the membership exists); "
        "superusers only when adding: owners invite an e-mail address.",
    )  # fmt: skip

    class Meta:
        model = Membership
        fields = ("id", "username", "role", "granted_by")
        # How it came to be (AMB-213): single sign-on takes back only its own.
        read_only_fields = ("id", "granted_by")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        tenant = self.context["tenant"]
        user = attrs.get("user")
        if self.instance is not None:
            if user is not None and user != self.instance.user:
                raise serializers.ValidationError({"username": ["A membership's user cannot change."]})
            if (
                self.instance.role == Role.OWNER
                and attrs.get("role", Role.OWNER) != Role.OWNER
                and last_owner(self.instance)
            ):
                raise serializers.ValidationError(
                    {"role": ["A tenant keeps at least one owner: make someone else owner first."]}
                )
        elif Membership.objects.filter(tenant=tenant, user=user).exists():
            raise serializers.ValidationError({"username": ["This user is already a member."]})
        return attrs


class MembershipChangeSerializer(MembershipSerializer):
    """A membership's change: its username is checked against the member's own, never looked up, so
    a name another account has answers like one nobody has (AMB-281)."""

    username = serializers.CharField(
        source="user.username", max_length=150, required=False,
        help_text="The member's username (fixed once the membership exists).",
    )  # fmt: skip

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        named = attrs.pop("user", {}).get("username")
        instance = self.instance  # a change: the membership exists
        if named is not None and instance is not None and named != instance.user.get_username():
            raise serializers.ValidationError({"username": ["A membership's user cannot change."]})
        return super().validate(attrs)


DIRECT_ONLY_FOR_SUPERUSERS = (
    "Only a superuser adds an account directly: invite its e-mail address instead (email)."
)


class MemberAddSerializer(serializers.Serializer):
    """Either `email` (an invitation: owners) or `username` (an account attached at once: superusers)."""

    email = serializers.EmailField(
        max_length=254,
        required=False,
        help_text="Invite this address (AMB-109): answered 202 with the invitation.",
    )
    username = serializers.CharField(
        max_length=150, required=False, help_text="Superusers only: attach this account now (201)."
    )
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if ("email" in attrs) == ("username" in attrs):
            raise serializers.ValidationError(
                "Give either email (an invitation) or username (superusers only)."
            )
        return attrs


def last_owner(membership: Membership) -> bool:
    """The admin's rule: the tenant's only owner can be neither demoted nor removed."""
    others = Membership.objects.filter(tenant_id=membership.tenant_id, role=Role.OWNER).exclude(
        pk=membership.pk
    )
    return membership.role == Role.OWNER and not others.exists()


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    create=extend_schema(
        parameters=[SLUG],
        request=MemberAddSerializer,
        responses={
            201: MembershipSerializer,
            202: api_invitations.InvitationSerializer,
            **api_invitations.REFUSALS,
        },
    ),
)
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID]) for a in ("retrieve", "update", "partial_update", "destroy")}
)
class MembershipViewSet(TenantScoped, viewsets.ModelViewSet):
    """Who belongs to the tenant; owners invite, change and remove members (never the last owner)."""

    model = Membership
    serializer_class = MembershipSerializer
    write_roles = OWNER_ONLY

    def get_queryset(self) -> models.QuerySet:
        if getattr(self, "swagger_fake_view", False):
            return Membership.objects.none()
        return Membership.objects.filter(tenant=self.tenant()).select_related("user").order_by("id")

    def get_serializer_class(self) -> type[serializers.BaseSerializer]:
        if self.action in ("update", "partial_update"):
            return MembershipChangeSerializer
        return MembershipSerializer

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        """Owners invite an address (202, the invitation); superusers may attach an account (201)."""
        body = MemberAddSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        if "username" in body.validated_data:
            if access.roles_of(request.user) is not None:
                # The same words whether or not the username exists: no account oracle (AMB-109).
                raise serializers.ValidationError({"username": [DIRECT_ONLY_FOR_SUPERUSERS]})
            return super().create(request, *args, **kwargs)
        data = body.validated_data
        invitation = api_invitations.invite(self.tenant(), data["email"], data["role"], request.user)
        return Response(
            api_invitations.InvitationSerializer(invitation).data, status=status.HTTP_202_ACCEPTED
        )

    def perform_create(self, serializer: serializers.BaseSerializer) -> None:
        serializer.save(tenant=self.tenant())

    def perform_destroy(self, instance: Membership) -> None:
        if last_owner(instance):
            raise serializers.ValidationError(
                "A tenant keeps at least one owner: make someone else owner first."
            )
        instance.delete()


# --- OAuth clients -------------------------------------------------------------------------------


def _bound_to(slug: str) -> dict[str, str]:
    # The audience list as JSON text contains the quoted canonical URI (exact: "/t/a/mcp" never
    # matches "/t/a/mcp2"); this lookup works on PostgreSQL and SQLite alike.
    return {"resource__icontains": f'"{resources.canonical_uri(slug)}"'}


class ClientSerializer(serializers.ModelSerializer):
    live_tokens = serializers.IntegerField(read_only=True, help_text="Access tokens for this tenant.")

    class Meta:
        model = get_application_model()
        fields = ("id", "client_id", "name", "client_type", "registration_source", "created", "live_tokens")
        read_only_fields = fields


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    retrieve=extend_schema(parameters=[SLUG, ID]),
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class ClientViewSet(
    TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):  # fmt: skip
    """OAuth clients holding tokens or grants for this tenant's MCP endpoint (clients are global: one
    authorization server). DELETE revokes what the client holds for this tenant only."""

    serializer_class = ClientSerializer
    write_roles = OWNER_ONLY

    def get_queryset(self) -> models.QuerySet:
        application = get_application_model()
        if getattr(self, "swagger_fake_view", False):
            return application.objects.none()
        bound = _bound_to(self.tenant().slug)
        ids = set()
        for model in (get_access_token_model(), get_grant_model()):
            ids |= set(model.objects.filter(**bound).values_list("application_id", flat=True))
        access_tokens = get_access_token_model().objects.filter(application=models.OuterRef("pk"), **bound)
        live = access_tokens.values("application").annotate(n=models.Count("pk")).values("n")
        return (
            application.objects.filter(pk__in=ids)
            .annotate(live_tokens=Coalesce(models.Subquery(live), 0))
            .order_by("-created")
        )

    def perform_destroy(self, instance: Any) -> None:
        bound = _bound_to(self.tenant().slug)
        with transaction.atomic():
            refresh, _ = get_refresh_token_model().objects.filter(application=instance, **bound).delete()
            access, _ = get_access_token_model().objects.filter(application=instance, **bound).delete()
            get_grant_model().objects.filter(application=instance, **bound).delete()
            detail = {"access_tokens": access, "refresh_tokens": refresh}
            record(Action.CONSENT_REVOKED, tenant=self.tenant(), client_id=instance.client_id, detail=detail)
