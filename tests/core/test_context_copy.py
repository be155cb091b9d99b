"""`RequestContext.but`: a copy with some fields changed, as `dataclasses.replace` makes one, cheaper."""

from __future__ import annotations

import dataclasses

import pytest

from mcp_app.core.context import RequestContext
from mcp_app.core.types import TenantInfo


def test_a_copy_changes_only_what_it_names_and_refuses_a_field_that_does_not_exist() -> None:
    tenant = TenantInfo(id=1, slug="t", name="t")
    ctx = RequestContext(tenant=tenant, subject="s", carried={"k": 1})

    async def ask(request: dict) -> dict:
        return {}

    copy = ctx.but(ask=ask, call_id="c")
    assert copy.ask is ask and copy.call_id == "c" and ctx.call_id == ""
    assert copy == dataclasses.replace(ctx, ask=ask, call_id="c")
    with pytest.raises(dataclasses.FrozenInstanceError):
        copy.subject = "other"  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field asks"):
        ctx.but(asks=ask)
