"""Celery application: background tools run here when a broker is configured."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

app = Celery("mcpsite")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The background tools' task; the caller side enqueues it by name and never imports it.
app.autodiscover_tasks(["mcp_app.background"], related_name="job")
