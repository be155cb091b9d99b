"""The tenant form with its own identity provider (AMB-203): `identity`, and its introspection client's
secret, entered write-only and stored encrypted.

The tenant admin lives in `tenants/`, which cannot reach the handlers' encryption; this subclass adds
the section and replaces the registration, as the app above it.
"""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin

from mcp_app.handlers.secrets import encrypt_secrets
from mcp_app.oauth import external_tokens
from tenants import identity_provider
from tenants.admin import TenantAdmin
from tenants.models import Tenant


class TenantForm(forms.ModelForm):
    new_identity_client_secret = forms.CharField(
        required=False,
        label="Introspection client secret",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text="The secret of the identity's client_id (opaque tokens, introspection_url). Stored "
        "encrypted and never shown again; leave blank to keep it.",
    )

    class Meta:
        model = Tenant
        fields = ("identity",)  # the admin adds every field of its fieldsets

    def clean(self) -> dict[str, Any]:
        super().clean()
        cleaned = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        for problem in external_tokens.unreachable_urls(cleaned.get("identity")):
            self.add_error("identity", problem)
        entered = cleaned.get("new_identity_client_secret")
        if (
            identity_provider.needs_secret(cleaned.get("identity"))
            and not entered
            and not self.instance.identity_client_secret
        ):
            self.add_error("new_identity_client_secret", "The introspection client's secret is required.")
        return cleaned

    def save(self, commit: bool = True) -> Any:
        if not identity_provider.needs_secret(self.cleaned_data.get("identity")):
            self.instance.identity_client_secret = ""  # no introspection, no secret of its client kept
        elif secret := self.cleaned_data.get("new_identity_client_secret"):
            self.instance.identity_client_secret = encrypt_secrets({"client_secret": secret})
        return super().save(commit=commit)


class TenantWithIdentityAdmin(TenantAdmin):
    form = TenantForm
    fieldsets = (
        *TenantAdmin.fieldsets[:2],
        (
            "Your own identity provider (OAuth tenants: accept its access tokens)",
            {"fields": ("identity", "new_identity_client_secret")},
        ),
        *TenantAdmin.fieldsets[2:],
    )


admin.site.unregister(Tenant)
admin.site.register(Tenant, TenantWithIdentityAdmin)
