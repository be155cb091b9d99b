"""The API of a tenant's quotas (AMB-352): owners write (a draft with `?draft=true`, published
with `publish/`, AMB-362), members read.

As every tenant-scoped API: the URL's tenant's rows only (another tenant's quota is a 404 like a
missing one), every write through `full_clean`, so a quota naming no tool of the tenant is a 400.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view

from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import DRAFT, ID, SLUG, DefinitionViewSet
from mcp_app.models import Quota


class QuotaSerializer(CleanedModelSerializer):
    class Meta:
        model = Quota
        exclude = ("tenant",)
        read_only_fields = ("id", "updated_at", "version", "draft")


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class QuotaViewSet(DefinitionViewSet):
    """How many calls of a tool a caller, or everyone, may make per window; owners change them, members read."""

    model = Quota
    serializer_class = QuotaSerializer
    write_roles = OWNER_ONLY
    search_fields = ["name", "description", "tool"]
    ordering_fields = ["id", "name"]
