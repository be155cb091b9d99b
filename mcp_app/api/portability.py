"""Export, import (dry run, prune) and OpenAPI import of a tenant through the API (mcp_app/portability/).

``GET …/export`` answers the tenant document as JSON; ``POST …/import`` takes one as its body and
answers what changed (or, with ``dry_run``, what would); ``POST …/import-openapi`` turns the chosen
operations of an OpenAPI description into http tools. Owners and editors only (an editor's import
may not change the tenant's settings); a document's problems answer 400 with ``fields`` mapping
each document path to its messages, the API's one error shape.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.exceptions import ParseError, PermissionDenied
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from mcp_app.api.errors import ErrorSerializer, error_response
from mcp_app.api.parsers import BodyUnreadable, BoundedJSONParser, DeferredJSONParser, JSONBody
from mcp_app.api.permissions import TenantRole, tenant_of
from mcp_app.api.views import SLUG
from mcp_app.catalog.apart import run_apart
from mcp_app.portability.document import DocumentError, export_tenant
from mcp_app.portability.importer import import_document
from mcp_app.portability.openapi import Description, OpenApiError, parse
from mcp_app.portability.openapi_tools import Settings, fetch, import_operations, read
from tenants.models import EDIT_ROLES, Role

DRY_RUN = OpenApiParameter("dry_run", bool, description="Only check and say what would change.")
PRUNE = OpenApiParameter("prune", bool, description="Delete the definitions the document does not have.")

PlanSerializer = inline_serializer(
    "ImportPlan",
    {
        "tenant": serializers.CharField(),
        "applied": serializers.BooleanField(help_text="False for a dry run."),
        "counts": serializers.DictField(
            child=serializers.IntegerField(), help_text="create, change, delete, unchanged."
        ),
        "settings_changed": serializers.ListField(child=serializers.CharField()),
        "changes": serializers.ListField(
            child=serializers.DictField(), help_text="{kind, key, action, fields?}"
        ),
        "missing_secrets": serializers.ListField(
            child=serializers.DictField(child=serializers.CharField()),
            help_text="{tool, secret}: secret headers a tool needs and does not have.",
        ),
        "missing_upstream_secrets": serializers.ListField(
            child=serializers.DictField(child=serializers.CharField()),
            help_text="{upstream, secret}: secret headers an upstream server needs and does not have.",
        ),
    },
)


class OpenApiImportSerializer(serializers.Serializer):
    document = serializers.JSONField(
        required=False, help_text="The OpenAPI 3.0/3.1 description: an object, or its YAML or JSON text."
    )
    url = serializers.URLField(required=False, help_text="Or where to fetch it (through the SSRF guard).")
    operations = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text='Operations to import, as "GET /pets/{petId}"; every importable one when left out.',
    )
    base_url = serializers.CharField(
        required=False, allow_blank=True, help_text="Default: the first server URL."
    )
    timeout = serializers.FloatField(required=False, default=30.0, min_value=0.001, max_value=300)
    auth_header = serializers.CharField(required=False, allow_blank=True, default="")
    auth_value = serializers.CharField(
        required=False, allow_blank=True, default="", write_only=True, help_text="Stored encrypted."
    )
    dry_run = serializers.BooleanField(required=False, default=False, help_text="Only list the operations.")


OpenApiOutcomeSerializer = inline_serializer(
    "OpenApiImportOutcome",
    {
        "operations": serializers.ListField(
            child=serializers.DictField(), help_text="{key, name, supported, reason} of every operation."
        ),
        "created": serializers.ListField(child=serializers.CharField()),
        "updated": serializers.ListField(child=serializers.CharField()),
        "unchanged": serializers.ListField(child=serializers.CharField()),
    },
)


def _flag(request: Request, name: str) -> bool:
    return str(request.query_params.get(name, "")).lower() in ("1", "true", "yes", "on")


def _editor_role(request: Request, slug: str) -> tuple[Any, str]:
    tenant, role = tenant_of(request, slug)
    if role not in EDIT_ROLES:
        raise PermissionDenied(f"Your role in this tenant is {role}: this needs the role editor or owner.")
    return tenant, role


def _invalid(problems: list[tuple[str, str]], message: str) -> Response:
    fields: dict[str, list[str]] = {}
    for path, text in problems:
        fields.setdefault(path, []).append(text)
    return error_response(status.HTTP_400_BAD_REQUEST, "invalid", message, fields)


class ExportView(APIView):
    """The tenant's whole definition set as one document (secrets by name only)."""

    permission_classes = [IsAuthenticated, TenantRole]

    @extend_schema(parameters=[SLUG], responses={200: OpenApiTypes.OBJECT})
    def get(self, request: Request, slug: str) -> Response:
        tenant, _role = _editor_role(request, slug)
        return Response(export_tenant(tenant))


def _import_body(tenant: Any, body: Any, **options: Any) -> Any:
    """``import_document`` of a body the API read but did not parse (parsers.DeferredJSONParser): parsed
    here, in the work's own process."""
    return import_document(tenant, body.parse() if isinstance(body, JSONBody) else body, **options)


class ImportView(APIView):
    """Import a tenant document: all checked first, one transaction, only what differs is written."""

    permission_classes = [IsAuthenticated, TenantRole]
    # Read here, parsed and checked in the import's own process: a document of a megabyte costs this
    # server's loop no parse (AMB-277, issue 34).
    parser_classes = [DeferredJSONParser]

    @extend_schema(
        parameters=[SLUG, DRY_RUN, PRUNE],
        request=OpenApiTypes.OBJECT,
        responses={200: PlanSerializer, 400: ErrorSerializer},
    )
    def post(self, request: Request, slug: str) -> Response:
        tenant, role = _editor_role(request, slug)
        try:
            # Thousands of rows checked and written: in a process of its own, not this server's (AMB-277).
            plan = run_apart(
                partial(
                    _import_body,
                    tenant,
                    request.data,
                    prune=_flag(request, "prune"),
                    dry_run=_flag(request, "dry_run"),
                    user=request.user,
                    may_change_settings=role == Role.OWNER,
                )
            )
        except BodyUnreadable as exc:
            raise ParseError(str(exc)) from None
        except DocumentError as exc:
            return _invalid(exc.problems, "The document cannot be imported; nothing was changed.")
        return Response(plan.as_dict())


class ImportOpenApiView(APIView):
    """One http tool per chosen operation of an OpenAPI description (created, or updated by name)."""

    permission_classes = [IsAuthenticated, TenantRole]
    parser_classes = [BoundedJSONParser]

    @extend_schema(
        parameters=[SLUG],
        request=OpenApiImportSerializer,
        responses={200: OpenApiOutcomeSerializer, 400: ErrorSerializer},
    )
    def post(self, request: Request, slug: str) -> Response:
        tenant, _role = _editor_role(request, slug)
        given = OpenApiImportSerializer(data=request.data)
        given.is_valid(raise_exception=True)
        data = given.validated_data
        try:
            description = self._description(data)
        except OpenApiError as exc:
            return _invalid([("document", str(exc))], str(exc))
        body: dict[str, Any] = {
            "operations": [
                {"key": op.key, "name": op.name, "supported": op.supported, "reason": op.reason}
                for op in description.operations
            ],
            "created": [],
            "updated": [],
            "unchanged": [],
        }
        if data["dry_run"]:
            return Response(body)
        keys = data.get("operations") or [op.key for op in description.operations if op.supported]
        settings = Settings(
            data.get("base_url") or (description.servers or [""])[0],
            data["timeout"],
            data["auth_header"] if data["auth_value"] else "",
            data["auth_value"],
        )
        try:
            outcome = run_apart(import_operations, tenant, description, keys, settings, request.user)
        except DocumentError as exc:
            return _invalid(exc.problems, "The operations cannot be imported; nothing was changed.")
        return Response({**body, **outcome.as_dict()})

    def _description(self, data: dict[str, Any]) -> Description:
        document = data.get("document")
        if document is None and data.get("url"):
            raw, source = fetch(data["url"])
            return read(raw, source)
        if isinstance(document, str):
            return read(document)
        if document is None:
            raise OpenApiError("Give the OpenAPI document, or its url.")
        return parse(document)
