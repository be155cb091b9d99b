"""The API of a tenant's guardrails (AMB-354): owners write, members read.

As every tenant-scoped API: the URL's tenant's rows only (another tenant's guardrail is a 404 like a
missing one), every write through `full_clean`, so a pattern RE2 cannot run is a 400 saying why.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, extend_schema_view

from mcp_app.api.permissions import OWNER_ONLY
from mcp_app.api.serializers import CleanedModelSerializer
from mcp_app.api.views import ID, SLUG, DefinitionViewSet
from mcp_app.models import Guardrail


class GuardrailSerializer(CleanedModelSerializer):
    class Meta:
        model = Guardrail
        exclude = ("tenant",)
        read_only_fields = ("id", "updated_at")


@extend_schema_view(**{a: extend_schema(parameters=[SLUG]) for a in ("list", "create")})
@extend_schema_view(
    **{a: extend_schema(parameters=[SLUG, ID]) for a in ("retrieve", "update", "partial_update", "destroy")}
)
class GuardrailViewSet(DefinitionViewSet):
    """What may flow in and out of the tenant's tools, prompts and resources; owners change them, members read."""

    model = Guardrail
    serializer_class = GuardrailSerializer
    write_roles = OWNER_ONLY
    search_fields = ["name", "description", "pattern", "tool"]
    ordering_fields = ["id", "name"]
