"""The pub/sub subscriber every in-process cache relies on (mcp_app/infra/pubsub.py)."""

from __future__ import annotations

import asyncio
import os
import random
import threading

import pytest

from mcp_app.infra import redis_client
from mcp_app.infra.pubsub import Subscriber


@pytest.mark.services
def test_an_event_loop_with_a_subscriber_always_closes(settings):
    """asyncio.run cancels the subscriber as its loop closes. redis-py's read timeout can swallow that
    cancel; the subscriber then read on forever and asyncio.run never returned (a long-lived shell of the
    e2e tests hung at its second vault call). Many short loops, each ended at another moment."""
    settings.REDIS_URL = os.environ["REDIS_URL"]
    subscriber = Subscriber("test:pubsub-close", lambda _data: None, lambda: None, "test")
    chance = random.Random(7)

    async def one(delay: float) -> None:
        subscriber.ensure()
        await redis_client.client().ping()
        await asyncio.sleep(delay)

    for attempt in range(150):
        delay = chance.choice([0, 0, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05])
        runner = threading.Thread(target=asyncio.run, args=(one(delay),), daemon=True)
        runner.start()
        runner.join(10)
        assert not runner.is_alive(), f"loop {attempt} (ended after {delay} s) never closed"
