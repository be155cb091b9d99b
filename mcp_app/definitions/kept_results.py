"""Which tools may have their results kept (AMB-374; protocol/result_cache.py keeps them)."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ValidationError


def problems(tool: Any) -> list[str]:
    """Why a tool's results may not be kept (AMB-374): a result answered from memory must be one the
    tool would give again, to the same caller, without side effects or questions."""
    annotations = tool.annotations if isinstance(tool.annotations, dict) else {}
    problems = []
    if annotations.get("readOnlyHint") is not True or annotations.get("idempotentHint") is not True:
        problems.append(
            "Only a tool marked readOnlyHint and idempotentHint (true) may have its results kept: "
            "set both annotations, or keep results 0 seconds."
        )
    if tool.execution == "background":
        problems.append("A background tool's results are not kept: keep results 0 seconds.")
    if tool.handler == "form" or tool.approval != "off":
        problems.append("A tool that asks the person each call cannot answer from a kept result.")
    return problems


def check(tool: Any) -> None:
    """Refuse keeping the results of a tool that may not have them kept, on its field."""
    if tool.result_cache_seconds and (found := problems(tool)):
        raise ValidationError({"result_cache_seconds": found})
