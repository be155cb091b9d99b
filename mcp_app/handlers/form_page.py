"""The page where a person fills in a sensitive form (URL-mode elicitation): never in the MCP client.

GET shows the form the signed link names (handlers/url_forms.py); POST checks the answers against the
form's schema and leaves them for the waiting tool, once. A link that is forged, expired or for
another tenant answers 404; on an OAuth tenant the person must be signed in as the user the tool
asked for, and anyone else sees only that it is not theirs.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.views import redirect_to_login
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.cache import never_cache
from django.views.decorators.clickjacking import xframe_options_deny
from jsonschema import Draft202012Validator

from mcp_app.handlers import form, url_forms
from tenants.models import Tenant

TEMPLATE = "form_page.html"


def _fields(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """What the template shows of each property: its input kind, label, choices and whether required."""
    required = set(schema.get("required") or [])
    shown = []
    for name, spec in (schema.get("properties") or {}).items():
        choices = form.choices_of(spec)
        kind = spec.get("type")
        if kind == "array":
            widget = "checkboxes"  # a multiple choice (AMB-120)
        elif choices:
            widget = "select"
        else:
            widget = {"boolean": "checkbox", "integer": "number", "number": "number"}.get(
                kind, {"email": "email", "date": "date", "uri": "url"}.get(spec.get("format"), "text")
            )
        shown.append(
            {
                "name": name,
                "label": spec.get("title") or name,
                "description": spec.get("description", ""),
                "widget": widget,
                "step": "1" if kind == "integer" else "any",
                "choices": choices,
                "required": name in required,
            }
        )
    return shown


def _answers(schema: dict[str, Any], data: Any) -> tuple[dict[str, Any], list[str]]:
    """The submitted values in their schema types, and what is wrong with them."""
    answers: dict[str, Any] = {}
    problems: list[str] = []
    for name, spec in (schema.get("properties") or {}).items():
        kind = spec.get("type")
        if kind == "array":
            answers[name] = data.getlist(name)
            continue
        raw = data.get(name, "")
        if kind == "boolean":
            answers[name] = raw == "on"
            continue
        if raw == "":
            continue
        try:
            answers[name] = int(raw) if kind == "integer" else float(raw) if kind == "number" else raw
        except ValueError:
            problems.append(f"{spec.get('title') or name}: enter a number.")
    problems += sorted(e.message for e in Draft202012Validator(schema).iter_errors(answers))
    return answers, problems


@never_cache
@xframe_options_deny
def form_page(request: HttpRequest, slug: str, token: str) -> HttpResponse:
    question = url_forms.read_token(token)
    tenant = Tenant.objects.filter(slug=slug, is_active=True).first()
    if question is None or tenant is None or tenant.pk != question.get("t"):
        return render(request, TEMPLATE, {"gone": True}, status=404)
    if question.get("u") is not None:
        if not request.user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("oauth-login"))
        if url_forms.user_mark(request.user.pk) != question["u"]:
            return render(request, TEMPLATE, {"not_yours": True}, status=403)
    schema = question["f"]
    context: dict[str, Any] = {"tenant": tenant, "message": question["m"], "fields": _fields(schema)}
    if request.method == "POST":
        answers, problems = _answers(schema, request.POST)
        if not problems:
            if not url_forms.store(question["e"], answers):
                return render(request, TEMPLATE, {**context, "already": True}, status=409)
            return render(request, TEMPLATE, {**context, "done": True})
        context.update(problems=problems, values=request.POST)
    return render(request, TEMPLATE, context)
