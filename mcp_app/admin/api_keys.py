"""The admin of API keys (AMB-202): an owner mints one for a headless client, sees it once, revokes it.

Owners only (a key carries a member's access, or the tenant's). Minting goes through
`oauth.api_keys.create`, as `manage.py mcp_key` does; the page that follows shows the key, which is
stored only as a hash and never shown again. A key is not edited: a client that needs another scope
gets another key. Revoking (the list's action) keeps the row, shown as revoked, with its last use.
Another tenant's key answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from mcp_app.oauth import api_keys, resources, scopes
from tenants.admin import TenantScopedAdmin, editable_tenant_ids
from tenants.models import ApiKey, Role

OWNERS = frozenset({Role.OWNER})


class ApiKeyForm(forms.ModelForm):
    """A new key: its tenant, who it acts as, a name, its scope, how long it lasts and where from."""

    acts_as = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        required=False,
        empty_label="The tenant itself (service identity)",
        help_text="The member it acts as: it stops working when that person leaves the tenant.",
    )
    days = forms.IntegerField(
        min_value=1,
        max_value=api_keys.MAX_DAYS,
        initial=api_keys.DEFAULT_DAYS,
        help_text="How long it lasts.",
    )

    class Meta:
        model = ApiKey
        fields = ("tenant", "name", "scope", "allowed_addresses")
        help_texts = {
            "scope": "Space-separated: " + " ".join(scopes.BASE_SCOPES) + " and any of the tenant's tool "
            "scopes. Blank: the base scopes."
        }

    def __init__(self, *args: Any, tenant_ids: set[int] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if "scope" not in self.fields:
            return  # a minted key's read-only page
        self.fields["scope"].required = False
        members = get_user_model().objects.filter(is_active=True, memberships__isnull=False)
        if tenant_ids is not None:
            members = members.filter(memberships__tenant_id__in=tenant_ids)
        self.fields["acts_as"].queryset = members.distinct().order_by("username")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        tenant, days = data.get("tenant"), data.get("days")
        if tenant is not None and days is not None:
            data["scope"] = " ".join(sorted(set((data.get("scope") or "").split()) or scopes.BASE_SCOPES))
            why = api_keys.problem(
                tenant, data.get("acts_as"), data["scope"], days, data.get("allowed_addresses", "")
            )
            if why is not None:
                raise forms.ValidationError(why)
        return data


@admin.register(ApiKey)
class ApiKeyAdmin(TenantScopedAdmin):
    edit_roles = OWNERS
    form = ApiKeyForm
    list_display = ("prefix", "name", "tenant", "acts_as", "scope", "status", "expires_at", "last_used_at")
    list_filter = ("revoked_at",)
    readonly_fields = (
        "prefix", "name", "acts_as", "scope", "allowed_addresses", "status", "expires_at", "last_used_at",
        "revoked_at", "created_by", "created_at",
    )  # fmt: skip
    actions = ("revoke_keys",)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return super().get_queryset(request).select_related("user", "tenant")

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        form = super().get_form(request, obj, change=change, **kwargs)
        tenant_ids = editable_tenant_ids(request, OWNERS)

        class Scoped(form):  # type: ignore[misc,valid-type]
            def __init__(self, *args: Any, **more: Any) -> None:
                super().__init__(*args, tenant_ids=tenant_ids, **more)

        return Scoped

    def get_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        if obj is None:
            return ("tenant", "name", "acts_as", "scope", "days", "allowed_addresses")
        return ("tenant", *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Any = None) -> Any:
        return () if obj is None else ("tenant", *self.readonly_fields)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return obj is None and super().has_change_permission(request, obj)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked, not deleted: the row keeps who made it and when it was last used

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not super().has_change_permission(request):
            actions.pop("revoke_keys", None)
        return actions

    @admin.display(description="acts as")
    def acts_as(self, obj: ApiKey) -> str:
        return obj.acts_as

    @admin.action(description="Revoke the selected API keys")
    def revoke_keys(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        ids = editable_tenant_ids(request, OWNERS)
        if ids is not None and queryset.exclude(tenant_id__in=ids).exists():
            raise PermissionDenied
        rows = list(queryset.filter(revoked_at=None).select_related("tenant"))
        for row in rows:
            api_keys.revoke(row, request.user)
        messages.success(request, f"Revoked {len(rows)} API key(s): they are refused from now on.")

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        ids = editable_tenant_ids(request, OWNERS)
        if change or (ids is not None and obj.tenant_id not in ids):
            raise PermissionDenied
        data = form.cleaned_data
        made = api_keys.create(
            data["tenant"],
            data.get("acts_as"),
            data["name"],
            data["scope"],
            data["days"],
            data.get("allowed_addresses", ""),
            created_by=request.user,
        )
        obj.pk, obj.prefix, obj.created_at = (
            made.row.pk,
            made.row.prefix,
            made.row.created_at,
        )  # what the admin logs
        request._api_key_made = made  # type: ignore[attr-defined]  # for response_add, this request only

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        made = request._api_key_made  # type: ignore[attr-defined]
        context = {
            **self.admin_site.each_context(request),
            "title": "API key made",
            "opts": self.model._meta,
            "made": made,
            "endpoint": resources.canonical_uri(made.row.tenant.slug),
        }
        return TemplateResponse(request, "admin/tenants/apikey/made.html", context)
