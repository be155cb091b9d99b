"""What each question a server asks needs of the client, in plain words, and what to do without it.

The person who meets a refusal (a user in their client, an owner on the admin's Try page) reads these:
`protocol/asking.py` builds its refusals from them, in either era.
"""

from __future__ import annotations

PLAIN: dict[str, tuple[str, str]] = {
    "elicitation": (
        "to ask the person a question in a form (elicitation)",
        "Use a client that supports elicitation, or change the tool so that it does not ask.",
    ),
    "elicitation.url": (
        "to send the person to a web page (URL-mode elicitation)",
        "Use a client that supports URL-mode elicitation.",
    ),
    "sampling": (
        "a reply from the client's own language model (sampling)",
        "Use a client that supports sampling, or give the llm tool an endpoint of its own so that it asks "
        "no client.",
    ),
    "roots": (
        "the list of folders or places the client shares (roots)",
        "Use a client that shares roots (most editors and IDEs do).",
    ),
}


def plain(capability: str) -> tuple[str, str]:
    """(what the question needs, what to do) for a client capability such as "sampling"."""
    return PLAIN.get(capability, (f"the client capability {capability!r}", "Use a client that declares it."))


def refusal(capability: str, version: str, since: str = "") -> str:
    """Why a legacy client was not asked: it did not declare `capability`, or (`since`) its revision
    `version` predates the question's."""
    needs, fix = plain(capability)
    if since:
        return (
            f"This tool needs {needs}, which a client on protocol revision {version} cannot give "
            f"(it came with {since}). Use a client on {since} or newer."
        )
    return f"This tool needs {needs}, and this client did not declare {capability!r} support, so it was not asked. {fix}"
