"""No template can occupy the event loop (AMB-97, AMB-98): budgets inside the engine, render processes."""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import time

import pytest

from mcp_app.content import render_pool, rendering, sandbox
from mcp_app.core.errors import ContentError
from tests.support import make_ctx

pytestmark = pytest.mark.usefixtures("render_processes")


@pytest.fixture
def pool_jobs(monkeypatch) -> list[str]:
    """The kind of every job sent to a render process during the test."""
    sent: list[str] = []
    real_run = render_pool.RenderPool.run

    async def spy(self: render_pool.RenderPool, tenant: str, job: tuple, seconds: float) -> object:
        sent.append(job[0])
        return await real_run(self, tenant, job, seconds)

    monkeypatch.setattr(render_pool.RenderPool, "run", spy)
    return sent


# The template: 50^4 iterations, 6.25 million characters; it ran 17.5 s on the event loop.
NESTED_LOOPS = (
    '{% for a in "x"|ljust:50 %}{% for b in "x"|ljust:50 %}{% for c in "x"|ljust:50 %}'
    '{% for d in "x"|ljust:50 %}x{% endfor %}{% endfor %}{% endfor %}{% endfor %}'
)
# The same iterations with no output: only the deadline can stop it.
SILENT_LOOPS = NESTED_LOOPS.replace("%}x{%", "%}{%")


def test_a_render_stops_at_its_deadline_while_it_runs():
    started = time.monotonic()
    with pytest.raises(ContentError, match="did not finish rendering"):
        sandbox.render_text(SILENT_LOOPS, {}, sandbox.full_budget(0.3))
    assert time.monotonic() - started < 1.0


def test_the_output_cap_stops_rendering_when_it_is_reached_not_after():
    budget = sandbox.full_budget(30)
    budget.max_chars = 10_000
    started = time.monotonic()
    with pytest.raises(ContentError, match="longer than 10000 characters; rendering was stopped"):
        sandbox.render_text(NESTED_LOOPS, {}, budget)
    assert budget.chars <= 10_001 and time.monotonic() - started < 1.0


def test_a_loop_counts_its_output_once_however_deeply_nested():
    budget = sandbox.full_budget()
    text = sandbox.render_text(
        "{% for a in s %}{% for b in s %}ab{% endfor %}{% endfor %}", {"s": "xyz"}, budget
    )
    assert text == "ab" * 9 and budget.chars == 18


def test_join_refuses_a_quadratic_result_before_it_builds_it():
    started = time.monotonic()
    with pytest.raises(ContentError, match="joined text would be longer"):
        sandbox.render_text("{{ s|make_list|join:s }}", {"s": "x" * 10_000})
    assert time.monotonic() - started < 0.5


def test_a_filter_result_past_the_value_cap_stops_the_render():
    budget = sandbox.full_budget()
    budget.max_value = 1_000
    with pytest.raises(ContentError, match="longer than 1000 characters or items"):
        sandbox.render_text("{{ s|add:s }}", {"s": "x" * 600}, budget)  # each input fits, the result does not


def test_doubling_values_stop_at_the_value_cap():
    source = "{% with a=s|add:s %}{% with b=a|add:a %}{% with c=b|add:b %}{{ c|add:c }}{% endwith %}{% endwith %}{% endwith %}"
    budget = sandbox.full_budget()
    budget.max_value = 1_000
    with pytest.raises(ContentError, match="longer than 1000 characters or items"):
        sandbox.render_text(source, {"s": "x" * 200}, budget)


def test_floatformat_precision_is_capped_like_the_widths():
    with pytest.raises(ContentError, match="floatformat precision filter width may be at most 10000"):
        sandbox.render_text("{{ '1'|floatformat:1000000 }}", {})


def test_unordered_list_refuses_output_past_the_value_cap():
    deep: list = ["x"]
    for _ in range(60):
        deep = ["x", deep]
    budget = sandbox.full_budget()
    budget.max_value = 500
    with pytest.raises(ContentError, match="list would render longer"):
        sandbox.render_text("{{ l|unordered_list }}", {"l": deep}, budget)


def test_a_template_nested_past_the_recursion_limit_is_a_content_error():
    source = "{% if a %}" * 3000 + "{% endif %}" * 3000
    with pytest.raises(ContentError, match="nests its tags too deeply"):
        sandbox.compile_template(source)


def test_an_inline_budget_gives_up_on_long_sequences_and_slow_filters():
    inline = rendering._inline_budget
    with pytest.raises(sandbox.Exceeded):
        sandbox.render_text("{% for x in l %}{% endfor %}", {"l": list(range(5000))}, inline())
    with pytest.raises(sandbox.Exceeded):
        sandbox.render_text("{{ s|urlize }}", {"s": "www.example.com"}, inline())
    assert sandbox.render_text("{{ s|upper }}", {"s": "ok"}, inline()) == "OK"


async def test_a_small_template_renders_inline_without_a_render_process(ctx, monkeypatch):
    def no_pool() -> render_pool.RenderPool:
        raise AssertionError("a small template went to a render process")

    monkeypatch.setattr(render_pool, "pool", no_pool)
    assert await rendering.text(ctx, "Hi {{ name }}!", {"name": "Ann"}) == "Hi Ann!"
    value = await rendering.value(ctx, {"n": "{{ n }}", "s": "{{ n }}!"}, {"n": 2})
    assert value == {"n": 2, "s": "2!"}


async def test_a_template_past_the_inline_budget_renders_in_a_process_and_goes_there_next_time(
    ctx, monkeypatch, pool_jobs
):
    source = "{% for a in s %}{% for b in s %}{{ a }}{{ b }}{% endfor %}{% endfor %} " + "x" * 10
    variables = {
        "s": "abcdefghijklmnopqrstuvwxyz" * 6
    }  # 156² pairs: 48 672 pairs, 97 344 characters, > inline
    expected = sandbox.render_text(source, variables)
    sent = pool_jobs
    assert await rendering.text(ctx, source, variables) == expected
    assert (ctx.tenant.id, source) in rendering._heavy and sent == ["text"]
    inline_attempts: list[object] = []
    monkeypatch.setattr(rendering, "_inline_budget", lambda: inline_attempts.append(1))
    assert await rendering.text(ctx, source, variables) == expected
    assert inline_attempts == [] and sent == ["text", "text"]  # straight to a render process


async def test_a_source_sent_to_a_render_process_by_one_tenants_values_stays_inline_for_another(
    ctx, tenant_b, pool_jobs
):
    """A hostile client's huge value makes `{{ message }}` go past the inline budget in its tenant: that
    tenant's next renders of it go to a render process; another tenant's tool of the same text stays
    inline (it was remembered by text alone: every tenant's `{{ message }}` went to the processes)."""
    rendering.forget()
    huge = {"message": "x" * (rendering.INLINE_VALUE * 20)}
    assert await rendering.text(ctx, "{{ message }}", huge) == huge["message"]
    assert pool_jobs == ["text"]
    other = make_ctx(tenant_b, "2025-06-18")
    assert await rendering.text(other, "{{ message }}", {"message": "hi"}) == "hi"
    assert pool_jobs == ["text"], "another tenant's render of the same text went to a render process"
    assert await rendering.text(ctx, "{{ message }}", {"message": "hi"}) == "hi"
    assert pool_jobs == ["text", "text"]  # the tenant whose render went past the budget: remembered


async def test_the_hostile_template_ends_with_a_clear_error_within_the_render_bound(ctx, settings):
    settings.MCP_TEMPLATE_SECONDS = 1
    started = time.monotonic()
    with pytest.raises(ContentError, match="did not finish rendering within 1 seconds"):
        await rendering.text(ctx, SILENT_LOOPS, {})
    assert time.monotonic() - started < 3.0


async def test_a_caller_that_stops_waiting_kills_the_process_rendering_for_it():
    pool = render_pool.RenderPool(size=1, per_tenant=1)
    before = {p.pid for p in _render_processes()}
    task = asyncio.ensure_future(pool.run("t", ("text", SILENT_LOOPS, {}, 30.0), 30.0))
    deadline = time.monotonic() + 20
    while not (new := [p.pid for p in _render_processes() if p.pid not in before]):
        assert time.monotonic() < deadline, "no render process started"
        await asyncio.sleep(0.05)
    (pid,) = new
    await asyncio.sleep(0.3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    while _alive(pid):
        assert time.monotonic() < deadline, "the render process outlived its caller"
        await asyncio.sleep(0.05)
    # The pool forks a new process for the next job.
    assert await pool.run("t", ("text", "{{ a }}", {"a": "ok"}, 5.0), 5.0) == "ok"


async def test_one_tenant_never_takes_the_last_render_process():
    pool = render_pool.RenderPool(size=2, per_tenant=1)
    hostile = ("text", SILENT_LOOPS, {}, 3.0)
    held = [asyncio.ensure_future(pool.run("hostile", hostile, 3.0)) for _ in range(3)]
    await asyncio.sleep(0.5)
    assert pool._busy["hostile"] == 1  # its other two calls wait for its own share
    started = time.monotonic()
    assert await pool.run("other", ("text", "{{ a }}", {"a": "fine"}, 5.0), 5.0) == "fine"
    assert time.monotonic() - started < 2.0  # not behind the hostile tenant's 3-second renders
    for task in held:
        task.cancel()
    await asyncio.gather(*held, return_exceptions=True)


def _render_processes() -> list[multiprocessing.process.BaseProcess]:
    return [p for p in multiprocessing.active_children() if p.name == "mcp-template"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().split()[2] != "Z"


def test_a_large_template_compiles_for_validation_in_a_render_process_not_in_this_thread(pool_jobs):
    sent = pool_jobs
    large = "{{ a }}" * 500
    rendering.validate(large)
    with pytest.raises(ContentError, match="Template syntax error"):
        rendering.validate(large + "{% if %}")
    with pytest.raises(ContentError, match="nests its tags too deeply"):
        rendering.validate("{% if a %}" * 3000 + "{% endif %}" * 3000)
    assert sent == ["check", "check", "check"]
    rendering.validate("{{ a }} and {{ b }}")  # a small one compiles here
    assert sent == ["check", "check", "check"]
