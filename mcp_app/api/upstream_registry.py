"""The API's "Add an upstream from a registry" (AMB-373): search a registry, create an upstream from an entry.

``POST upstreams/registry-search/`` reads one page of a registry's list (mcp_app/registry/client.py:
through the SSRF guard, bounded in time and size) and answers each entry as the upstream it would make
(mcp_app/registry/proposals.py: each remote with the headers it needs and why it is refused, if it is).
``POST upstreams/from-registry/`` reads the chosen entry again from the registry (the person names it;
the platform never trusts a client's copy of it) and creates the upstream through the same serializer
as ``POST upstreams/`` (``full_clean``, history, audit): nothing is published, its tools wait for a
sync and the pinned review as any upstream's. Both are POSTs for editors, as Test connection: they make
the platform call out. A registry that cannot be read is a 502 ``registry_unreachable`` saying why.
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from mcp_app.registry import client
from mcp_app.registry.proposals import propose

UNREACHABLE = "registry_unreachable"


class RegistryField(serializers.CharField):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(
            required=False,
            allow_blank=True,
            max_length=2000,
            help_text="The registry's base URL (default: the official MCP Registry, MCP_REGISTRY_URL).",
            **kwargs,
        )


def _registry(value: str) -> str:
    try:
        return client.registry_url(value)
    except client.RegistryError as exc:
        raise serializers.ValidationError(exc.message) from None


class SearchSerializer(serializers.Serializer):
    registry = RegistryField()
    search = serializers.CharField(required=False, allow_blank=True, max_length=client.MAX_SEARCH)
    cursor = serializers.CharField(required=False, allow_blank=True, max_length=1000)
    limit = serializers.IntegerField(required=False, min_value=1, max_value=client.MAX_PAGE, default=30)

    def validate_registry(self, value: str) -> str:
        return _registry(value)


class HeaderSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField(allow_blank=True)
    is_required = serializers.BooleanField(source="required")


class RemoteSerializer(serializers.Serializer):
    url = serializers.CharField()
    transport = serializers.CharField()
    headers = HeaderSerializer(many=True, help_text="Headers it needs: enter them as `secrets`.")
    refused = serializers.CharField(allow_blank=True, help_text="Why it cannot be used; empty when it can.")


class ProposalSerializer(serializers.Serializer):
    server_name = serializers.CharField()
    version = serializers.CharField(allow_blank=True)
    title = serializers.CharField(allow_blank=True)
    description = serializers.CharField(allow_blank=True)
    upstream_name = serializers.CharField(help_text="The upstream name from-registry gives by default.")
    prefix = serializers.CharField()
    remotes = RemoteSerializer(many=True, help_text="Empty: a package-only server (stdio), not an upstream.")


class SearchResultSerializer(serializers.Serializer):
    registry = serializers.CharField()
    servers = ProposalSerializer(many=True)
    next_cursor = serializers.CharField(allow_blank=True)
    skipped = serializers.IntegerField(
        help_text="Entries the registry gave that are not server.json objects."
    )


class FromRegistrySerializer(serializers.Serializer):
    registry = RegistryField()
    server_name = serializers.CharField(max_length=200)
    version = serializers.CharField(max_length=255, default="latest")
    remote = serializers.IntegerField(min_value=0, max_value=9, default=0, help_text="Which of its remotes.")
    name = serializers.CharField(required=False, max_length=63, help_text="Default: from the server's name.")
    prefix = serializers.CharField(required=False, allow_blank=True, max_length=32)
    secrets = serializers.DictField(
        child=serializers.CharField(allow_blank=True, trim_whitespace=False),
        required=False,
        default=dict,
        help_text="The values of the headers the remote needs (stored encrypted, never returned).",
    )

    def validate_registry(self, value: str) -> str:
        return _registry(value)


def search(data: dict[str, Any]) -> dict[str, Any]:
    """One page of the registry as proposals; client.RegistryError when it cannot be read."""
    page = client.search(data.get("registry"), data.get("search", ""), data.get("cursor", ""), data["limit"])
    return {
        "registry": client.registry_url(data.get("registry")),
        "servers": [propose(server) for server in page.servers],
        "next_cursor": page.next_cursor,
        "skipped": page.skipped,
    }


def upstream_fields(data: dict[str, Any]) -> dict[str, Any]:
    """The body of ``POST upstreams/`` the chosen entry makes, read again from the registry.

    Raises client.RegistryError (not readable) or serializers.ValidationError (the entry or the
    person's choices cannot make an upstream: no such remote, a refused URL, a required header unset).
    """
    proposal = propose(client.server_version(data.get("registry"), data["server_name"], data["version"]))
    if data["remote"] >= len(proposal.remotes):
        raise serializers.ValidationError(
            {
                "remote": [
                    f"The entry has {len(proposal.remotes)} remote(s) the platform can use (streamable-http or sse)."
                ]
            }
        )
    remote = proposal.remotes[data["remote"]]
    if remote.refused:
        raise serializers.ValidationError({"remote": [f"{remote.url}: {remote.refused}"]})
    secrets = data.get("secrets") or {}
    missing = [h.name for h in remote.headers if h.required and not secrets.get(h.name)]
    if missing:
        raise serializers.ValidationError(
            {"secrets": [f"The server needs these headers: {', '.join(missing)}."]}
        )
    body: dict[str, Any] = {
        "name": data.get("name") or proposal.upstream_name,
        "url": remote.url,
        "transport": remote.transport,
        "prefix": data.get("prefix", proposal.prefix),
    }
    if secrets:
        body["secrets"] = secrets
    return body
