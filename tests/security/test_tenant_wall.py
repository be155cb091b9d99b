"""The tenant wall in PostgreSQL (AMB-96): row-level security behind the querysets.

These run against PostgreSQL only (SQLite has no such wall). When the test database's role is a
superuser (a developer's default), each test takes a throwaway role without BYPASSRLS for the rest
of its transaction, as the application does with DATABASE_ROLE.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from django.apps import apps
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, connection, transaction
from django.test import RequestFactory
from django.utils import timezone

from audit.models import Action, AuditEvent
from mcp_app.catalog import loader
from mcp_app.models import Tool, Upstream, UpstreamCircuit
from mcp_app.upstreams import deployment_health
from mcp_app.usage.upstream_health import HealthFlusher
from mcpsite.tenant_wall import request_scope
from tenants import wall
from tenants.models import Tenant
from tests.e2e.servers import require_services
from tests.upstreams.snapshots import seen


@pytest.fixture(autouse=True)
def postgresql() -> None:
    """Row-level security is PostgreSQL's (SQLite has only the querysets): the one skip rule, which CI
    turns into a failure."""
    require_services("row-level security is PostgreSQL's; SQLite has only the querysets", postgres=True)


def bound_by_the_wall() -> None:
    """Make this transaction's role one the policies bind (no superuser, no BYPASSRLS)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        if not cursor.fetchone()[0]:
            return  # DATABASE_ROLE already took such a role, as in CI
        role = f"wall_probe_{uuid.uuid4().hex[:12]}"  # roles are cluster-wide: a name of its own
        cursor.execute(f"CREATE ROLE {role} NOLOGIN NOSUPERUSER NOBYPASSRLS")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO {role}")
        cursor.execute(f"SET LOCAL ROLE {role}")


def tool_names(sql: str = "SELECT name FROM mcp_app_tool ORDER BY name", params: tuple = ()) -> list[str]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [row[0] for row in cursor.fetchall()]


@pytest.fixture
def two_tenants(db) -> tuple[Tenant, Tenant]:
    a = Tenant.objects.create(slug="wall-a", name="A", auth_mode="public")
    b = Tenant.objects.create(slug="wall-b", name="B", auth_mode="public")
    Tool.objects.create(tenant=a, name="a_tool", handler="template", handler_config={"template": "a"})
    Tool.objects.create(tenant=b, name="b_tool", handler="template", handler_config={"template": "b"})
    bound_by_the_wall()
    return a, b


def test_a_raw_query_with_the_wrong_tenant_set_sees_nothing_of_the_other_tenant(two_tenants) -> None:
    a, b = two_tenants
    with wall.tenant(b.id):
        assert tool_names("SELECT name FROM mcp_app_tool WHERE tenant_id = %s", (a.id,)) == []
        assert tool_names() == ["b_tool"]
    with wall.tenant(a.id):
        assert tool_names() == ["a_tool"]
        assert Tool.objects.filter(tenant=b).count() == 0  # the ORM meets the same wall


def test_code_that_set_no_scope_sees_no_tenant_at_all(two_tenants) -> None:
    with wall.scoped(wall.NOTHING):
        assert tool_names() == []
        assert list(Tool.objects.values_list("name", flat=True)) == []
    with wall.scoped(wall.EVERYTHING):
        assert tool_names() == ["a_tool", "b_tool"]


def test_a_row_cannot_be_written_into_another_tenant(two_tenants) -> None:
    a, b = two_tenants
    with wall.tenant(b.id), pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
        Tool.objects.create(tenant=a, name="planted", handler="template", handler_config={"template": "x"})
    with wall.tenant(b.id):  # and another tenant's rows are not there to change or delete
        assert Tool.objects.filter(tenant=a).update(description="changed") == 0
        assert Tool.objects.filter(tenant=a).delete()[0] == 0
    assert Tool.objects.get(tenant=a).description == ""


def test_another_tenants_upstream_health_is_neither_readable_nor_writable(two_tenants) -> None:
    a, b = two_tenants
    with wall.tenant(a.id):
        upstream = Upstream.objects.create(tenant=a, name="docs", url="https://docs.example/mcp")
        HealthFlusher("web-1:11:a").flush(
            {(a.id, upstream.pk): seen(5, latencies_ms=(3,) * 5, last_success=time.time(), circuit="open")}
        )
    with wall.tenant(b.id):
        assert tool_names("SELECT process FROM mcp_app_upstreamcircuit") == []
        assert tool_names("SELECT CAST(calls AS text) FROM mcp_app_upstreamhealth") == []
        view = deployment_health.of(upstream)  # the admin's reader, asked for a's upstream from b
        assert (view.totals.calls, view.totals.last_success, view.circuits) == (0, None, [])
        with pytest.raises(DatabaseError, match="row-level security"), transaction.atomic():
            UpstreamCircuit.objects.create(
                tenant=a, upstream=upstream, process="planted", state="closed", reported_at=timezone.now()
            )
    with wall.tenant(a.id):
        assert deployment_health.of(upstream).totals.calls == 5


def test_every_table_with_a_tenant_column_has_the_wall_forced(db) -> None:
    missing = []
    with connection.cursor() as cursor:
        for model in apps.get_models():
            if not any(f.name == "tenant" for f in model._meta.concrete_fields):
                continue
            table = model._meta.db_table
            cursor.execute(
                "SELECT c.relrowsecurity, c.relforcerowsecurity, "
                "EXISTS (SELECT 1 FROM pg_policies p WHERE p.tablename = c.relname AND p.policyname = 'tenant_wall') "
                "FROM pg_class c WHERE c.relname = %s",
                [table],
            )
            if cursor.fetchone() != (True, True, True):
                missing.append(table)
    assert missing == []


@contextmanager
def session_bound_by_the_wall() -> Iterator[None]:
    """Outside any transaction, a role the policies bind for the whole session (DATABASE_ROLE's, or a throwaway one)."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT current_user, rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        )
        previous, bypasses = cursor.fetchone()
        if not bypasses:
            yield
            return
        role = f"wall_probe_{uuid.uuid4().hex[:12]}"
        cursor.execute(f"CREATE ROLE {role} NOLOGIN NOSUPERUSER NOBYPASSRLS")
        cursor.execute(f"GRANT SELECT ON ALL TABLES IN SCHEMA public TO {role}")
        cursor.execute(f"SET ROLE {role}")
        try:
            yield
        finally:
            cursor.execute(f"SET ROLE {previous}")
            cursor.execute(f"DROP OWNED BY {role}")
            cursor.execute(f"DROP ROLE {role}")


@pytest.mark.django_db(transaction=True)
def test_a_scope_undone_by_a_rolled_back_transaction_is_set_again_before_the_next_statement() -> None:
    a = Tenant.objects.create(slug="wall-a", name="A", auth_mode="public")
    b = Tenant.objects.create(slug="wall-b", name="B", auth_mode="public")
    Tool.objects.create(tenant=a, name="a_tool", handler="template", handler_config={"template": "a"})
    Tool.objects.create(tenant=b, name="b_tool", handler="template", handler_config={"template": "b"})
    with session_bound_by_the_wall(), wall.tenant(a.id):
        with pytest.raises(RuntimeError), transaction.atomic():
            assert tool_names() == ["a_tool"]  # the scope is set inside the transaction...
            raise RuntimeError("roll back")
        # ...and undone by its rollback; set again, or this would see the test process's everything
        assert tool_names() == ["a_tool"]


def test_a_members_pages_see_their_tenants_and_a_superusers_every_tenant(two_tenants) -> None:
    a, b = two_tenants
    users = get_user_model().objects
    member = users.create_user("wall-member", password="pw-123-wall", is_staff=True)
    a.memberships.create(user=member, role="editor")
    root = users.create_superuser("wall-root", password="pw-123-wall")
    factory = RequestFactory()

    request = factory.get("/admin/")
    request.user = member
    assert request_scope(request) == wall.Scope((a.id,))
    request.user = root
    assert request_scope(request) == wall.EVERYTHING
    anonymous_form = factory.get(f"/t/{b.slug}/connect")
    anonymous_form.user = None
    assert request_scope(anonymous_form) == wall.Scope((b.id,))


def test_a_superusers_sign_in_records_that_the_wall_lets_them_through(
    client, db, django_capture_on_commit_callbacks
) -> None:
    root = get_user_model().objects.create_superuser("wall-root", password="pw-123-wall")
    with wall.scoped(wall.NOTHING), django_capture_on_commit_callbacks(execute=True):  # as in a server
        client.force_login(root)
    assert (
        AuditEvent.objects.filter(action=Action.TENANT_WALL_BYPASSED, actor_username="wall-root").count() == 1
    )


def test_a_tenant_is_loaded_with_its_tools_scopes_whatever_scope_the_caller_has(two_tenants) -> None:
    """The transport loads the tenant before it knows the tenant: an empty list would let any token
    call a tool that requires a scope."""
    a, _ = two_tenants
    Tenant.objects.filter(pk=a.pk).update(auth_mode="oauth")
    Tool.objects.filter(tenant=a).update(required_scope="vault:read")
    with wall.scoped(wall.NOTHING):
        info, _ = loader._load_tenant(a.slug)
    assert info.tool_scopes == (("a_tool", "vault:read"),)


def command_log(**env: str) -> str:
    """What `manage.py check_tenant` says on stderr with `env` over this run's environment."""
    run_env = {k: v for k, v in os.environ.items() if k != "DATABASE_ROLE"}
    run_env.update(DJANGO_SETTINGS_MODULE="mcpsite.settings", **env)
    done = subprocess.run(
        [sys.executable, "manage.py", "check_tenant", "no-such-tenant"],
        cwd=settings.BASE_DIR,
        env=run_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return done.stdout + done.stderr


def test_a_command_says_it_bypasses_the_wall_only_where_a_role_is_bound_by_it() -> None:
    """The line names a wall that exists: PostgreSQL through a role row-level security binds (CI's
    DATABASE_ROLE). A superuser's connection has no wall to bypass (nor SQLite: tests/operations/test_local_env.py)."""
    role = os.environ.get("DATABASE_ROLE")
    if not role:
        pytest.skip("needs DATABASE_ROLE, a role the wall binds (CI's mcp_ci_wall)")
    assert "tenant wall bypassed for this process" in command_log(DATABASE_ROLE=role)
    assert "tenant wall bypassed" not in command_log()


@pytest.mark.django_db(transaction=True)
def test_pooled_each_statement_sets_the_scope_for_its_own_transaction_and_leaves_the_session_bare(
    settings,
) -> None:
    """Behind a transaction pooler (AMB-365) the next transaction on this session may be another client's:
    every statement sets its scope (and role) for its transaction alone, one it opens when none is open,
    and the session itself keeps nothing for a next client to be served with."""
    a = Tenant.objects.create(slug="wall-a", name="A", auth_mode="public")
    b = Tenant.objects.create(slug="wall-b", name="B", auth_mode="public")
    Tool.objects.create(tenant=a, name="a_tool", handler="template", handler_config={"template": "a"})
    Tool.objects.create(tenant=b, name="b_tool", handler="template", handler_config={"template": "b"})
    connection.close()  # a new session: the statements above set the session's scope
    settings.DATABASE_POOLING = "transaction"
    with session_bound_by_the_wall():
        with wall.tenant(a.id):
            assert tool_names() == ["a_tool"]
        with wall.tenant(b.id):
            assert tool_names() == ["b_tool"]
            with transaction.atomic():
                assert tool_names() == ["b_tool"]
                with wall.tenant(a.id):
                    assert tool_names() == ["a_tool"]
                assert tool_names() == ["b_tool"]
            with pytest.raises(RuntimeError), transaction.atomic():
                assert tool_names() == ["b_tool"]
                raise RuntimeError("roll back")
            assert tool_names() == ["b_tool"]
        with connection.connection.cursor() as cursor:
            cursor.execute(
                "SELECT current_setting('mcp.tenants', true), current_setting('mcp.rls_bypass', true)"
            )
            assert cursor.fetchone() in {(None, None), ("", "")}
        with connection.cursor() as cursor:  # refused inside a transaction block: runs as it is
            cursor.execute("VACUUM mcp_app_tool")
