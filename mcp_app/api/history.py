"""A definition's history and its revert through the API (`.../<kind>/<id>/history/`), over mcp_app/history/service.py.

The same service as the admin's history pages: versions newest first with their per-field diffs,
and a revert that goes through full_clean and save (recorded, announced). Any member reads, owners
and editors revert (TenantRole); another tenant's object or version is a 404 like a missing one; a
version that no longer validates or whose name is taken answers 409 with the reason (AMB-61).
"""

from __future__ import annotations

from typing import Any

from django.http import Http404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_app.api.errors import NOT_FOUND, ErrorSerializer, error_response
from mcp_app.api.permissions import TenantRole, tenant_of
from mcp_app.api.views import SLUG
from mcp_app.drafts import service as drafts
from mcp_app.history import service

KIND = OpenApiParameter(
    "kind", str, OpenApiParameter.PATH, enum=list(service.KINDS), description="The kind of definition."
)
ID = OpenApiParameter("id", int, OpenApiParameter.PATH, description="The definition's id.")
HISTORY_ID = OpenApiParameter("history_id", int, OpenApiParameter.PATH, description="The version's id.")


class FieldChangeSerializer(serializers.Serializer):
    name = serializers.CharField(help_text="The field.")
    # A field named like Field.label: DRF's metaclass moves it into _declared_fields (see errors.py).
    label = serializers.CharField(help_text="Its name for people.")  # type: ignore[assignment]
    old = serializers.CharField(allow_blank=True, help_text="The value before (JSON pretty-printed).")
    new = serializers.CharField(allow_blank=True, help_text="The value after (JSON pretty-printed).")
    lines = serializers.ListField(
        child=serializers.ListField(
            child=serializers.CharField(allow_blank=True), min_length=2, max_length=2
        ),
        help_text='The line diff: [kind, text] with kind "-" removed, "+" added, " " context, "@" hunk header.',
    )


class VersionSerializer(serializers.Serializer):
    history_id = serializers.IntegerField(help_text="Names this version in .../history/<history_id>/revert/.")
    object_id = serializers.IntegerField()
    date = serializers.DateTimeField()
    user = serializers.CharField(allow_blank=True, help_text="Who saved it (blank: unknown, e.g. a command).")
    type = serializers.ChoiceField(choices=["created", "changed", "deleted"])
    reason = serializers.CharField(allow_blank=True, help_text='E.g. "Rolled back to version 2 (...) by alice".')
    label = serializers.CharField(help_text="The definition's name at this version.")  # type: ignore[assignment]
    number = serializers.IntegerField(
        help_text="The published version it is (AMB-218); 0: recorded before versions were numbered."
    )
    changes = FieldChangeSerializer(many=True, help_text="What changed since the version before.")


class RevertedSerializer(serializers.Serializer):
    object_id = serializers.IntegerField()
    version = VersionSerializer(help_text="The new version the roll back published.")


class ComparedSerializer(serializers.Serializer):
    changes = FieldChangeSerializer(many=True, help_text="What changed from `from` to `to`.")


def _definition(request: Request, slug: str, kind: str, pk: int) -> Any:
    """The live definition of the URL's tenant, or the API's 404 (an unknown kind likewise)."""
    model = service.KINDS.get(kind)
    tenant = tenant_of(request, slug)[0]
    obj = model.objects.for_tenant(tenant).filter(pk=pk).first() if model is not None else None
    if obj is None:
        raise Http404
    return obj


@extend_schema(parameters=[SLUG, KIND, ID])
class HistoryView(generics.ListAPIView):
    """Every version of one definition, newest first, each with what changed since the one before."""

    permission_classes = [IsAuthenticated, TenantRole]
    serializer_class = VersionSerializer
    filter_backends: list[Any] = []

    # A list, not a QuerySet: DRF's list view and pagination take either.
    def get_queryset(self) -> list[service.Version]:  # type: ignore[override]
        if getattr(self, "swagger_fake_view", False):
            return []
        obj = _definition(self.request, self.kwargs["slug"], self.kwargs["kind"], self.kwargs["pk"])
        return service.versions(type(obj), obj.pk)


@extend_schema(
    parameters=[SLUG, KIND, ID, HISTORY_ID],
    request=None,
    responses={200: RevertedSerializer, 409: ErrorSerializer},
)
class RevertView(APIView):
    """Roll back (owners and editors): publish one version again as the next version, checked like any
    edit, recorded, announced; a draft in progress stays a draft."""

    permission_classes = [IsAuthenticated, TenantRole]

    def post(self, request: Request, slug: str, kind: str, pk: int, history_id: int) -> Response:
        obj = _definition(request, slug, kind, pk)
        try:
            drafts.rollback(obj, history_id, request.user)
        except service.NoSuchVersion:
            return error_response(404, "not_found", NOT_FOUND)
        except service.HistoryError as exc:
            return error_response(409, "conflict", str(exc))
        newest = service.versions(type(obj), obj.pk)[0]
        body = RevertedSerializer({"object_id": obj.pk, "version": newest}).data
        return Response(body, status=status.HTTP_200_OK)


FROM = OpenApiParameter("from", int, OpenApiParameter.QUERY, required=True, description="A version's history id.")
TO = OpenApiParameter("to", int, OpenApiParameter.QUERY, required=True, description="Another version's history id.")


@extend_schema(parameters=[SLUG, KIND, ID, FROM, TO], responses={200: ComparedSerializer, 400: ErrorSerializer})
class CompareView(APIView):
    """What changed between any two versions of one definition (either order)."""

    permission_classes = [IsAuthenticated, TenantRole]

    def get(self, request: Request, slug: str, kind: str, pk: int) -> Response:
        obj = _definition(request, slug, kind, pk)
        try:
            older, newer = int(request.query_params["from"]), int(request.query_params["to"])
        except (KeyError, ValueError):
            return error_response(400, "invalid", 'Give two versions: ?from=<history id>&to=<history id>.')
        try:
            changes = service.between(type(obj), obj.pk, older, newer)
        except service.NoSuchVersion:
            return error_response(404, "not_found", NOT_FOUND)
        return Response(ComparedSerializer({"changes": changes}).data)
