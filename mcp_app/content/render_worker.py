"""The render process's side (AMB-98): take one job at a time from a pipe, render it, answer.

A job is ``(kind, payload, variables, seconds)``: ``"text"`` renders a template string, ``"value"``
the templates inside a JSON value, ``"check"`` only compiles one (validation). The answer is
``("ok", result)`` or ``("error", message)``: a message safe to show the template's author.
"""

from __future__ import annotations

import logging
import os
import resource
from multiprocessing.connection import Connection
from typing import Any

import django
from django.apps import apps

from mcp_app.content import sandbox
from mcp_app.core.errors import ContentError

logger = logging.getLogger(__name__)

# Address space a render may add to what the process inherits from the forkserver.
MEMORY_HEADROOM_BYTES = 1024 * 1024 * 1024
# Below the serving processes: a render shares the machine's cores, never takes them from requests.
NICENESS = 10


def _limit_memory() -> None:
    with open("/proc/self/statm") as statm:
        size = int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    limit = size + MEMORY_HEADROOM_BYTES
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def run_job(job: tuple[str, Any, dict[str, Any], float]) -> tuple[str, Any]:
    """Render one job under the full budget; never raises."""
    kind, payload, variables, seconds = job
    try:
        budget = sandbox.full_budget(seconds)
        if kind == "text":
            return "ok", sandbox.render_text(payload, variables, budget)
        if kind == "value":
            return "ok", sandbox.render_value(payload, variables, budget)
        if kind == "check":
            sandbox.validate_template(payload)
            return "ok", None
        return "error", f"Unknown render job {kind!r}."
    except ContentError as exc:
        return "error", exc.message
    except MemoryError:
        return "error", "The template needed more memory than a render may use."
    except Exception:
        logger.exception("template render failed")
        return "error", "The template could not be rendered."


def serve(conn: Connection) -> None:
    """Answer jobs until the serving process closes its end of the pipe."""
    if not apps.ready:  # the forkserver's set-up failed or was skipped: do it here, once
        django.setup()
    os.nice(NICENESS)
    try:
        _limit_memory()
    except (OSError, ValueError):
        logger.warning("render process: could not cap its memory", exc_info=True)
    while True:
        try:
            job = conn.recv()
        except (EOFError, OSError):
            return
        try:
            conn.send(run_job(job))
        except (BrokenPipeError, OSError):
            return
