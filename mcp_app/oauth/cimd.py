"""Client ID metadata documents: django-oauth-toolkit's SSRF-hardened fetch, plus operator policy.

DOT's `SafeMetadataFetcher` refuses every non-public address and trusts only the system CAs. The
operator may name hosts whose documents may live on private or loopback addresses
(`MCP_CIMD_ALLOWED_HOSTS`, e.g. 127.0.0.1 in tests), hosts never to fetch (`MCP_CIMD_DENIED_HOSTS`),
and an extra CA bundle (`MCP_CIMD_CA_BUNDLE`). With all three empty this is DOT's strict default.
The fetched document must also pass our redirect URI rules, and its logo and links are kept for the
consent page.
"""

from __future__ import annotations

import socket
import ssl
import time
from typing import Any
from urllib.parse import urlparse

import urllib3
from django.conf import settings
from django.http.request import validate_host
from oauth2_provider import cimd as dot_cimd

from lib import nesting
from mcp_app.oauth import dot_compat, registration


def _host_of(client_id: str) -> str:
    return (urlparse(client_id).hostname or "").lower()


class DeniedHostsCIMDPermission:
    """Refuse client_id URLs on an operator-denied host before anything is fetched."""

    def has_permission(self, request: Any, client_id: str) -> bool:
        host = _host_of(client_id)
        return bool(host) and not validate_host(host, settings.MCP_CIMD_DENIED_HOSTS)


class McpMetadataFetcher(dot_cimd.SafeMetadataFetcher):
    """DOT's fetch (vetted IP, SNI, no redirects, deadline, size cap) with the operator's allow-list and CA."""

    def fetch(self, client_id: str) -> tuple[dict[str, Any], int]:
        parsed = dot_compat.validate_client_id_url(client_id)
        host = parsed.hostname.lower()
        if validate_host(host, settings.MCP_CIMD_DENIED_HOSTS):
            raise dot_cimd.CIMDError("client_id host is denied by the operator")
        port = parsed.port or 443
        ips = self._resolve(host, port)
        timeout = dot_cimd.oauth2_settings.CIMD_FETCH_TIMEOUT_SECONDS
        path = parsed.path + (f"?{parsed.query}" if parsed.query else "")
        headers = {"Host": parsed.netloc, "Accept": "application/json, application/*+json"}
        context = self._ssl_context()
        deadline = time.monotonic() + timeout
        last_exc: Exception | None = None
        for ip in ips:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            pool = urllib3.HTTPSConnectionPool(
                host=ip,
                port=port,
                timeout=urllib3.Timeout(connect=remaining, read=remaining, total=remaining),
                retries=False,
                maxsize=1,
                ssl_context=context,
                server_hostname=parsed.hostname,
            )
            try:
                response = pool.urlopen("GET", path, headers=headers, redirect=False, preload_content=False)
                try:
                    metadata, max_age = self._read_bounded(response)
                finally:
                    response.release_conn()
            except urllib3.exceptions.HTTPError as exc:
                last_exc = exc
                continue
            finally:
                pool.close()
            self._check(client_id, metadata)
            registration.remember_display_metadata(client_id, metadata, max_age)
            return metadata, max_age
        raise dot_cimd.CIMDError(f"could not fetch client_id document: {last_exc}")

    def _read_bounded(self, response: Any) -> tuple[dict[str, Any], int]:
        # DOT caps the document's size, not its depth: the one nesting limit applies here too (AMB-115).
        metadata, max_age = self._read_document(response)
        if nesting.depth_exceeds(metadata, nesting.limit()):
            raise dot_cimd.CIMDError(f"client_id document is nested deeper than {nesting.limit()} levels")
        return metadata, max_age

    def _resolve(self, host: str, port: int) -> list[str]:
        if not validate_host(host, settings.MCP_CIMD_ALLOWED_HOSTS):
            return dot_compat.resolve_and_validate(host, port)
        # An allow-listed host may be private or loopback: resolve without the public-address rule.
        try:
            infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        except socket.gaierror as exc:
            raise dot_cimd.CIMDError(f"could not resolve client_id host: {exc}") from exc
        ips = [str(info[4][0]) for info in infos]
        if not ips:
            raise dot_cimd.CIMDError("client_id host did not resolve to any address")
        return ips

    def _ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        if settings.MCP_CIMD_CA_BUNDLE:
            context.load_verify_locations(cafile=settings.MCP_CIMD_CA_BUNDLE)
        return context

    def _check(self, client_id: str, metadata: dict[str, Any]) -> None:
        # DOT checks the client_id equality too; checking here keeps a foreign document's
        # display metadata out of the cache.
        if metadata.get("client_id") != client_id:
            raise dot_cimd.CIMDError("document client_id does not match the client_id URL")
        uris = metadata.get("redirect_uris")
        if isinstance(uris, list):
            for uri in uris:
                problem = registration.redirect_uri_problem(uri)
                if problem:
                    raise dot_cimd.CIMDError(f"invalid redirect URI in the document: {problem}")
