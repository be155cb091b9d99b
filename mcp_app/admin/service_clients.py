"""The admin of service clients (AMB-197): an owner makes one for a program, sees its secret once, revokes it.

Owners only (a service client carries a member's access). Adding one goes through
`oauth.service_clients.create`, as `manage.py service_client` does; the page that follows shows the
client id and the secret, which is never stored in the clear and never shown again. A client is not
edited: a program that needs another member or scope gets another client. Deleting one revokes it (its
Application goes, and its tokens with it). Another tenant's client answers 404 like a missing one.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse

from mcp_app.admin.minting import OWNERS, SCOPE_HELP, MintAdmin, MintForm, chosen_scope
from mcp_app.oauth import resources, service_clients
from tenants.admin import editable_tenant_ids
from tenants.models import ServiceClient


class ServiceClientForm(MintForm):
    """A new client: its tenant, the member it acts as, a name and the most scope its tokens carry."""

    name = forms.CharField(max_length=255, help_text="Say which program uses it, e.g. 'Nightly CI'.")
    acts_as = forms.ModelChoiceField(
        queryset=get_user_model().objects.none(),
        help_text="The member its tokens act as: they stop working when that person leaves the tenant.",
    )

    class Meta:
        model = ServiceClient
        fields = ("tenant", "scope")
        help_texts = {"scope": SCOPE_HELP}

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        tenant, user = data.get("tenant"), data.get("acts_as")
        if tenant is not None and user is not None:
            data["scope"] = chosen_scope(data)
            if (why := service_clients.problem(tenant, user, data["scope"])) is not None:
                raise forms.ValidationError(why)
        return data


@admin.register(ServiceClient)
class ServiceClientAdmin(MintAdmin):
    form = ServiceClientForm
    add_fields = ("tenant", "name", "acts_as", "scope")
    list_display = ("name", "tenant", "acts_as", "scope", "client_id", "created_at")
    readonly_fields = ("name", "acts_as", "client_id", "scope", "audience", "created_by", "created_at")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return super().get_queryset(request).select_related("application__user")

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.owns(request, obj)

    @admin.display(description="name")
    def name(self, obj: ServiceClient) -> str:
        return obj.application.name

    @admin.display(description="acts as")
    def acts_as(self, obj: ServiceClient) -> str:
        return str(obj.application.user)

    @admin.display(description="client id")
    def client_id(self, obj: ServiceClient) -> str:
        return obj.application.client_id

    @admin.display(description="its tokens are for")
    def audience(self, obj: ServiceClient) -> str:
        return resources.canonical_uri(obj.tenant.slug)

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        ids = editable_tenant_ids(request, OWNERS)
        if change or (ids is not None and obj.tenant_id not in ids):
            raise PermissionDenied
        made = service_clients.create(
            form.cleaned_data["tenant"],
            form.cleaned_data["acts_as"],
            form.cleaned_data["name"],
            form.cleaned_data["scope"],
            created_by=request.user,
        )
        # The admin logs and answers with the object it saved: the row create() made.
        obj.pk, obj.application, obj.scope, obj.created_at = (
            made.row.pk,
            made.row.application,
            made.row.scope,
            made.row.created_at,
        )
        vars(request)["_service_client_made"] = made  # for response_add, this request only

    def response_add(
        self, request: HttpRequest, obj: Any, post_url_continue: str | None = None
    ) -> HttpResponse:
        made = vars(request)["_service_client_made"]
        context = {
            **self.admin_site.each_context(request),
            "title": "Service client made",
            "opts": self.model._meta,
            "made": made,
            "token_url": resources.issuer() + "/oauth/token",
            "audience": resources.canonical_uri(made.row.tenant.slug),
        }
        return TemplateResponse(request, "admin/tenants/serviceclient/made.html", context)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        if not self.has_delete_permission(request, obj):
            raise PermissionDenied
        service_clients.revoke(obj, request.user)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        ids = editable_tenant_ids(request, OWNERS)
        if ids is not None and queryset.exclude(tenant_id__in=ids).exists():
            raise PermissionDenied
        for row in queryset.select_related("application"):
            service_clients.revoke(row, request.user)
