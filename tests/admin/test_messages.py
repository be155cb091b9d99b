"""Every message the admin can send a person keeps a name as written (AMB-293).

Django's admin shows a message through `capfirst`, so "ask_user is published as ref_ask_user." read
"Ask_user is published…", a tool that does not exist. Our admin shows messages as written
(templates/admin/base_site.html); a message begins with a capital or with a name. This sweep finds every
call that sends one (`messages.<level>`, `messages.add_message`, `ModelAdmin.message_user`) in the code,
checks how each begins and that nothing capitalises a name on the way, and shows each, its names
lower-case, through the admin's own pages: a new message that capitalises a name fails here.
"""

from __future__ import annotations

import ast
import html
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib import admin
from django.contrib.messages import constants
from django.contrib.messages.storage.fallback import FallbackStorage
from django.contrib.sessions.backends.db import SessionStore
from django.test import RequestFactory
from django.utils.safestring import mark_safe

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("mcp_app", "tenants", "audit", "mcpsite", "lib")
LEVELS = {"debug", "info", "success", "warning", "error"}
# What would capitalise a name inside a message.
CAPITALISERS = {"capfirst", "capitalize", "title", "upper", "swapcase"}
# A name as a message may begin with it: lower-case, with an underscore, as tools are named.
NAME = "ask_user"


@dataclass(frozen=True)
class Sent:
    where: str  # file:line
    message: ast.expr

    @property
    def sample(self) -> str:
        """The message as a person could read it, each interpolated value a lower-case name."""
        return _sample(self.message)

    @property
    def is_html(self) -> bool:
        """A message built by format_html: markup the page shows as markup."""
        node = self.message
        return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format_html"


def _message_argument(call: ast.Call) -> ast.expr | None:
    """The message of a call that sends one, or None when the call sends none."""
    func = call.func
    if not isinstance(func, ast.Attribute):
        return None
    if func.attr == "message_user" and len(call.args) >= 2:
        return call.args[1]
    on_messages = isinstance(func.value, ast.Name) and func.value.id == "messages"
    if on_messages and func.attr in LEVELS and len(call.args) >= 2:
        return call.args[1]
    if on_messages and func.attr == "add_message" and len(call.args) >= 3:
        return call.args[2]
    return None


def sent_messages() -> list[Sent]:
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            tree = ast.parse(path.read_text(), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and (message := _message_argument(node)) is not None:
                    found.append(Sent(f"{path.relative_to(ROOT)}:{node.lineno}", message))
    return found


def _head(node: ast.expr) -> str | None:
    """The literal text a message begins with; None when it begins with a value (a name, a count...)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return _head(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _head(node.left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format_html" and node.args:
        return _head(node.args[0])
    return None


def _sample(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(_sample(part) for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _sample(node.left) + _sample(node.right)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "format_html" and node.args:
        return _sample(node.args[0]).replace("{}", NAME)
    return NAME  # a value: a name, a count, an exception's words, a helper's sentence


def capitalised_names(node: ast.expr) -> list[str]:
    """Calls inside the message that would capitalise what they are given (a kind's verbose_name may be)."""
    found = []
    for inner in ast.walk(node):
        if not isinstance(inner, ast.Call):
            continue
        func = inner.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        if name not in CAPITALISERS:
            continue
        target = inner.args[0] if inner.args else func.value if isinstance(func, ast.Attribute) else None
        if isinstance(target, ast.Attribute) and target.attr.startswith("verbose_name"):
            continue  # "Tool", "Prompt": a kind beginning a sentence, not a name
        found.append(ast.unparse(inner))
    return found


SENT = sent_messages()


def test_the_sweep_finds_every_kind_of_call_that_sends_a_message():
    files = {s.where.split(":")[0] for s in SENT}
    assert len(SENT) >= 40, [s.where for s in SENT]
    assert {"mcp_app/admin/upstreams.py", "mcp_app/admin/publishing.py", "tenants/admin.py"} <= files
    assert "mcp_app/oauth/admin.py" in files  # a ModelAdmin's message_user


@pytest.mark.parametrize("sent", SENT, ids=[s.where for s in SENT])
def test_a_message_begins_with_a_capital_or_a_name_and_capitalises_no_name(sent: Sent):
    assert not capitalised_names(sent.message), f"{sent.where} capitalises a name: {ast.unparse(sent.message)}"
    head = _head(sent.message)
    if head is not None and head[:1].isalpha():
        # Shown as written now: a sentence that begins with a word begins with its capital.
        assert head[0].isupper(), f"{sent.where} begins with a lower-case word: {head!r}"


@pytest.mark.django_db
def test_every_message_is_shown_as_written_on_the_admins_pages(django_user_model):
    root = django_user_model.objects.create_superuser("root", "root@example.com", "root-pw-123")
    samples = sorted({(s.sample, s.is_html) for s in SENT} | {(f"{NAME} is published as ref_{NAME}.", False)})
    request = RequestFactory().get("/admin/")
    request.user = root
    request.session = SessionStore()
    request._messages = FallbackStorage(request)
    for sample, is_html in samples:
        request._messages.add(constants.SUCCESS, mark_safe(sample) if is_html else sample)  # noqa: S308
    response = admin.site.index(request)
    response.render()
    page = response.content.decode()
    for sample, is_html in samples:
        shown = sample if is_html else html.escape(sample)
        assert f">{shown}</li>" in page, f"not shown as written: {sample!r}"
