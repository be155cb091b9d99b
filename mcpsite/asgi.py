"""ASGI entry point: MCP endpoints through Channels, everything else through Django."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402

from mcp_app.content import render_pool  # noqa: E402
from mcp_app.infra import tracing  # noqa: E402
from mcp_app.transport.daphne_tuning import (  # noqa: E402
    disable_form_parsing,
    drain_before_shutdown,
    freeze_startup_heap,
    reap_finished_requests_at_once,
    redact_access_log,
    watch_upstreams_when_serving,
)
from mcp_app.transport.lifespan import lifespan  # noqa: E402
from mcp_app.transport.routing import asgi_route  # noqa: E402
from mcp_app.transport.routing import urlpatterns as mcp_urlpatterns  # noqa: E402

disable_form_parsing()  # Daphne hands bodies over raw; Twisted's form parsing is pure cost
redact_access_log()  # a token a client put in the URL never reaches the access log
drain_before_shutdown()  # SIGTERM: stop listening, finish calls in flight, end streams (streams/drain.py)
reap_finished_requests_at_once()  # a finished request is not kept for Daphne's once-a-second sweep
watch_upstreams_when_serving()  # listen to upstreams' list changes while serving (upstreams/watcher.py)
render_pool.warm()  # the first large template must not wait for the render processes' Django start-up

application = ProtocolTypeRouter(
    {
        "http": URLRouter([*mcp_urlpatterns, asgi_route(r"", django_asgi_app)]),
        "lifespan": lifespan,  # uvicorn's start and stop (Daphne sends none)
    }
)
# Off unless OTEL_TRACES_EXPORTER is set (AMB-85): then every request, MCP ones included, has a span.
tracing.configure("mcp-platform")
application = tracing.instrument_asgi(application)

# Everything loaded so far lives as long as the process: keep full collections from scanning it.
freeze_startup_heap()
