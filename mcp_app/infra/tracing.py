"""OpenTelemetry traces: off unless OTEL_TRACES_EXPORTER names an exporter (docs/operations.md, AMB-85).

This module is all that the request path sees of tracing. While tracing is off, `active` is None, one
attribute read is the whole cost and nothing of OpenTelemetry is imported. `configure()` (called by
mcpsite/asgi.py and by a Celery worker as it starts) switches it on from the standard OTEL_* variables:
infra/otel.py then sets up the SDK, its exporters and the official instrumentations.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# infra.otel.Tracing once configure() has switched tracing on; None means off.
active: Any = None


def requested(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the environment asks for traces: OTEL_TRACES_EXPORTER set to something other than none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = {name.strip().lower() for name in environ.get("OTEL_TRACES_EXPORTER", "").split(",")}
    return bool(names - {"", "none"})


def configure(service: str) -> None:
    """Switch tracing on for this process when the environment asks for it; safe to call twice.

    `service` is the default `service.name` (OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES win).
    """
    global active
    if active is not None or not requested():
        return
    try:
        # Imported here and only here: with tracing off the SDK and the instrumentations never load.
        from mcp_app.infra import otel  # noqa: PLC0415
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER is set but OpenTelemetry is not installed ({exc.name}): "
            "pip install -e '.[otel]'"
        ) from exc
    active = otel.configure(service)


def instrument_asgi(app: Any) -> Any:
    """The ASGI application, wrapped by OpenTelemetry's middleware when tracing is on."""
    return app if active is None else active.wrap_asgi(app)
