"""logging/setLevel (checklist §5.7)."""

from __future__ import annotations

import pytest

from mcp_app.core.notifications import LOG_LEVELS
from mcp_app.protocol.jsonrpc import INVALID_PARAMS
from tests.protocol.support import error_of, result_of
from tests.support import make_ctx


@pytest.mark.parametrize("level", LOG_LEVELS)
async def test_lg01_lg02_every_rfc5424_level_is_accepted_and_stored_in_the_session(tenant_a, level):
    ctx = make_ctx(tenant_a)
    assert await result_of(ctx, "logging/setLevel", {"level": level}) == {}
    assert ctx.session.log_level == level


@pytest.mark.parametrize("level", ["WARN", "warn", "INFO", "trace", "fatal", "", None, 3])
async def test_lg02_an_invalid_level_is_invalid_params(tenant_a, level):
    ctx = make_ctx(tenant_a)
    error = await error_of(ctx, "logging/setLevel", {"level": level})
    assert error["code"] == INVALID_PARAMS
    assert ctx.session.log_level is None


async def test_lg02_a_missing_level_is_invalid_params(tenant_a):
    error = await error_of(make_ctx(tenant_a), "logging/setLevel", {})
    assert error["code"] == INVALID_PARAMS


async def test_amb22_set_level_without_a_session_is_accepted_without_effect(tenant_a):
    assert await result_of(make_ctx(tenant_a, session=None), "logging/setLevel", {"level": "error"}) == {}
