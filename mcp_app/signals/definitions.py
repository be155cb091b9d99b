"""Definition changes → version bump, cache invalidation, list_changed / resources/updated.

Every saved or deleted Tool, Prompt, Resource or ResourceTemplate queues (tenant, list kind) and,
for resources, the affected URIs. After the transaction commits, each tenant's version is bumped
once, the catalog is told (``catalog.note_change``) and the events go out through the channel
layer. Several changes in one transaction produce one bump and one event per kind (coalescing).
A failure anywhere in here is logged and swallowed: a notification must never break an edit.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import transaction
from django.db.models.signals import post_delete, post_save, pre_delete, pre_save
from django.dispatch import receiver

from mcp_app import catalog
from mcp_app.infra import notify
from mcp_app.models import Guardrail, Policy, Prompt, Quota, Resource, ResourceTemplate, Tool, Upstream
from tenants.models import Tenant

logger = logging.getLogger(__name__)

LIST_KIND: dict[type, str] = {
    Tool: "tools",
    Prompt: "prompts",
    Resource: "resources",
    ResourceTemplate: "resources",
}


@dataclass
class _TenantChanges:
    kinds: set[str] = field(default_factory=set)
    uris: list[str] = field(default_factory=list)


class _Batch:
    """The changes of one transaction, announced by the first of its on_commit callbacks to run."""

    def __init__(self) -> None:
        self.tenants: dict[int, _TenantChanges] = {}
        self.done = False

    def __call__(self) -> None:
        if self.done:
            return
        self.done = True
        for tenant_id, changes in self.tenants.items():
            try:
                _announce(tenant_id, changes)
            except Exception:
                logger.exception("could not announce definition changes of tenant %s", tenant_id)


def _current_batch(using: str) -> _Batch:
    """Return the batch of the open transaction, or a new one.

    A batch whose callbacks Django dropped (the transaction or savepoint rolled back) or already
    ran is finished: stale changes never leak into the next transaction.
    """
    conn = transaction.get_connection(using)
    batch: _Batch | None = getattr(conn, "_mcp_batch", None)
    if batch is None or batch.done or not any(func is batch for _sids, func, _robust in conn.run_on_commit):
        batch = _Batch()
        conn._mcp_batch = batch
    return batch


def queue_change(
    tenant_id: int, kind: str | None, uris: tuple[str, ...] = (), using: str = "default"
) -> None:
    """Queue a change of the tenant's definitions, announced once the transaction commits."""
    batch = _current_batch(using)
    changes = batch.tenants.setdefault(tenant_id, _TenantChanges())
    if kind:
        changes.kinds.add(kind)
    for uri in uris:
        if uri and uri not in changes.uris:
            changes.uris.append(uri)
    # One callback per change, all running the same batch: the first to run announces everything,
    # so a savepoint rollback that drops some callbacks cannot lose the changes that committed.
    # Outside a transaction the callback runs at once.
    transaction.on_commit(batch, using=using, robust=True)


def bump_version(tenant_id: int) -> int | None:
    """Bump the tenant's definitions_version and return the new value (None: tenant gone)."""
    Tenant(pk=tenant_id).bump_version()
    return Tenant.objects.filter(pk=tenant_id).values_list("definitions_version", flat=True).first()


def _announce(tenant_id: int, changes: _TenantChanges) -> None:
    version = bump_version(tenant_id)
    if version is None:
        return  # the tenant was deleted with its definitions: nobody is left to tell
    token = None
    try:
        token = catalog.note_change(tenant_id, version)
    except Exception:
        logger.exception("could not invalidate the catalog of tenant %s", tenant_id)
    # The notifications carry the new change token: a stream learns it before telling its client, so
    # the client's next request there is served the new definitions (tokens are pushed separately).
    for kind in sorted(changes.kinds):
        notify.publish_list_changed(tenant_id, kind, version, token)
    for uri in changes.uris:
        notify.publish_resource_updated(tenant_id, uri, version, token)


# --- receivers ---------------------------------------------------------------------------------


def _remember_previous(instance: Any) -> None:
    """Keep the stored tenant (and URI) of a row about to be saved, to announce moves and renames."""
    instance._mcp_previous = None
    if instance.pk is None:
        return
    fields = ["tenant_id", "uri"] if isinstance(instance, Resource) else ["tenant_id"]
    instance._mcp_previous = type(instance).objects.filter(pk=instance.pk).values(*fields).first()


def _definition_saved_or_deleted(instance: Any, using: str, deleted: bool) -> None:
    if instance.version == 0:
        return  # a draft never published: no client saw it or sees it (AMB-218)
    try:
        kind = LIST_KIND[type(instance)]
        is_resource = isinstance(instance, Resource)
        previous = getattr(instance, "_mcp_previous", None) if not deleted else None
        uris: tuple[str, ...] = (instance.uri,) if is_resource else ()
        if previous and previous["tenant_id"] != instance.tenant_id:
            # Moved to another tenant: it left the old tenant's lists.
            old_uris = (previous["uri"],) if is_resource else ()
            queue_change(previous["tenant_id"], kind, old_uris, using)
        elif previous and is_resource and previous["uri"] != instance.uri:
            uris = (previous["uri"], instance.uri)
        queue_change(instance.tenant_id, kind, uris, using)
    except Exception:
        logger.exception("could not queue the change of %r", instance)


@receiver(pre_save, sender=Tool, dispatch_uid="mcp_tool_pre_save")
@receiver(pre_save, sender=Prompt, dispatch_uid="mcp_prompt_pre_save")
@receiver(pre_save, sender=Resource, dispatch_uid="mcp_resource_pre_save")
@receiver(pre_save, sender=ResourceTemplate, dispatch_uid="mcp_template_pre_save")
def definition_pre_save(
    sender: type, instance: Any, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    if raw:
        return
    try:
        _remember_previous(instance)
    except Exception:
        logger.exception("could not read the previous state of %r", instance)


@receiver(post_save, sender=Tool, dispatch_uid="mcp_tool_post_save")
@receiver(post_save, sender=Prompt, dispatch_uid="mcp_prompt_post_save")
@receiver(post_save, sender=Resource, dispatch_uid="mcp_resource_post_save")
@receiver(post_save, sender=ResourceTemplate, dispatch_uid="mcp_template_post_save")
def definition_saved(
    sender: type, instance: Any, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    if raw:
        return
    _definition_saved_or_deleted(instance, using, deleted=False)


@receiver(post_delete, sender=Tool, dispatch_uid="mcp_tool_post_delete")
@receiver(post_delete, sender=Prompt, dispatch_uid="mcp_prompt_post_delete")
@receiver(post_delete, sender=Resource, dispatch_uid="mcp_resource_post_delete")
@receiver(post_delete, sender=ResourceTemplate, dispatch_uid="mcp_template_post_delete")
def definition_deleted(sender: type, instance: Any, using: str = "default", **kwargs: Any) -> None:
    _definition_saved_or_deleted(instance, using, deleted=True)


# A policy may change what any list holds (AMB-347): every kind it applies to is announced.
POLICY_KINDS = {"all": ("tools", "prompts", "resources"), "tools": ("tools",), "prompts": ("prompts",)}


@receiver(post_save, sender=Policy, dispatch_uid="mcp_policy_post_save")
@receiver(post_delete, sender=Policy, dispatch_uid="mcp_policy_post_delete")
def policy_saved_or_deleted(
    sender: type, instance: Policy, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    if raw or instance.version == 0:
        return  # a draft never published governs nobody (AMB-362)
    try:
        for kind in POLICY_KINDS.get(instance.applies_to, ("resources",)):
            queue_change(instance.tenant_id, kind, (), using)
    except Exception:
        logger.exception("could not queue the change of policy %r", instance)


@receiver(post_save, sender=Quota, dispatch_uid="mcp_quota_post_save")
@receiver(post_delete, sender=Quota, dispatch_uid="mcp_quota_post_delete")
@receiver(post_save, sender=Guardrail, dispatch_uid="mcp_guardrail_post_save")
@receiver(post_delete, sender=Guardrail, dispatch_uid="mcp_guardrail_post_delete")
def call_rule_saved_or_deleted(
    sender: type, instance: Quota | Guardrail, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    """A quota (AMB-352) or a guardrail (AMB-354) changes how calls are counted or what flows through
    them, never what a list holds: a new version only (a draft never published: nothing)."""
    if raw or instance.version == 0:
        return
    try:
        queue_change(instance.tenant_id, None, (), using)
    except Exception:
        logger.exception("could not queue the change of %s %r", instance._meta.verbose_name, instance)


@receiver(post_save, sender=Tenant, dispatch_uid="mcp_tenant_post_save")
def tenant_saved(
    sender: type,
    instance: Tenant,
    created: bool = False,
    raw: bool = False,
    using: str = "default",
    **kwargs: Any,
) -> None:
    """A tenant's settings changed: bump its version so caches reload it; no list changed."""
    if raw or created:
        return
    try:
        queue_change(instance.pk, None, (), using)
    except Exception:
        logger.exception("could not queue the change of tenant %s", instance.pk)


# --- upstream servers (their published tools reference them: Tool.upstream, AMB-310) ------------
# A renamed upstream keeps its tools (they reference the row, not its name) and a deleted one takes
# them along (the foreign key cascades: each deleted tool is announced by definition_deleted above).
# What is left here: the catalog's resolved tools and the upstream's published extras are stale.


@receiver(pre_save, sender=Upstream, dispatch_uid="mcp_upstream_pre_save")
def upstream_pre_save(sender: type, instance: Upstream, raw: bool = False, **kwargs: Any) -> None:
    if raw:
        return
    previous = (
        Upstream.objects.filter(pk=instance.pk).values("publish_prompts", "publish_resources").first()
        if instance.pk
        else None
    )
    vars(instance)["_mcp_previous_switches"] = previous or {}  # for upstream_saved


@receiver(post_save, sender=Upstream, dispatch_uid="mcp_upstream_post_save")
def upstream_saved(
    sender: type, instance: Upstream, raw: bool = False, using: str = "default", **kwargs: Any
) -> None:
    """Its URL, mode, timeout, secrets or switch moved: the catalog's resolved tools are stale."""
    if raw:
        return
    queue_change(instance.tenant_id, "tools", (), using)
    # Its published prompts, resources and templates (AMB-190) are served from the row itself.
    was = getattr(instance, "_mcp_previous_switches", {})
    for switch, kind in (("publish_prompts", "prompts"), ("publish_resources", "resources")):
        if getattr(instance, switch) or was.get(switch):
            queue_change(instance.tenant_id, kind, (), using)


@receiver(pre_delete, sender=Upstream, dispatch_uid="mcp_upstream_pre_delete")
def upstream_deleting(sender: type, instance: Upstream, using: str = "default", **kwargs: Any) -> None:
    """Its published tools go with it by the cascade (AMB-163, AMB-310); its extras leave the lists."""
    queue_change(instance.tenant_id, "tools", (), using)
    for switch, kind in (("publish_prompts", "prompts"), ("publish_resources", "resources")):
        if getattr(instance, switch):
            queue_change(instance.tenant_id, kind, (), using)
