"""What the admin of owner-minted credentials shares (service clients AMB-197, API keys AMB-202).

Both are made once by an owner, acting as a member the owner picks, shown once on the page after Add
and never edited: the form offers only active members of the tenants the owner may edit, and the
saved row is read-only. Another tenant's row answers 404 like a missing one (TenantScopedAdmin).
"""

from __future__ import annotations

from typing import Any, cast

from django import forms
from django.contrib.auth import get_user_model
from django.http import HttpRequest

from mcp_app.oauth import scopes
from tenants.admin import TenantScopedAdmin, editable_tenant_ids
from tenants.models import Role

OWNERS = frozenset({Role.OWNER})
SCOPE_HELP = (
    "Space-separated: " + " ".join(scopes.BASE_SCOPES) + " and any of the tenant's tool scopes. "
    "Blank: the base scopes."
)


def chosen_scope(data: dict[str, Any]) -> str:
    """The form's scope, sorted, or the base scopes when left blank."""
    return " ".join(sorted(set((data.get("scope") or "").split()) or scopes.BASE_SCOPES))


class MintForm(forms.ModelForm):
    """A new credential's form: `acts_as` among the members of the owner's tenants, `scope` optional."""

    def __init__(self, *args: Any, tenant_ids: set[int] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "scope" not in self.fields:
            return  # a minted row's read-only page
        self.fields["scope"].required = False
        members = get_user_model().objects.filter(is_active=True, memberships__isnull=False)
        if tenant_ids is not None:
            members = members.filter(memberships__tenant_id__in=tenant_ids)
        # The user ForeignKey: a ModelChoiceField.
        cast(forms.ModelChoiceField, self.fields["acts_as"]).queryset = members.distinct().order_by(
            "username"
        )


class MintAdmin(TenantScopedAdmin):
    """Owners add; nobody edits; `add_fields` on the add page, `readonly_fields` once saved."""

    edit_roles = OWNERS
    add_fields: tuple[str, ...] = ()

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        tenant_ids = editable_tenant_ids(request, OWNERS)

        base: Any = form  # the form class ModelAdmin made: a base only known at run time

        class Scoped(base):
            def __init__(self, *args: Any, **more: Any) -> None:
                super().__init__(*args, tenant_ids=tenant_ids, **more)

        return Scoped

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return self.add_fields if obj is None else ("tenant", *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else ("tenant", *self.readonly_fields)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and self.owns(request, obj)

    def owns(self, request: HttpRequest, obj: Any = None) -> bool:
        """Whether the user is an owner of the row's tenant (or of one, with no row): who may revoke."""
        return super().has_change_permission(request, obj)
