"""The API of a tenant's guardrails (AMB-354): owners write (a draft with `?draft=true`, published
with `publish/`, AMB-362), members read.

As every tenant-scoped API: the URL's tenant's rows only (another tenant's guardrail is a 404 like a
missing one), every write through `full_clean`, so a pattern RE2 cannot run is a 400 saying why.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view

from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import DRAFT, ID, SLUG, DefinitionViewSet
from mcp_app.models import Guardrail


class GuardrailSerializer(CleanedModelSerializer):
    class Meta:
        model = Guardrail
        exclude = ("tenant",)
        read_only_fields = ("id", "updated_at", "version", "draft")


@extend_schema_view(list=extend_schema(parameters=[SLUG]), create=extend_schema(parameters=[SLUG, DRAFT]))
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID, DRAFT]) for a in ("retrieve", "update", "partial_update")},
    destroy=extend_schema(parameters=[SLUG, ID]),
)
class GuardrailViewSet(DefinitionViewSet):
    """What may flow in and out of the tenant's tools, prompts and resources; owners change them, members read."""

    model = Guardrail
    serializer_class = GuardrailSerializer
    write_roles = OWNER_ONLY
    search_fields = ["name", "description", "pattern", "tool"]
    ordering_fields = ["id", "name"]
