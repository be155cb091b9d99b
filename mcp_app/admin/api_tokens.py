"""The admin's list of `manage` API tokens (AMB-237): name, owner, expiry, last use; revoke.

Tokens are made on `/api-tokens` (or by `manage.py api_token`), where their value is shown once; here
they are listed and revoked. A person sees their own tokens; a superuser sees everyone's. Revoking
deletes the token (its row goes with it), as the page does, and is in the audit trail.
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin, messages
from django.db.models import QuerySet
from django.http import HttpRequest
from django.urls import reverse
from django.utils.html import format_html

from audit.models import Action
from audit.trail import record
from mcp_app.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "made", "expires", "last_used")
    list_display_links = ("name",)
    search_fields = ("name", "token__user__username")
    ordering = ("-token__created",)
    fields = ("name", "owner", "made", "expires", "last_used")
    readonly_fields = ("owner", "made", "expires", "last_used")
    actions = ("revoke",)

    def get_queryset(self, request: HttpRequest) -> QuerySet[ApiToken]:
        rows = super().get_queryset(request).select_related("token", "token__user", "token__application")
        return rows if request.user.is_superuser else rows.filter(token__user=request.user)

    # Everyone signed in to the admin has their own tokens: no model permission is needed to see them.
    def has_module_permission(self, request: HttpRequest) -> bool:
        return request.user.is_active and request.user.is_staff

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)  # the name only; the queryset keeps others' out

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_module_permission(request)

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # made where its value can be shown once: /api-tokens

    def changelist_view(self, request: HttpRequest, extra_context: dict[str, Any] | None = None) -> Any:
        if request.method == "GET" and not request.GET:
            link = format_html('Make a token on <a href="{}">your API tokens page</a>.', reverse("api-tokens"))
            messages.info(request, link)
        return super().changelist_view(request, extra_context)

    @admin.display(description="owner", ordering="token__user__username")
    def owner(self, row: ApiToken) -> str:
        return row.token.user.get_username() if row.token.user else ""

    @admin.display(description="made", ordering="token__created")
    def made(self, row: ApiToken) -> Any:
        return row.token.created

    @admin.display(description="expires", ordering="token__expires")
    def expires(self, row: ApiToken) -> Any:
        return row.token.expires

    def delete_model(self, request: HttpRequest, obj: ApiToken) -> None:
        self._revoke(request, [obj])

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        self._revoke(request, list(queryset))

    @admin.action(description="Revoke the selected tokens")
    def revoke(self, request: HttpRequest, queryset: QuerySet[ApiToken]) -> None:
        rows = list(queryset)
        self._revoke(request, rows)
        self.message_user(request, f"{len(rows)} token(s) revoked: they open nothing any more.")

    def _revoke(self, request: HttpRequest, rows: list[ApiToken]) -> None:
        for row in rows:
            token_id, client_id = row.token_id, row.token.application.client_id if row.token.application else ""
            row.token.delete()  # its ApiToken row goes with it (CASCADE)
            record(Action.TOKEN_REVOKED, request=request, client_id=client_id, detail={"token": token_id})
