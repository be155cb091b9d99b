"""What the authorization server did in this process, counted for /metrics (mcp_app/operations/metrics.py).

In memory only (a Prometheus server scrapes each process): tokens issued and refused at the token
endpoint, registrations accepted and refused, sign-ins and failed sign-ins (admin and OAuth login).
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from django.contrib.auth.signals import user_logged_in, user_login_failed

_lock = threading.Lock()
_counts: Counter[tuple[str, str]] = Counter()


def count(kind: str, outcome: str) -> None:
    with _lock:
        _counts[(kind, outcome)] += 1


def snapshot() -> dict[tuple[str, str], int]:
    with _lock:
        return dict(_counts)


def _signed_in(**_: Any) -> None:
    count("sign_in", "ok")


def _sign_in_failed(**_: Any) -> None:
    count("sign_in", "failed")


user_logged_in.connect(_signed_in, dispatch_uid="mcp-metrics-sign-in")
user_login_failed.connect(_sign_in_failed, dispatch_uid="mcp-metrics-sign-in-failed")
