"""The checks of a tenant's single sign-on rule (AMB-213), as the model fields' validators.

Apart from tenants/sso_memberships.py (which applies the rule) because the model imports these.
"""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import ValidationError

DOMAIN = re.compile(r"^(?=.{1,253}$)(?!-)[a-z0-9-]{1,63}(?<!-)(?:\.(?!-)[a-z0-9-]{1,63}(?<!-))+$")
MAX_ENTRIES = 50
MAX_GROUP_LENGTH = 200


def email_domain(address: str) -> str:
    """The lower-cased domain of an address, or "" when it has none."""
    local, at, domain = (address or "").strip().rpartition("@")
    return domain.lower() if at and local and domain else ""


def validate_domains(value: Any) -> None:
    if not isinstance(value, list):
        raise ValidationError('Give a list of domains, e.g. ["example.com"].')
    if len(value) > MAX_ENTRIES:
        raise ValidationError(f"At most {MAX_ENTRIES} domains.")
    bad = [repr(item) for item in value if not isinstance(item, str) or not DOMAIN.match(item)]
    if bad:
        raise ValidationError(f"Not a lower-case domain name: {', '.join(bad)}.")


def validate_groups(value: Any) -> None:
    if not isinstance(value, list):
        raise ValidationError('Give a list of group names, e.g. ["platform-team"].')
    if len(value) > MAX_ENTRIES:
        raise ValidationError(f"At most {MAX_ENTRIES} groups.")
    bad = [
        repr(item)
        for item in value
        if not isinstance(item, str) or not item.strip() or len(item) > MAX_GROUP_LENGTH
    ]
    if bad:
        raise ValidationError(f"Not a group name: {', '.join(bad)}.")
