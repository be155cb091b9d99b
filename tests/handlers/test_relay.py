"""An upstream's progress and log messages reach the client within bounds (core.notifications.Relay)."""

from __future__ import annotations

import dataclasses

import pytest

from mcp_app.core import notifications
from mcp_app.core.notifications import Relay

pytestmark = pytest.mark.django_db


def progress_values(recorder) -> list[float]:  # noqa: ANN001
    return [m["params"]["progress"] for m in recorder.messages if m["method"] == "notifications/progress"]


def log_texts(recorder) -> list[str]:  # noqa: ANN001
    return [m["params"]["data"] for m in recorder.messages if m["method"] == "notifications/message"]


async def test_a_flood_of_progress_is_coalesced_and_the_last_value_arrives(ctx, recorder) -> None:
    relay = Relay(ctx)
    for i in range(1, 301):
        await relay.progress(i, 300)
    burst = int(notifications.PROGRESS_BURST)
    assert progress_values(recorder) == list(range(1, burst + 1))  # the rest came too fast
    await relay.finish()
    assert progress_values(recorder) == [*range(1, burst + 1), 300]


async def test_log_messages_past_the_burst_are_counted_and_said_once(ctx, recorder) -> None:
    relay = Relay(ctx)
    for i in range(200):
        await relay.log("info", f"line {i}")
    burst = int(notifications.LOG_BURST)
    assert log_texts(recorder) == [f"line {i}" for i in range(burst)]
    await relay.finish()
    assert log_texts(recorder)[-1].startswith(f"{200 - burst} log message(s) of this call were left out")


async def test_a_log_message_the_client_does_not_see_costs_no_allowance(ctx, recorder) -> None:
    relay = Relay(dataclasses.replace(ctx, session=dataclasses.replace(ctx.session, log_level="error")))
    for i in range(200):
        await relay.log("info", f"line {i}")
    await relay.log("error", "the one that counts")
    await relay.finish()
    assert log_texts(recorder) == ["the one that counts"]
