"""The MCP Registry, both ways (issue 36 §2, docs/decisions/registry.md).

Served (AMB-372): the registry API's v0.1 read endpoints over the tenants their owners list
(`serving.py`), each as a server.json (`server_json.py`) named under the platform's namespace
(`names.py`). Used (AMB-373): a registry's entries read through the SSRF guard (`client.py`) and turned
into what the upstream form needs (`proposals.py`); the admin and the API fill their upstream forms
from those, and the upstream's tools still wait for the pinned review.
"""
