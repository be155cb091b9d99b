"""Imported once by the render processes' forkserver (AMB-98): Django is set up before any fork.

Nothing else imports this module: every render process forked afterwards starts with the engine's
imports done, so forking one costs milliseconds instead of a Django start-up. A failure here is left
to the render process, which sets Django up itself and logs what went wrong.
"""

from __future__ import annotations

import contextlib

import django
from django.apps import apps

with contextlib.suppress(Exception):
    if not apps.ready:
        django.setup()
