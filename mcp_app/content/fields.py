"""The shapes of MCP fields shared by definitions and content specs: `_meta`, icons, annotations, URIs.

Each check raises django.core.exceptions.ValidationError with a message a tenant can act on. Used by
mcp_app.validation (whole rows) and mcp_app.content.blocks (content specs), below both.
"""

from __future__ import annotations

import base64
import binascii
import re
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from django.core.exceptions import ValidationError

ICON_KEYS = frozenset({"src", "mimeType", "sizes", "theme"})
ICON_THEMES = frozenset({"light", "dark"})
AUDIENCES = frozenset({"user", "assistant"})

# BP-12: `_meta` key = optional prefix (dot-separated labels + "/") and a name.
_LABEL = r"[A-Za-z](?:[A-Za-z0-9-]*[A-Za-z0-9])?"
_META_KEY = re.compile(
    rf"^(?:(?P<prefix>{_LABEL}(?:\.{_LABEL})*)/)?(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)?$"
)
RESERVED_META_LABELS = frozenset({"modelcontextprotocol", "mcp"})

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*$")
MIME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]*(?:\s*;.*)?$")
_ICON_SIZE = re.compile(r"^(?:any|[1-9][0-9]*x[1-9][0-9]*)$")


def fail(message: str) -> None:
    raise ValidationError(message)


def is_str_list(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def validate_meta(meta: Any) -> None:
    """Check `_meta` keys follow the MCP key format and avoid reserved prefixes (BP-12)."""
    if not isinstance(meta, dict):
        fail("_meta must be a JSON object.")
    for key in meta:
        match = _META_KEY.match(key)
        if match is None or key == "":
            fail(
                f"_meta key {key!r} is not valid: use an optional prefix of dot-separated labels and '/', "
                "then a name that starts and ends with a letter or digit (e.g. 'example.com/flag')."
            )
        prefix = match.group("prefix")
        if prefix:
            labels = prefix.lower().split(".")
            if len(labels) >= 2 and labels[-2] in RESERVED_META_LABELS:
                fail(f"_meta key {key!r} uses the prefix '{prefix}/', which is reserved for MCP.")


def validate_icons(icons: Any) -> None:
    """Check a list of MCP Icon objects {src, mimeType?, sizes?, theme?}."""
    if not isinstance(icons, list):
        fail("Icons must be a JSON list of icon objects.")
    for index, icon in enumerate(icons):
        where = f"Icon {index + 1}"
        if not isinstance(icon, dict):
            fail(f"{where} must be an object with at least 'src'.")
        unknown = sorted(set(icon) - ICON_KEYS)
        if unknown:
            fail(f"{where} has unknown keys {unknown}; allowed: src, mimeType, sizes, theme.")
        src = icon.get("src")
        if not isinstance(src, str) or not src:
            fail(f"{where} needs 'src', an https: URL or a data: URI.")
        lowered = src.lower()
        if lowered.startswith("https:"):
            if not urlsplit(src).hostname:
                fail(f"{where}: 'src' must be a full https URL.")
        elif lowered.startswith("data:"):
            if "," not in src:
                fail(f"{where}: 'src' data: URI has no data.")
        else:
            fail(f"{where}: 'src' must be an https: URL or a data: URI.")
        if "mimeType" in icon and (not isinstance(icon["mimeType"], str) or not MIME.match(icon["mimeType"])):
            fail(f"{where}: 'mimeType' must be a MIME type such as image/png.")
        if "sizes" in icon:
            sizes = icon["sizes"]
            if not is_str_list(sizes) or not all(_ICON_SIZE.match(size) for size in sizes):
                fail(f'{where}: \'sizes\' must be a list of strings like "48x48" or "any".')
        if "theme" in icon and icon["theme"] not in ICON_THEMES:
            fail(f'{where}: \'theme\' must be "light" or "dark".')


def validate_annotations(annotations: Any) -> None:
    """Check content/resource Annotations: audience, priority 0-1, lastModified ISO 8601 (CB-04)."""
    if not isinstance(annotations, dict):
        fail("Annotations must be a JSON object.")
    unknown = sorted(set(annotations) - {"audience", "priority", "lastModified"})
    if unknown:
        fail(f"Unknown annotations {unknown}; allowed: audience, priority, lastModified.")
    if "audience" in annotations:
        audience = annotations["audience"]
        if not is_str_list(audience) or not set(audience) <= AUDIENCES:
            fail('Annotation "audience" must be a list of "user" and/or "assistant".')
    if "priority" in annotations:
        priority = annotations["priority"]
        if isinstance(priority, bool) or not isinstance(priority, int | float) or not 0 <= priority <= 1:
            fail('Annotation "priority" must be a number from 0 to 1.')
    if "lastModified" in annotations:
        value = annotations["lastModified"]
        try:
            if not isinstance(value, str):
                raise ValueError
            datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            fail('Annotation "lastModified" must be an ISO 8601 timestamp, e.g. "2025-01-12T15:00:58Z".')


def validate_mime_type(mime_type: str) -> None:
    """Check a MIME type looks like type/subtype."""
    if mime_type and not MIME.match(mime_type):
        fail(f"{mime_type!r} is not a MIME type (type/subtype, e.g. text/plain).")


def validate_resource_uri(uri: Any) -> None:
    """Check a resource URI is absolute: a scheme, then no whitespace (RS-08, RFC 3986)."""
    if not isinstance(uri, str) or not uri:
        fail("A URI is required.")
    scheme, sep, rest = uri.partition(":")
    if not sep or not SCHEME.match(scheme) or not rest:
        fail(f"{uri!r} is not an absolute URI: start with a scheme such as 'myapp://' or 'https://'.")
    if re.search(r"\s", uri):
        fail("A URI must not contain whitespace.")


def validate_base64(value: Any, where: str) -> None:
    if not isinstance(value, str):
        fail(f"{where}: data must be a base64 string.")
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        fail(f"{where}: data is not valid base64.")
