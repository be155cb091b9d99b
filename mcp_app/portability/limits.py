"""The one size limit of every document an owner sends (AMB-278), checked before it is parsed.

The admin's import and OpenAPI pages, the API's imports and an OpenAPI description fetched from a URL
all call ``refuse_large`` with the size they are about to read; the setting is MCP_MAX_UPLOAD_BYTES.
"""

from __future__ import annotations

from django.conf import settings

from mcp_app.portability.document import DocumentError


class DocumentTooLarge(DocumentError):
    """Larger than MCP_MAX_UPLOAD_BYTES: refused before anything reads it (AMB-278)."""


def max_upload_bytes() -> int:
    return int(settings.MCP_MAX_UPLOAD_BYTES)


def upload_limit_words() -> str:
    size = max_upload_bytes()
    return f"{size / 1024 / 1024:g} MiB" if size % (1024 * 1024) == 0 else f"{size / 1024:g} KiB"


def refuse_large(size: int) -> None:
    """The one check of every document an owner sends (the admin's import pages, the API's imports, an
    OpenAPI description fetched from a URL), made on its size before it is parsed: past the setting
    MCP_MAX_UPLOAD_BYTES, DocumentTooLarge, nothing read or changed."""
    if size > max_upload_bytes():
        raise DocumentTooLarge(
            [("(document)", f"The document is {size / 1024 / 1024:.1f} MiB; at most {upload_limit_words()} "
              "is accepted (MCP_MAX_UPLOAD_BYTES). Nothing was changed. Split it, or ask the operator "
              "to raise the limit.")]
        )  # fmt: skip
