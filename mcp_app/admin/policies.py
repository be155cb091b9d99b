"""The admin of a tenant's policies (AMB-347) and their simulator (AMB-350).

Owners write policies as drafts and publish them, with versions and history, like every definition
(AMB-362); the condition is checked when saved (governance/conditions.py) and its error shown on the
field. **Simulate** (``admin/mcp_app/policy/simulate/``) asks the one decision what it says for a
caller an owner describes, a target and arguments, and shows that caller's lists; nothing runs.
"""

from __future__ import annotations

import json
from typing import Any

from asgiref.sync import async_to_sync
from django import forms
from django.contrib import admin
from django.http import HttpRequest, HttpResponse
from django.template.response import TemplateResponse
from django.urls import path

from mcp_app.admin.providers import OWNERS, OwnersOnly
from mcp_app.admin.publishing import DraftFilter, PublishingAdminMixin
from mcp_app.catalog.loader import tenant_info
from mcp_app.drafts import trial
from mcp_app.models import Policy
from mcp_app.protocol.simulate import AUTHS, KINDS, SimulatedCaller, SimulationError
from tenants.admin import editable_tenant_ids
from tenants.models import Tenant


class SimulateForm(forms.Form):
    tenant = forms.ModelChoiceField(queryset=Tenant.objects.none())
    auth = forms.ChoiceField(choices=[(a, a.replace("_", " ")) for a in AUTHS], initial="oauth",
                             help_text="How the caller authenticated.")  # fmt: skip
    role = forms.ChoiceField(choices=[("", "none"), ("owner", "owner"), ("editor", "editor"), ("viewer", "viewer")],
                             required=False, help_text="The caller's role in the tenant.")  # fmt: skip
    scopes = forms.CharField(
        required=False, max_length=1000, help_text="Space-separated, as a token grants them."
    )
    client_id = forms.CharField(required=False, max_length=200, label="Client id")
    subject = forms.CharField(required=False, max_length=500, help_text="An identity provider's user.")
    claims = forms.CharField(required=False, max_length=20_000, widget=forms.Textarea(attrs={"rows": 3}),
                             initial="{}", help_text="That user's token's claims, a JSON object (caller.claims).")  # fmt: skip
    kind = forms.ChoiceField(choices=[(k, k) for k in KINDS])
    name = forms.CharField(
        max_length=2000, help_text="A tool's or prompt's name, a resource's URI, a template's."
    )
    arguments = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 4}), initial="{}",
                                help_text="A JSON object.")  # fmt: skip
    with_drafts = forms.BooleanField(required=False, label="With the drafts",
                                     help_text="Decide with the tenant's policies, guardrails and quotas as their drafts "
                                               "would be published (nothing is published).")  # fmt: skip
    sample = forms.CharField(required=False, max_length=100_000, widget=forms.Textarea(attrs={"rows": 3}),
                             label="Sample result", help_text="A result's text: what the guardrails would do to it.")  # fmt: skip

    def __init__(self, *args: Any, tenants: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        field = self.fields["tenant"]
        assert isinstance(field, forms.ModelChoiceField)
        field.queryset = tenants

    def clean_arguments(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data.get("arguments"), "The arguments are")

    def clean_claims(self) -> dict[str, Any]:
        return _json_object(self.cleaned_data.get("claims"), "The claims are")


def _json_object(text: str | None, what: str) -> dict[str, Any]:
    try:
        value = json.loads(text or "{}")
    except ValueError as exc:
        raise forms.ValidationError(f"Not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise forms.ValidationError(f"{what} a JSON object.")
    return value


class PolicyForm(forms.ModelForm):
    confirm_no_tools = forms.BooleanField(
        required=False, label="Save though no member keeps a tool",
        help_text="Asked only when, after this policy, no member of the tenant would have a single tool in its list.",
    )  # fmt: skip

    class Meta:
        model = Policy
        fields = ("tenant", "name", "description", "effect", "applies_to", "condition", "enabled")

    def clean(self) -> dict[str, Any] | None:
        cleaned = super().clean()
        # The model's check reads it (Policy.confirm_no_tools); the model's full_clean runs after this.
        self.instance.confirm_no_tools = bool((cleaned or {}).get("confirm_no_tools"))
        return cleaned


@admin.register(Policy)
class PolicyAdmin(PublishingAdminMixin, OwnersOnly):
    form = PolicyForm
    list_display = ("name", "tenant", "effect", "applies_to", "condition", "enabled", "publishing")
    list_filter = ("effect", "applies_to", "enabled", DraftFilter)
    search_fields = ("name", "description", "condition")
    fields = (
        "tenant",
        "name",
        "description",
        "effect",
        "applies_to",
        "condition",
        "enabled",
        "confirm_no_tools",
    )
    change_list_template = "admin/mcp_app/policy/change_list.html"

    def get_urls(self) -> list[Any]:
        simulate_url = path(
            "simulate/", self.admin_site.admin_view(self.simulate_view), name="mcp_app_policy_simulate"
        )
        return [simulate_url, *super().get_urls()]

    def simulate_view(self, request: HttpRequest) -> HttpResponse:
        ids = editable_tenant_ids(request, OWNERS)
        tenants = Tenant.objects.all() if ids is None else Tenant.objects.filter(pk__in=ids)
        form = SimulateForm(request.POST or None, tenants=tenants.order_by("slug"))
        result = None
        if request.method == "POST" and form.is_valid():
            data = form.cleaned_data
            caller = SimulatedCaller(
                auth=data["auth"], user_id=request.user.pk if data["auth"] != "anonymous" else None,
                role=data["role"], subject=data["subject"], client_id=data["client_id"],
                scopes=tuple(data["scopes"].split()), claims=data["claims"],
            )  # fmt: skip
            try:
                result = async_to_sync(trial.simulated)(
                    tenant_info(data["tenant"]), caller, data["kind"], data["name"], data["arguments"], data["sample"],
                    with_drafts=data["with_drafts"],
                )  # fmt: skip
            except SimulationError as exc:
                form.add_error("name", str(exc))
        context = {
            **self.admin_site.each_context(request),
            "opts": self.model._meta,
            "title": "Simulate the policies: what would this caller get?",
            "form": form,
            "result": result,
            "with_drafts": form.is_bound and form.is_valid() and form.cleaned_data["with_drafts"],
        }
        return TemplateResponse(request, "admin/mcp_app/policy/simulate.html", context)
