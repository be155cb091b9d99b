"""Background tool runs (and tasks) and the answers to tool approvals."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from mcp_app.models.definitions import Tool
from tenants.models import Tenant, TenantQuerySet


class ToolRun(models.Model):
    """One background execution of a tool (mcp_app.background.relay): when it was queued, ran, and how it ended.

    The row is also the arbiter between the waiting server and a worker: a worker starts a job only
    by moving its row from queued to running, so a job the caller gave up on never runs.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed (isError result)"
        CANCELLED = "cancelled", "cancelled"
        NOT_STARTED = "not_started", "not started (no worker in time)"
        LOST = "lost", "lost (the worker stopped answering)"

    job_id = models.CharField(max_length=64, unique=True)
    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    tool = models.ForeignKey(Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs")
    tool_name = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED, db_index=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    client_id = models.CharField(max_length=255, blank=True)
    # A tenant's own identity provider's user ("<issuer>#<sub>", AMB-204): its tasks are its own.
    subject = models.TextField(blank=True, default="")
    session_id = models.CharField(max_length=64, blank=True)
    queued_at = models.DateTimeField(auto_now_add=True, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    worker = models.CharField(max_length=255, blank=True, help_text="Host and process that ran it.")
    detail = models.TextField(blank=True, help_text="The error a failed run returned, or why it stopped.")
    # What the run was called with, what it returned (a CallToolResult), and the questions its handler
    # asked the client with their answers ([{"asked", "answer" | "error", "at"}]), for the admin.
    arguments = models.JSONField(default=dict, blank=True)
    result = models.JSONField(null=True, blank=True)
    exchanges = models.JSONField(default=list, blank=True)
    # A call run as a task (protocol/tasks.py): its unguessable id, the revision it was made in, until
    # when it is kept, and how it ended ({"status": ..., "result" | "error": ..., "message": ...}),
    # written once by whoever ends it first (the run, or tasks/cancel).
    task_id = models.CharField(max_length=64, unique=True, null=True, blank=True)
    task_protocol_version = models.CharField(max_length=20, blank=True)
    task_ttl_ms = models.PositiveIntegerField(null=True, blank=True)
    task_expires_at = models.DateTimeField(null=True, blank=True, db_index=True)
    task_outcome = models.JSONField(null=True, blank=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["-queued_at"]

    def __str__(self) -> str:
        return f"{self.tool_name} ({self.status})"


class ApprovalDecision(models.Model):
    """One answer to "may this tool run with these arguments?" (Tool.approval): who, when, what.

    Append-only from the application: the admin shows them and never edits them.
    """

    class Outcome(models.TextChoices):
        APPROVED = "approved", "approved"
        DECLINED = "declined", "declined"
        CANCELLED = "cancelled", "cancelled (dismissed)"
        REFUSED = "refused", "refused (the client cannot ask)"
        RAN_UNASKED = "ran_unasked", "ran without asking (the client cannot ask)"

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    tool = models.ForeignKey(
        Tool, null=True, blank=True, on_delete=models.SET_NULL, related_name="approval_decisions"
    )
    tool_name = models.CharField(max_length=64)
    arguments = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=20, choices=Outcome.choices)
    # Who answered: the OAuth user and client, the legacy session, and the peer's address.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    client_id = models.CharField(max_length=255, blank=True)
    session_id = models.CharField(max_length=64, blank=True)
    client_address = models.CharField(max_length=100, blank=True)
    # What an "ask once" approval is remembered for ("session:<id>" or "caller:<user>:<client>").
    remembered_for = models.CharField(max_length=400, blank=True, db_index=True)
    decided_at = models.DateTimeField(auto_now_add=True, db_index=True)

    objects = TenantQuerySet.as_manager()

    class Meta:
        ordering = ["-decided_at"]

    def __str__(self) -> str:
        return f"{self.tool_name}: {self.outcome}"
