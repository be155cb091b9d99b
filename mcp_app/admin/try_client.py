"""The client the admin's Try page plays (AMB-250): the revision it speaks, the capabilities it declares,
and its answers to the tool's questions, built from what the person chose and typed.

An owner picks the era (2026-07-28 or a legacy revision) and ticks what the simulated client supports,
so the call meets exactly what such a client would: with sampling off, an `llm` tool's refusal is the
one a client without sampling gets. Every answer becomes the JSON-RPC response a client would send
(`answer_body`), delivered as a client's response POST is (try_tool.answer).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from lib import nesting
from mcp_app.core.versions import V2025_11_25, is_modern
from mcp_app.drafts import trial
from mcp_app.protocol.tasks import EXTENSION

# What the page offers, newest first: the revisions any trial may speak.
ERAS = trial.ERAS
# The capabilities one can tick, and their labels on the page.
CAPABILITIES: dict[str, str] = {
    "elicitation.form": "Elicitation: forms",
    "elicitation.url": "Elicitation: web pages (URL mode)",
    "sampling": "Sampling: the client's model",
    "roots": "Roots: folders the client shares",
    "tasks": "Tasks",
}
# Ticked when the page opens: a capable client, so the tool can be tried at once. Tasks stay off, so a
# call is answered as it runs; URL mode stays off, so the page never sends anyone elsewhere unasked.
DEFAULT_CAPABILITIES: tuple[str, ...] = ("elicitation.form", "sampling", "roots")
ANSWER_ACTIONS = frozenset({"accept", "decline", "cancel"})
# Questions the page answers, by method (elicitation when the page names none: its first form).
ELICIT, SAMPLE, ROOTS = "elicitation/create", "sampling/createMessage", "roots/list"
# The model a typed reply claims to come from, unless the person names one.
TYPED_MODEL = "typed-in-the-admin"
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:\S+$")
# The spec's code for a person who rejects a sampling request (client/sampling "Error Handling").
USER_REJECTED = -1


class AnswerError(ValueError):
    """The person's answer cannot be sent; the message says what to fix."""


@dataclass(frozen=True)
class Client:
    version: str
    declared: frozenset[str]

    @property
    def modern(self) -> bool:
        return is_modern(self.version)

    def capabilities(self) -> dict[str, Any]:
        """The ClientCapabilities this client declares, in its revision's shape."""
        declared: dict[str, Any] = {}
        modes: dict[str, Any] = {mode: {} for mode in ("form", "url") if f"elicitation.{mode}" in self.declared}
        if modes:
            declared["elicitation"] = modes
        if "sampling" in self.declared:
            declared["sampling"] = {}
        if "roots" in self.declared:
            declared["roots"] = {"listChanged": False}
        if "tasks" in self.declared:
            if self.modern:
                declared["extensions"] = {EXTENSION: {}}
            elif self.version >= V2025_11_25:
                requests: dict[str, Any] = {"sampling": {"createMessage": {}}, "elicitation": {"create": {}}}
                declared["tasks"] = {"list": {}, "cancel": {}, "requests": requests}
        return declared


def client_from(era: str, ticked: list[str]) -> Client:
    """The client the page's choices describe; AnswerError for a revision or capability it does not offer."""
    if era not in ERAS:
        raise AnswerError(f"Choose a protocol revision among {', '.join(ERAS)}.")
    unknown = [name for name in ticked if name not in CAPABILITIES]
    if unknown:
        raise AnswerError(f"Unknown client capability {unknown[0]!r}: choose among {', '.join(CAPABILITIES)}.")
    return Client(era, frozenset(ticked))


def answer_body(method: str, action: str, raw_content: str) -> dict[str, Any]:
    """The client's response to a question (without jsonrpc and id): a result, or an error for a
    sampling request or roots the person declined to give."""
    if action not in ANSWER_ACTIONS:
        raise AnswerError(f"The answer's action must be one of {', '.join(sorted(ANSWER_ACTIONS))}.")
    if method in ("", ELICIT):
        if action != "accept":
            return {"result": {"action": action}}
        return {"result": {"action": "accept", "content": _object(raw_content, "the form's fields")}}
    if method not in (SAMPLE, ROOTS):
        raise AnswerError(f"The page cannot answer {method!r}.")
    if action != "accept":
        what = "sampling request" if method == SAMPLE else "request for roots"
        return {"error": {"code": USER_REJECTED, "message": f"The person declined the {what}."}}
    content = _object(raw_content, "the answer")
    return {"result": _reply(content) if method == SAMPLE else {"roots": _roots(content)}}


def _object(raw: str, what: str) -> dict[str, Any]:
    try:
        value = nesting.loads(raw or "{}")
    except ValueError as exc:
        raise AnswerError(f"The answer is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise AnswerError(f"The answer must be a JSON object of {what}.")
    return value


def _reply(content: dict[str, Any]) -> dict[str, Any]:
    """A CreateMessageResult from the reply the person typed for the model."""
    text, model = content.get("text"), content.get("model") or TYPED_MODEL
    if not isinstance(text, str) or not text.strip():
        raise AnswerError("Type the model's reply: the tool gets it as the model's answer.")
    if not isinstance(model, str):
        raise AnswerError("The model's name must be text.")
    return {
        "role": "assistant",
        "content": {"type": "text", "text": text},
        "model": model,
        "stopReason": "endTurn",
    }


def _roots(content: dict[str, Any]) -> list[dict[str, str]]:
    """The roots the person entered: each a URI (file:///home/me/project) and an optional name."""
    entered = content.get("roots")
    if not isinstance(entered, list):
        raise AnswerError('The roots must be a list, like [{"uri": "file:///home/me/project"}].')
    roots: list[dict[str, str]] = []
    for n, root in enumerate(entered, 1):
        uri = root.get("uri") if isinstance(root, dict) else None
        if not isinstance(uri, str) or not _URI.match(uri.strip()):
            raise AnswerError(f"Root {n}: its URI must look like file:///home/me/project.")
        one = {"uri": uri.strip()}
        name = root.get("name")
        if isinstance(name, str) and name.strip():
            one["name"] = name.strip()
        roots.append(one)
    return roots
