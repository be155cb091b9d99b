"""A tenant's invitations in the API (AMB-109): owners invite an address, list and revoke invitations.

Inviting is tenants.invitations.invite, as in the admin: its answer is the same whether or not the
address has an account. Only owners see invitations (they hold people's addresses).
"""

from __future__ import annotations

from typing import Any, cast

import django_filters
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import exceptions, mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from mcp_app.api.errors import ErrorSerializer, error_response
from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.views import ID, SLUG, TenantScoped
from tenants import invitations
from tenants.models import Invitation, InvitationQuerySet, Role, Tenant

# The statuses an invitation call may answer besides the shared ones (mcp_app/api/schema.py).
REFUSALS = {429: ErrorSerializer, 503: ErrorSerializer}


class InvitationSerializer(serializers.ModelSerializer):
    status = serializers.ChoiceField(choices=Invitation.Status.choices, read_only=True)
    invited_by : serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    accepted_by : serializers.SlugRelatedField[Any] = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )

    class Meta:
        model = Invitation
        fields = (
            "id", "email", "role", "status", "invited_by", "created_at", "expires_at",
            "accepted_at", "accepted_by", "revoked_at",
        )  # fmt: skip
        read_only_fields = fields


class InviteSerializer(serializers.Serializer):
    email = serializers.EmailField(max_length=254, help_text="The address to invite; no account is looked up.")
    role = serializers.ChoiceField(choices=Role.choices, default=Role.VIEWER)


def invite(tenant: Tenant, email: str, role: str, user: Any) -> Invitation:
    """tenants.invitations.invite with its refusals in the API's error shape (400, 429, 503)."""
    try:
        return invitations.invite(tenant, email, role, user)
    except invitations.AlreadyPending as exc:
        raise serializers.ValidationError({"email": [exc.message]}) from None
    except invitations.TooManyInvitations as exc:
        raise exceptions.Throttled(wait=exc.retry_after, detail=exc.message) from None
    except invitations.NotSent as exc:
        raise Unavailable(exc.message) from None


class Unavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_code = "unavailable"


class InvitationFilter(django_filters.FilterSet):
    status = django_filters.ChoiceFilter(choices=Invitation.Status.choices, method="by_status")

    class Meta:
        model = Invitation
        fields = ("status", "role")

    def by_status(self, queryset: models.QuerySet, name: str, value: str) -> models.QuerySet:
        return cast(InvitationQuerySet, queryset).with_status(value)  # the view's Invitation rows


@extend_schema_view(
    list=extend_schema(parameters=[SLUG]),
    create=extend_schema(parameters=[SLUG], request=InviteSerializer, responses={201: InvitationSerializer, **REFUSALS}),
    retrieve=extend_schema(parameters=[SLUG, ID]),
    revoke=extend_schema(parameters=[SLUG, ID], request=None, responses={200: InvitationSerializer, 409: ErrorSerializer}),
)  # fmt: skip
class InvitationViewSet(
    TenantScoped, mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.CreateModelMixin, viewsets.GenericViewSet
):  # fmt: skip
    """Invitations of the tenant, newest first (owners only); POST invites an address, `revoke` withdraws one."""

    model = Invitation
    serializer_class = InvitationSerializer
    read_roles = OWNER_ONLY
    write_roles = OWNER_ONLY
    filter_backends = [DjangoFilterBackend]
    filterset_class = InvitationFilter

    def get_queryset(self) -> models.QuerySet:
        return super().get_queryset().select_related("invited_by", "accepted_by").order_by("-created_at", "-id")

    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        body = InviteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        invitation = invite(self.tenant(), body.validated_data["email"], body.validated_data["role"], request.user)
        return Response(InvitationSerializer(invitation).data, status=status.HTTP_201_CREATED)

    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, slug: str, pk: str) -> Response:
        """Withdraw a pending invitation: its link then says so. 409 once accepted, revoked or expired."""
        try:
            invitation = invitations.revoke(self.get_object())
        except invitations.NotPending as exc:
            return error_response(409, "conflict", exc.message)
        return Response(InvitationSerializer(invitation).data)
