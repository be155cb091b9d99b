"""What every tenant-written definition shares, whether clients use it (a tool, prompt, resource or
template) or it governs their use (a policy, guardrail or quota, AMB-362): drafts and numbered versions.

The row's fields are what clients get, its published version `version` (0: never published, the row
is a draft nobody sees or is governed by); `draft` holds an editor's pending changes of a published row
({field: value}), applied only when published (mcp_app/drafts, AMB-218).
"""

from __future__ import annotations

from typing import Any, Self

from django.db import models

from tenants.models import TenantQuerySet


class VersionedQuerySet(TenantQuerySet):
    def published(self) -> Self:
        """Rows that are live (published at least once; `enabled` is the caller's own filter)."""
        return self.filter(version__gt=0)


class Versioned(models.Model):
    version = models.PositiveIntegerField(default=0, editable=False)
    draft = models.JSONField(null=True, blank=True, editable=False)

    objects = VersionedQuerySet.as_manager()
    # Each concrete model's own: its tenant and django-simple-history's (`HistoricalRecords`).
    tenant_id: int
    history: Any
    # Set on the instance before a save, never columns: `_keep_version` is read by save() below, the
    # other two by django-simple-history (the version's reason and author).
    _keep_version: bool
    _change_reason: str
    _history_user: Any

    class Meta:
        abstract = True

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Every save is a published version, numbered, unless it only stages (`_keep_version`)."""
        if getattr(self, "_keep_version", False):
            # A draft, or a secret's new value: not a version (django-simple-history reads this).
            self.skip_history_when_saving = True
        else:
            self.version += 1
            if kwargs.get("update_fields") is not None:
                kwargs["update_fields"] = {*kwargs["update_fields"], "version"}
        try:
            super().save(*args, **kwargs)
        except BaseException:
            if not getattr(self, "_keep_version", False):
                self.version -= 1
            raise
        finally:
            self.__dict__.pop("skip_history_when_saving", None)
            self.__dict__.pop("_keep_version", None)
