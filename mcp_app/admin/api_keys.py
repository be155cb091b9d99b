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

from mcp_app.admin.minting import OWNERS, SCOPE_HELP, MintAdmin, MintForm, chosen_scope
from mcp_app.oauth import api_keys, resources
from tenants.admin import editable_tenant_ids
from tenants.models import ApiKey


class ApiKeyForm(MintForm):
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
        help_texts = {"scope": SCOPE_HELP}

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        tenant, days = data.get("tenant"), data.get("days")
        if tenant is not None and days is not None:
            data["scope"] = chosen_scope(data)
            why = api_keys.problem(
                tenant, data.get("acts_as"), data["scope"], days, data.get("allowed_addresses", "")
            )
            if why is not None:
                raise forms.ValidationError(why)
        return data


@admin.register(ApiKey)
class ApiKeyAdmin(MintAdmin):
    form = ApiKeyForm
    add_fields = ("tenant", "name", "acts_as", "scope", "days", "allowed_addresses")
    list_display = ("prefix", "name", "tenant", "acts_as", "scope", "status", "expires_at", "last_used_at")
    list_filter = ("revoked_at",)
    readonly_fields = (
        "prefix", "name", "acts_as", "scope", "allowed_addresses", "status", "expires_at", "last_used_at",
        "revoked_at", "created_by", "created_at",
    )  # fmt: skip
    actions = ("revoke_keys",)

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return super().get_queryset(request).select_related("user", "tenant")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False  # revoked, not deleted: the row keeps who made it and when it was last used

    def get_actions(self, request: HttpRequest) -> dict[str, Any]:
        actions = super().get_actions(request)
        if not self.owns(request):
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
        vars(request)["_api_key_made"] = made  # for response_add, this request only

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        made = vars(request)["_api_key_made"]
        context = {
            **self.admin_site.each_context(request),
            "title": "API key made",
            "opts": self.model._meta,
            "made": made,
            "endpoint": resources.canonical_uri(made.row.tenant.slug),
        }
        return TemplateResponse(request, "admin/tenants/apikey/made.html", context)
