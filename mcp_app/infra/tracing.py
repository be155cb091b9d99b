"""OpenTelemetry traces: off unless OTEL_TRACES_EXPORTER names an exporter (docs/operations.md, AMB-85);
and the governance events as OpenTelemetry logs: off unless OTEL_LOGS_EXPORTER names one (AMB-358).

This module is all that the request path sees of tracing. While tracing is off, `active` is None, one
attribute read is the whole cost and nothing of OpenTelemetry is imported. `configure()` (called by
mcpsite/asgi.py and by a Celery worker as it starts) switches it on from the standard OTEL_* variables:
infra/otel.py then sets up the SDK, its exporters and the official instrumentations.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from django.core.exceptions import ImproperlyConfigured

# infra.otel.Tracing once configure() has switched tracing on; None means off.
active: Any = None
# infra.otel.EventLogs once configure() has switched the export of governance events on; None: off.
event_logs: Any = None


def requested(environ: Mapping[str, str] = os.environ, variable: str = "OTEL_TRACES_EXPORTER") -> bool:
    """Whether the environment asks for traces (or, by `variable`, logs): set to other than none."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = {name.strip().lower() for name in environ.get(variable, "").split(",")}
    return bool(names - {"", "none"})


def configure(service: str) -> None:
    """Switch tracing, and the export of governance events as logs, on for this process when the
    environment asks for them; safe to call twice.

    `service` is the default `service.name` (OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES win).
    """
    global active, event_logs
    traces, logs = active is None and requested(), event_logs is None and requested(variable="OTEL_LOGS_EXPORTER")
    if not traces and not logs:
        return
    try:
        # Imported here and only here: with both off the SDK and the instrumentations never load.
        from mcp_app.infra import otel  # noqa: PLC0415
    except ImportError as exc:
        raise ImproperlyConfigured(
            f"OTEL_TRACES_EXPORTER or OTEL_LOGS_EXPORTER is set but OpenTelemetry is not installed ({exc.name}): "
            "pip install -e '.[otel]'"
        ) from exc
    if traces:
        active = otel.configure(service)
    if logs:
        event_logs = otel.configure_logs(service, otel.log_exporters())


def export_events(events: Iterable[tuple[float, str, str, dict[str, Any]]]) -> None:
    """Each (time, event name, body, attributes) as an OpenTelemetry log record, when that is on."""
    if event_logs is not None:
        event_logs.emit(events)


def instrument_asgi(app: Any) -> Any:
    """The ASGI application, wrapped by OpenTelemetry's middleware when tracing is on."""
    return app if active is None else active.wrap_asgi(app)
