"""Admin for tenants, memberships and invitations, and the mixin that scopes every tenant-owned ModelAdmin.

Longer than 400 lines: the tenants app's whole admin (tenants, memberships, invitations), each built
on the scoping helpers above it in this module.

Access comes from memberships, not Django model permissions: a staff user with a membership can
use the admin for that tenant without being granted permissions one by one (is_staff is still
needed to log in). Viewers see rows read-only; owners and editors change definitions; owners
change the tenant's settings and memberships and invite people by e-mail address (AMB-105, AMB-108);
only superusers attach an existing account by username, and create or delete tenants.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.db import models
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse
from django.utils.html import format_html

from lib.formfields import json_formfield
from tenants import access, invitations

if TYPE_CHECKING:
    from django.contrib.admin.options import _FieldsetSpec

from tenants.models import EDIT_ROLES, Invitation, InvitationQuerySet, Membership, Role, Tenant


def _roles(request: HttpRequest) -> dict[int, str] | None:
    """tenants.access.roles_of for the request's user, computed once per request (None: every tenant)."""
    memo = vars(request)
    if "_tenant_roles" not in memo:
        memo["_tenant_roles"] = access.roles_of(request.user)
    roles: dict[int, str] | None = memo["_tenant_roles"]
    return roles


def _is_superuser(request: HttpRequest) -> bool:
    return _roles(request) is None


def viewable_tenant_ids(request: HttpRequest) -> set[int] | None:
    """Tenant ids whose rows the user may see; None means every tenant (superuser)."""
    roles = _roles(request)
    return None if roles is None else set(roles)


def editable_tenant_ids(request: HttpRequest, roles: frozenset[str] = EDIT_ROLES) -> set[int] | None:
    """Tenant ids whose rows the user may change (with one of `roles`); None means every tenant."""
    known = _roles(request)
    if known is None:
        return None
    return {tenant_id for tenant_id, role in known.items() if role in roles}


def _allowed(ids: set[int] | None, tenant_id: int | None) -> bool:
    return ids is None or tenant_id in ids


class MembershipPermissionsMixin:
    """has_*_permission from memberships: `edit_roles` change rows, any member views them."""

    edit_roles: frozenset[str] = EDIT_ROLES

    def tenant_id_of(self, obj: Any) -> int | None:
        return obj.tenant_id

    def has_module_permission(self, request: HttpRequest) -> bool:
        return _is_superuser(request) or bool(_roles(request))

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = viewable_tenant_ids(request)
        if obj is None:
            return ids is None or bool(ids)
        return _allowed(ids, self.tenant_id_of(obj))

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = editable_tenant_ids(request, self.edit_roles)
        return ids is None or bool(ids)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        ids = editable_tenant_ids(request, self.edit_roles)
        if obj is None:
            return ids is None or bool(ids)
        return _allowed(ids, self.tenant_id_of(obj))

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return self.has_change_permission(request, obj)


class TenantScopedAdmin(MembershipPermissionsMixin, admin.ModelAdmin):
    """Base ModelAdmin of every tenant-owned model (a `tenant` foreign key)."""

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        qs = super().get_queryset(request).select_related("tenant")
        ids = viewable_tenant_ids(request)
        return qs if ids is None else qs.filter(tenant_id__in=ids)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            # Another tenant's row gets the same answer as a missing one, and a plain 404.
            raise Http404("No such object.")
        return obj

    def formfield_for_foreignkey(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if db_field.name == "tenant":
            ids = editable_tenant_ids(request, self.edit_roles)
            qs = Tenant.objects.all() if ids is None else Tenant.objects.filter(id__in=ids)
            kwargs["queryset"] = qs
        return super().formfield_for_foreignkey(db_field, request, **kwargs)

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        # RelatedOnlyFieldListFilter lists only tenants present in the scoped queryset.
        return [("tenant", admin.RelatedOnlyFieldListFilter), *super().get_list_filter(request)]

    def ensure_may_edit(self, request: HttpRequest, obj: Any) -> None:
        """Refuse (403) a write to a row of a tenant the user may not edit."""
        if not _allowed(editable_tenant_ids(request, self.edit_roles), self.tenant_id_of(obj)):
            raise PermissionDenied

    def save_model(self, request: HttpRequest, obj: Any, form: Any, change: bool) -> None:
        self.ensure_may_edit(request, obj)
        super().save_model(request, obj, form, change)

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        if not self.has_delete_permission(request, obj):
            raise PermissionDenied
        super().delete_model(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        ids = editable_tenant_ids(request, self.edit_roles)
        if ids is not None and queryset.exclude(tenant_id__in=ids).exists():
            raise PermissionDenied
        # Row by row so post_delete signals announce each removal.
        for obj in queryset:
            obj.delete()


# --- Tenant ------------------------------------------------------------------------------------


@admin.register(Tenant)
class TenantAdmin(MembershipPermissionsMixin, admin.ModelAdmin):
    edit_roles = frozenset({Role.OWNER})
    list_display = ("slug", "name", "title", "is_active", "auth_mode", "definitions_version", "mcp_url")
    list_filter = ("is_active", "auth_mode", "registry_listed")
    search_fields = ("slug", "name", "title")
    readonly_fields = ("mcp_url", "usage_dashboard", "definitions_version", "created_at", "updated_at")
    fieldsets: ClassVar[_FieldsetSpec] = (
        (
            None,
            {
                "fields": (
                    "slug",
                    "name",
                    "title",
                    "description",
                    "server_version",
                    "is_active",
                    "mcp_url",
                    "usage_dashboard",
                )
            },
        ),
        ("Clients", {"fields": ("auth_mode", "instructions", "website_url", "icons", "allowed_origins")}),
        ("MCP Registry (AMB-372)", {"fields": ("registry_listed",)}),
        ("Tool discovery (AMB-376)", {"fields": ("tool_discovery",)}),
        ("Caching (2026-07-28 clients)", {"fields": ("cache_ttl_ms", "cache_scope")}),
        ("Tasks", {"fields": ("task_ttl_seconds",)}),
        (
            "Quotas and caps (0: none)",
            {
                "fields": (
                    "calls_per_minute",
                    "calls_per_minute_per_tool",
                    "calls_per_minute_per_caller",
                    "max_sessions",
                    "max_background_runs",
                    "max_streams",
                    "max_streams_per_session",
                    "max_body_bytes",
                )
            },
        ),
        ("Long answers (2025-11-25 clients)", {"fields": ("stream_poll_seconds", "stream_poll_retry_ms")}),
        ("Governance events (AMB-360)", {"fields": ("audit_sampling",)}),
        ("Single sign-on members (AMB-213)", {"fields": ("sso_email_domains", "sso_groups", "sso_role")}),
        ("State", {"fields": ("definitions_version", "created_at", "updated_at")}),
    )

    def tenant_id_of(self, obj: Tenant) -> int:
        return obj.pk

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        qs = super().get_queryset(request)
        ids = viewable_tenant_ids(request)
        return qs if ids is None else qs.filter(id__in=ids)

    def get_object(self, request: HttpRequest, object_id: str, from_field: str | None = None) -> Any:
        obj = super().get_object(request, object_id, from_field)
        if obj is None:
            raise Http404("No such tenant.")
        return obj

    def get_readonly_fields(self, request: HttpRequest, obj: Tenant | None = None) -> tuple[str, ...]:
        # The slug is the endpoint URL: renaming it would silently break every configured client.
        if obj is not None and not _is_superuser(request):
            return (*self.readonly_fields, "slug")
        return self.readonly_fields

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_superuser(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return _is_superuser(request)

    def formfield_for_dbfield(self, db_field: Any, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.JSONField):
            return json_formfield(db_field, **kwargs)
        if isinstance(db_field, models.URLField):
            kwargs["assume_scheme"] = "https"
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description="MCP endpoint")
    def mcp_url(self, obj: Tenant) -> str:
        return f"{settings.MCP_PUBLIC_URL}/t/{obj.slug}/mcp" if obj.slug else "—"

    @admin.display(description="Usage")
    def usage_dashboard(self, obj: Tenant) -> str:
        if not obj.pk:
            return "—"
        return format_html('<a href="{}">Usage dashboard</a>', reverse("tenant-dashboard", args=[obj.slug]))

    def save_model(self, request: HttpRequest, obj: Tenant, form: Any, change: bool) -> None:
        if change:
            if not self.has_change_permission(request, obj):
                raise PermissionDenied
            # Never write definitions_version back: a definition saved meanwhile may have bumped it.
            fields = [
                f.name
                for f in obj._meta.concrete_fields
                if f.name not in {"id", "definitions_version", "created_at"}
            ]
            obj.save(update_fields=fields)
        else:
            super().save_model(request, obj, form, change)


# --- Membership --------------------------------------------------------------------------------


class MembershipForm(forms.ModelForm):
    user = forms.ModelChoiceField(
        queryset=get_user_model().objects.all(),
        to_field_name="username",
        widget=forms.TextInput,
        help_text="Username of an existing account.",
        error_messages={"invalid_choice": "No user with that username."},
    )

    class Meta:
        model = Membership
        fields = ("tenant", "user", "role")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        instance = self.instance
        if (
            instance.pk
            and instance.role == Role.OWNER
            and data.get("role") != Role.OWNER
            and _last_owner(instance)
        ):
            self.add_error("role", "A tenant keeps at least one owner: make someone else owner first.")
        return data


def _last_owner(membership: Membership) -> bool:
    others = Membership.objects.filter(tenant_id=membership.tenant_id, role=Role.OWNER).exclude(
        pk=membership.pk
    )
    return membership.role == Role.OWNER and not others.exists()


@admin.register(Membership)
class MembershipAdmin(TenantScopedAdmin):
    """Members see who else belongs to their tenants; owners manage the memberships."""

    form = MembershipForm
    edit_roles = frozenset({Role.OWNER})
    list_display = ("user", "tenant", "role", "granted_by")
    list_filter = ("role", "granted_by")
    search_fields = ("user__username", "tenant__slug")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        return super().get_queryset(request).select_related("user")

    def get_readonly_fields(self, request: HttpRequest, obj: Membership | None = None) -> tuple[str, ...]:
        # A membership's person and tenant are fixed: changing either would attach someone elsewhere.
        return ("tenant", "user") if obj is not None else ()

    def add_view(self, request: HttpRequest, form_url: str = "", extra_context: Any = None) -> HttpResponse:
        if _is_superuser(request):
            return super().add_view(request, form_url, extra_context)
        if not self.has_add_permission(request):
            raise PermissionDenied
        # Owners invite by address (AMB-105): attaching an account by username would let them attach anyone.
        return redirect("admin:tenants_invitation_add")

    def has_delete_permission(self, request: HttpRequest, obj: Membership | None = None) -> bool:
        if obj is not None and _last_owner(obj):
            return False
        return super().has_delete_permission(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        doomed = set(queryset.values_list("pk", flat=True))
        for tenant_id in set(queryset.values_list("tenant_id", flat=True)):
            owners = Membership.objects.filter(tenant_id=tenant_id, role=Role.OWNER).exclude(pk__in=doomed)
            if not owners.exists():
                raise PermissionDenied("A tenant keeps at least one owner.")
        super().delete_queryset(request, queryset)


# --- Invitations -------------------------------------------------------------------------------


class InvitationForm(forms.ModelForm):
    # Who invites: the signed-in person, set on the form class by InvitationAdmin.get_form.
    invited_by: ClassVar[Any]

    class Meta:
        model = Invitation
        fields = ("tenant", "email", "role")

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        if self.errors:
            return data
        # The invitation is made (and mailed) here, so each refusal (limit, pending, mail) is a form
        # error; the admin's save then finds the row saved.
        try:
            self.instance = invitations.invite(data["tenant"], data["email"], data["role"], self.invited_by)
        except invitations.InvitationError as exc:
            raise forms.ValidationError(exc.message) from None
        return data


class InvitationStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: Any) -> list[tuple[str, str]]:
        return list(Invitation.Status.choices)

    def queryset(self, request: HttpRequest, queryset: models.QuerySet) -> models.QuerySet:
        # The admin's rows: Invitation.objects's queryset.
        status = self.value()
        return cast(InvitationQuerySet, queryset).with_status(status) if status else queryset


@admin.register(Invitation)
class InvitationAdmin(TenantScopedAdmin):
    """Owners invite by address, list and revoke; invitations are never edited or deleted (the record)."""

    form = InvitationForm
    edit_roles = frozenset({Role.OWNER})
    list_display = ("email", "tenant", "role", "status", "invited_by", "created_at", "expires_at")
    list_filter = (InvitationStatusFilter, "role")
    search_fields = ("email", "tenant__slug")
    actions = ("revoke",)
    readonly_fields = ("status", "invited_by", "created_at", "expires_at", "accepted_at", "accepted_by", "revoked_at")

    def get_queryset(self, request: HttpRequest) -> models.QuerySet:
        # Owners only, not every member: invitations hold people's addresses.
        qs = admin.ModelAdmin.get_queryset(self, request).select_related("tenant", "invited_by")
        ids = editable_tenant_ids(request, self.edit_roles)
        return qs if ids is None else qs.filter(tenant_id__in=ids)

    def get_list_filter(self, request: HttpRequest) -> list[Any]:
        return [("tenant", admin.RelatedOnlyFieldListFilter), *self.list_filter]

    def get_fields(self, request: HttpRequest, obj: Invitation | None = None) -> tuple[str, ...]:
        return ("tenant", "email", "role") if obj is None else ("tenant", "email", "role", *self.readonly_fields)

    def get_readonly_fields(self, request: HttpRequest, obj: Invitation | None = None) -> tuple[str, ...]:
        return () if obj is None else ("tenant", "email", "role", *self.readonly_fields)

    def get_form(self, request: HttpRequest, obj: Any = None, change: bool = False, **kwargs: Any) -> Any:
        # A subclass of this admin's form, InvitationForm (modelform_factory).
        form = cast(type[InvitationForm], super().get_form(request, obj, change, **kwargs))
        form.invited_by = request.user
        return form

    def has_module_permission(self, request: HttpRequest) -> bool:
        ids = editable_tenant_ids(request, self.edit_roles)
        return ids is None or bool(ids)

    def has_view_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return super().has_change_permission(request, obj)

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        # An invitation's page is read-only; the list and its action are for its tenant's owners.
        return obj is None and super().has_change_permission(request)

    def has_delete_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    def has_revoke_permission(self, request: HttpRequest) -> bool:
        return super().has_change_permission(request)

    def save_model(self, request: HttpRequest, obj: Invitation, form: Any, change: bool) -> None:
        """The form made and mailed the invitation (InvitationForm.clean): nothing is left to save."""

    def response_add(self, request: HttpRequest, obj: Invitation, post_url_continue: str | None = None) -> Any:
        # The same words whether or not the address has an account (AMB-105).
        self.message_user(request, f"Invitation sent to {obj.email}; it is valid for {settings.MCP_INVITATION_DAYS} days.")
        return redirect("admin:tenants_invitation_changelist")

    @admin.display(description="status")
    def status(self, obj: Invitation) -> str:
        return Invitation.Status(obj.status).label

    @admin.action(description="Revoke the selected pending invitations", permissions=["revoke"])
    def revoke(self, request: HttpRequest, queryset: models.QuerySet) -> None:
        ids = editable_tenant_ids(request, self.edit_roles)
        done = 0
        for invitation in cast(InvitationQuerySet, queryset).with_status(Invitation.Status.PENDING):
            if _allowed(ids, invitation.tenant_id):
                invitations.revoke(invitation)
                done += 1
        self.message_user(request, f"{done} invitation{'s' if done != 1 else ''} revoked.")


__all__ = ["TenantScopedAdmin", "editable_tenant_ids", "viewable_tenant_ids"]
