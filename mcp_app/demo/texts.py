"""What the demo tenant says about itself, made from its definitions so that it cannot drift (AMB-125):
the `instructions` initialize and server/discover send, and the demo://readme text."""

from __future__ import annotations

from typing import Any


def _names(names: list[str]) -> str:
    """`a`, `b` and `c`."""
    quoted = [f"`{name}`" for name in names]
    return quoted[0] if len(quoted) == 1 else ", ".join(quoted[:-1]) + " and " + quoted[-1]


def readme(definitions: dict[str, list[dict[str, Any]]]) -> str:
    """The demo://readme text, listing what `definitions` hold (so it cannot drift from them)."""
    tools = _names([t["name"] for t in definitions["tools"]])
    prompts = _names([p["name"] for p in definitions["prompts"]])
    resources = ", ".join(f"`{r['uri']}`" for r in definitions["resources"])
    templates = ", ".join(f"`{t['uri_template']}`" for t in definitions["templates"])
    return (
        "# Demo MCP server\n\nThis tenant shows what the platform serves without any code:\n\n"
        f"- tools {tools};\n- prompts {prompts};\n- resources {resources};\n"
        f"- the resource template {templates}.\n\n"
        "Edit any of them in /admin and connected clients are told at once.\n"
    )


def instructions(definitions: dict[str, list[dict[str, Any]]]) -> str:
    """What `initialize` and server/discover tell clients: every demo tool by name and title."""
    tools = "; ".join(f"{t['name']} ({t.get('title') or t['name']})" for t in definitions["tools"])
    prompts = " and ".join(p["name"] for p in definitions["prompts"])
    return (
        f"This demo server offers the tools {tools}; the prompts {prompts}; and demo:// resources. "
        "Use count_slowly to see progress notifications; count_in_background does the same on a "
        "background worker; ask_user asks the person for their name."
    )
