# syntax=docker/dockerfile:1
# One image for every process of the platform: web (Daphne), worker (Celery) and release (migrate),
# chosen by bin/entrypoint's argument (docs/operations.md "Two processes and two workers", AMB-93).
#   docker build -t mcp-platform .
#   docker run --rm -p 8000:8000 -e SECRET_KEY=... -e DATABASE_URL=... -e REDIS_URL=... mcp-platform web

FROM python:3.12-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
WORKDIR /app
# Dependencies first, from pyproject.toml alone, so a code change does not reinstall them; the otel
# extra is included (it costs nothing while OTEL_TRACES_EXPORTER is unset: AMB-85).
COPY pyproject.toml ./
RUN python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print("\n".join(p["dependencies"] + p["optional-dependencies"]["otel"]))' > /tmp/requirements.txt \
 && /opt/venv/bin/pip install -r /tmp/requirements.txt
COPY . ./
# The project itself from pyproject.toml, editable as bin/serve installs it: it runs from /app, where
# its templates and static sources are.
RUN /opt/venv/bin/pip install --no-deps -e .

FROM python:3.12-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    DJANGO_SETTINGS_MODULE=mcpsite.settings
RUN groupadd --system --gid 10001 mcp && useradd --system --uid 10001 --gid mcp --home-dir /app mcp
COPY --from=build /opt/venv /opt/venv
COPY --from=build --chown=mcp:mcp /app /app
WORKDIR /app
USER mcp
# Static files are part of the image (WhiteNoise serves them). A throwaway SECRET_KEY: without one the
# settings would write a generated key into the image.
RUN SECRET_KEY=collectstatic-only python manage.py collectstatic --noinput --verbosity 0
EXPOSE 8000
# Daphne drains on SIGTERM (MCP_SHUTDOWN_GRACE_SECONDS) and Celery shuts down warm; bin/entrypoint
# execs, so the signal reaches them, not a shell.
STOPSIGNAL SIGTERM
# Liveness only: readiness (/health/ready) also depends on the database, Redis and a worker, and a
# container must not be restarted because one of those is away. Workers override or disable it.
HEALTHCHECK --interval=10s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/health/live' % os.environ.get('PORT', '8000'), timeout=2)"]
ENTRYPOINT ["bin/entrypoint"]
CMD ["web"]
