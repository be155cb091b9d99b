"""The forms of the upstream admin (upstreams.py): an upstream's settings with its write-only secrets
(headers, the OAuth client secret), and how one remote tool is published."""

from __future__ import annotations

from typing import Any

from django import forms
from django.core.exceptions import ValidationError

from lib import nesting
from lib.formfields import WriteOnlyTextarea
from mcp_app.handlers.secrets import check_secret_headers, encrypt_secrets
from mcp_app.models import UPSTREAM_SETTINGS, Approval, Upstream


class UpstreamAdminForm(forms.ModelForm):
    """The upstream's settings and its write-only secret headers."""

    new_secret_headers = forms.CharField(
        required=False,
        label="Secret headers",
        widget=WriteOnlyTextarea(attrs={"rows": 4, "autocomplete": "off"}),
        help_text='Headers sent with every request to the upstream, e.g. {"Authorization": "Bearer …"}. '
        "Stored encrypted and never shown again; replaces the stored set. Leave blank to keep them. "
        "Your clients' own tokens are never forwarded upstream.",
    )
    clear_secrets = forms.BooleanField(required=False, help_text="Remove every stored secret header.")
    new_oauth_client_secret = forms.CharField(
        required=False,
        label="OAuth client secret",
        widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}, render_value=False),
        help_text="The secret of the OAuth client above. Stored encrypted and never shown again; "
        "leave blank to keep it.",
    )

    class Meta:
        model = Upstream
        fields = ("tenant", *UPSTREAM_SETTINGS)

    def clean_new_secret_headers(self) -> dict[str, str] | None:
        raw = self.cleaned_data.get("new_secret_headers", "").strip()
        if not raw:
            return None
        try:
            value = nesting.loads(raw)
        except ValueError as exc:
            raise ValidationError(f"Invalid JSON: {exc}.") from None
        return check_secret_headers(value)

    def clean(self) -> dict[str, Any]:
        super().clean()
        data = self.cleaned_data  # what clean() returns: Django's stubs say it may be None
        if data.get("new_secret_headers") and data.get("clear_secrets"):
            self.add_error("clear_secrets", "Either enter new secret headers or clear them, not both.")
        return data

    def save(self, commit: bool = True) -> Upstream:
        if self.cleaned_data.get("clear_secrets"):
            self.instance.secret_headers = ""
        elif self.cleaned_data.get("new_secret_headers"):
            self.instance.secret_headers = encrypt_secrets(self.cleaned_data["new_secret_headers"])
        if not self.cleaned_data.get("oauth_client_id"):
            self.instance.oauth_client_secret = ""  # no client, no secret of one kept
        elif secret := self.cleaned_data.get("new_oauth_client_secret"):
            self.instance.oauth_client_secret = encrypt_secrets({"client_secret": secret})
        return super().save(commit=commit)


class PublishForm(forms.Form):
    """How a remote tool is published: its name here, an approval, arguments fixed to a value."""

    name = forms.CharField(max_length=64)
    approval = forms.ChoiceField(choices=Approval.choices, initial=Approval.OFF)
    fixed = forms.CharField(
        required=False,
        help_text='Arguments always sent with this value and hidden from clients, e.g. {"repo": "acme/api"}.',
    )

    def clean_fixed(self) -> dict[str, Any]:
        raw = self.cleaned_data.get("fixed", "").strip()
        if not raw:
            return {}
        try:
            value = nesting.loads(raw)
        except ValueError as exc:
            raise ValidationError(f"Invalid JSON: {exc}.") from None
        if not isinstance(value, dict):
            raise ValidationError("Fixed arguments are a JSON object of argument name → value.")
        return value
