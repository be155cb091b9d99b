"""A background tool asks the person, run by a real Celery worker and called by the official SDK client.

legacy: the worker's question goes to the waiting Daphne, which asks on the call's stream; the SDK's
answer POST (here or on the other Daphne) is handed back to the worker, whose handler resumes.
auto (2026-07-28): the job ends with the question, the call returns InputRequiredResult, and the
SDK's retry with the answer runs as a second job.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.e2e.helpers import (
    answered_on_the_other_server,
    call_answering_a_name,
    wait_until,
    wait_until_served,
)
from tests.e2e.servers import DaphneServer, ServerProcess, django_shell

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"),
    pytest.mark.services(reason="background tools run on a Celery worker, which needs the Redis broker"),
]

TOOL = "ask_name_in_background"


@pytest.fixture(scope="module")
def ask_tool(server: DaphneServer, celery_worker: ServerProcess) -> Iterator[str]:
    """A background python-kind tool of the demo tenant whose callable asks for a name."""
    django_shell(
        server.env,
        "from mcp_app.models import Tool\nfrom tenants.models import Tenant\n"
        f"Tool.objects.update_or_create(tenant=Tenant.objects.get(slug='demo'), name={TOOL!r}, "
        "defaults=dict(handler='python', handler_config={'callable': 'ask_name'}, timeout_seconds=60, "
        "execution='background'))\n",
    )
    wait_until_served(server.mcp_url(), TOOL)
    yield TOOL
    django_shell(
        server.env, f"from mcp_app.models import Tool\nTool.objects.filter(name={TOOL!r}).delete()\n"
    )


def worker_said(worker: ServerProcess, outcome: str) -> int:
    """How many of this tool's jobs the worker logged as ending with `outcome`."""
    pattern = re.compile(rf"job \S+ \(tool {TOOL}\) {outcome}")
    return sum(1 for line in worker.read_log().splitlines() if pattern.search(line))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
@pytest.mark.parametrize(
    ("action", "expected"), [("accept", "Hello, Ada!"), ("decline", "No name given (decline).")]
)
async def test_the_sdk_answers_a_background_tools_question_and_the_worker_finishes_with_it(
    server: DaphneServer, celery_worker: ServerProcess, ask_tool: str, mode: str, action: str, expected: str
) -> None:
    finished, rounds = worker_said(celery_worker, "finished"), worker_said(celery_worker, r"ended .*Asked")
    asked, result = await call_answering_a_name(server.mcp_url(), mode, ask_tool, action)
    assert asked == ["Who are you?"]
    assert result.content[0].text == expected
    # It ran on the worker: one job (legacy), or one that asked and the retry's (2026-07-28).
    await wait_until(lambda: worker_said(celery_worker, "finished") == finished + 1, "the worker's log line")
    assert worker_said(celery_worker, r"ended .*Asked") == rounds + (mode == "auto")


async def test_a_legacy_answer_posted_to_the_other_daphne_reaches_the_worker_waiting_for_it(
    server: DaphneServer, server_b: DaphneServer, celery_worker: ServerProcess, ask_tool: str
) -> None:
    text = await answered_on_the_other_server(server.mcp_url(), server_b.mcp_url(), ask_tool, "Bo")
    assert text == "Hello, Bo!"
