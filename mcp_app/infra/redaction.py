"""What telemetry may keep of a URL: the names of its query parameters, never their values.

One rule for every place that writes a URL out of the process (Daphne's access log, trace spans): a
query value may be a token a client put in the URL, a legacy session id (a public tenant's only
credential) or a tool's argument, so none is kept.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlencode

REDACTED = "REDACTED"


def redact_query(query: str) -> str:
    """`a=1&b=2` -> `a=REDACTED&b=REDACTED`."""
    return urlencode([(name, REDACTED) for name, _ in parse_qsl(query, keep_blank_values=True)])


def redact_path(path: str) -> str:
    """A request target (`/p?q`) with its query values redacted; a path without a query unchanged."""
    base, sep, query = path.partition("?")
    return f"{base}?{redact_query(query)}" if sep else path
