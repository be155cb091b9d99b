"""Celery application: background tools run here when a broker is configured."""

import os

from celery import Celery, signals

from mcp_app.content import render_pool
from mcp_app.infra import tracing

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

app = Celery("mcpsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The background tools' task; the caller side enqueues it by name and never imports it.
app.autodiscover_tasks(["mcp_app.background"], related_name="job")


@signals.worker_init.connect(weak=False)
def trace_the_worker(**_: object) -> None:
    """Off unless OTEL_TRACES_EXPORTER is set (AMB-85). In the worker's main process, before its pool
    forks: the batch processor restarts its thread in each child."""
    tracing.configure("mcp-platform-worker")


@signals.worker_process_init.connect(weak=False)
def warm_the_render_processes(**_: object) -> None:
    """In each pool child, where jobs render templates: start the render processes' forkserver now."""
    render_pool.warm()
