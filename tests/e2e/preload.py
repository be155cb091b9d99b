"""What the project's server processes import before reading their settings, for tests/zygote.py.

Libraries only: Django's settings, the apps and `mcpsite` are read by each forked process from its own
environment, and nothing here starts a thread, opens a connection or makes an event loop (Daphne's
server module would install its reactor on a loop: it is left to each process).
"""

import celery.app.base  # noqa: F401
import channels.generic.http  # noqa: F401
import channels_redis.core  # noqa: F401
import django.contrib.admin.options  # noqa: F401
import django.core.handlers.asgi  # noqa: F401
import django.db.models  # noqa: F401
import django.forms  # noqa: F401
import django.template  # noqa: F401
import httpx  # noqa: F401
import jsonschema  # noqa: F401
import kombu  # noqa: F401
import mcp.client  # noqa: F401
import psycopg  # noqa: F401
import pydantic  # noqa: F401
import redis.asyncio  # noqa: F401
import rest_framework  # noqa: F401
import twisted.internet.asyncioreactor  # noqa: F401
import twisted.web.http  # noqa: F401
import yaml  # noqa: F401
