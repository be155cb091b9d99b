"""Personas shared by every test: alice owns tenant_a, bob views tenant_a, charlie owns tenant_b."""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
from urllib.parse import urlsplit

import pytest
import pytest_asyncio
from channels.layers import channel_layers
from django.conf import settings
from django.db import connections, transaction
from django.test import TransactionTestCase, override_settings

from mcp_app import catalog
from mcp_app.connected_accounts import vault
from mcp_app.content import render_pool, rendering
from mcp_app.models import Tool
from mcp_app.oauth import ratelimit as oauth_ratelimit
from mcp_app.protocol import quotas, ratelimit
from mcp_app.transport import modern
from tenants import wall
from tenants.models import Membership, Role, Tenant
from tests.e2e import databases

# Fixtures and assertions read and write every tenant; code under test sets its own scope as it would
# in a server (the consumer, the middleware, a job), and servers in other processes start with none.
wall.bypass_process("the test process")

# Django's default hasher (PBKDF2, a million rounds) spent ~0.5 s of CPU on each password set or checked
# (alice, bob, admin_user, client.login(), ... hundreds in the suite): the tests' users hash with a cheap
# one, as Django advises for tests. The project's own hashers follow it, so a hash made by the servers
# (seed_demo run by hand) still verifies here; the e2e servers hash as these do (tests/e2e/settings.py). AMB-335.
override_settings(
    PASSWORD_HASHERS=["django.contrib.auth.hashers.MD5PasswordHasher", *settings.PASSWORD_HASHERS]
).enable()

# What Django's flush after each transactional test writes back through post_migrate: kept, not rewritten.
_POST_MIGRATE_TABLES = frozenset({"django_content_type", "auth_permission"})
_truncating_teardown = TransactionTestCase._fixture_teardown


def _deleting_teardown(self: TransactionTestCase) -> None:
    """Empty the tables after a transactional test with DELETE (PostgreSQL), not flush's TRUNCATE.

    TRUNCATE makes new files for each of the ~40 tables and flush then re-creates the content types and
    permissions: ~0.4 s after each of the suite's ~1,000 transactional tests, where deleting the few rows
    a test wrote takes ~0.05 s. Django's foreign keys are deferred on PostgreSQL, so the order does not
    matter; this process sees every tenant's rows (the wall is bypassed above). Anything else (SQLite,
    available_apps, serialized rollback, sequences to reset) gets Django's own flush.
    """
    names = self._databases_names(include_mirrors=False)
    plain = not (self.available_apps is not None or self.serialized_rollback or self.reset_sequences)
    if not plain or any(connections[name].vendor != "postgresql" for name in names):
        _truncating_teardown(self)
        return
    for name in names:
        connection = connections[name]
        tables = connection.introspection.django_table_names(only_existing=True, include_views=False)
        with transaction.atomic(using=name), connection.cursor() as cursor:
            for table in sorted(set(tables) - _POST_MIGRATE_TABLES):
                cursor.execute(f"DELETE FROM {connection.ops.quote_name(table)}")


TransactionTestCase._fixture_teardown = _deleting_teardown


@pytest.fixture(scope="session")
def django_db_modify_db_settings(django_db_modify_db_settings_parallel_suffix: None) -> None:
    """On PostgreSQL each worker's test database is made from the migrated template the e2e servers'
    databases copy (tests/e2e/databases.py): migrating a new one cost each worker ~6 s of CPU; Django
    then finds every migration applied."""
    database = settings.DATABASES["default"]
    if database["ENGINE"].startswith("django.db.backends.postgresql"):
        url = urlsplit(os.environ["DATABASE_URL"])
        template = databases.migrated_template(url, os.environ.get("DATABASE_ROLE"))
        database.setdefault("TEST", {})["TEMPLATE"] = template


@pytest.fixture
def tenant_a(db) -> Tenant:
    return Tenant.objects.create(
        slug="tenant-a", name="Tenant A", instructions="Use tenant A's tools.", auth_mode="public"
    )


@pytest.fixture
def tenant_b(db) -> Tenant:
    return Tenant.objects.create(slug="tenant-b", name="Tenant B", auth_mode="public")


@pytest.fixture
def alice(django_user_model, tenant_a):
    user = django_user_model.objects.create_user("alice", "alice@example.com", "alice-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_a, role=Role.OWNER)
    return user


@pytest.fixture
def bob(django_user_model, tenant_a):
    user = django_user_model.objects.create_user("bob", "bob@example.com", "bob-pw-123", is_staff=True)
    Membership.objects.create(user=user, tenant=tenant_a, role=Role.VIEWER)
    return user


@pytest.fixture
def charlie(django_user_model, tenant_b):
    user = django_user_model.objects.create_user(
        "charlie", "charlie@example.com", "charlie-pw-123", is_staff=True
    )
    Membership.objects.create(user=user, tenant=tenant_b, role=Role.OWNER)
    return user


def pytest_collection_modifyitems(config, items) -> None:  # noqa: ANN001
    """Tests marked `services` need a real Redis: skip with the reason without one, fail in CI."""
    if os.environ.get("REDIS_URL"):
        return
    reason = "needs REDIS_URL: this test talks to a real Redis server shared between processes"
    if os.environ.get("MCP_E2E_REQUIRE_SERVICES") == "1":
        fail = pytest.mark.usefixtures("_services_required")
        for item in items:
            if item.get_closest_marker("services"):
                item.add_marker(fail)
        return
    for item in items:
        if item.get_closest_marker("services"):
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture
def _services_required() -> None:
    pytest.fail("MCP_E2E_REQUIRE_SERVICES=1 but REDIS_URL is not set")


@pytest.fixture(autouse=True)
def _fresh_channel_layer() -> None:
    """Each test gets channel layers of its own.

    Each async test runs in an event loop of its own, but the layer Channels caches is one per process.
    channels_redis keeps one lock for all of a layer's process-local channels; a receive that a test's
    closing loop left holding it made the next receive in another loop fail with "Lock ... is bound to
    a different event loop" (CI: background relays and the Try page). A served process has one loop.
    """
    channel_layers.backends.clear()


@pytest.fixture(autouse=True)
def _fresh_catalog():
    # Tenant ids repeat across transactional tests; a cached catalog must not leak between them.

    catalog.clear_caches()
    modern.forget_answers()
    yield
    catalog.clear_caches()
    modern.forget_answers()


@pytest.fixture(autouse=True)
def _fresh_render_memory():
    # A source one test sent to a render process must not skip the inline path in the next.
    rendering.forget()


@pytest.fixture(scope="session")
def render_processes() -> None:
    """The render processes' forkserver, started (seconds on a busy machine) before a test times a render."""
    render_pool.start_forkserver()


@pytest.fixture
def tool_a(tenant_a) -> Tool:
    """Tenant A's template tool `greet` (the admin and history tests edit it)."""
    return Tool.objects.create(
        tenant=tenant_a,
        name="greet",
        title="Greet",
        description="Say hello.",
        input_schema={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        handler="template",
        handler_config={"text": "Hello, {{ name }}!"},
    )


@pytest.fixture(autouse=True)
def _fresh_rate_limits() -> None:
    # Tenant and session ids repeat across tests; a bucket emptied by one must not throttle the next.
    ratelimit.reset()
    oauth_ratelimit.reset()
    quotas.reset()
    vault.forget()  # connected accounts' tokens handed out, by (tenant, user, provider) ids that repeat too


@pytest.fixture(autouse=True)
def _no_token_eviction_subscriber(settings) -> None:
    # Each test has its own event loop, which must not close with a Redis subscriber running in it;
    # the tests of the subscriber (tests/oauth/test_token_evictions.py) switch it on and stop it.
    settings.MCP_TOKEN_EVICTION_SUBSCRIBER = False
    settings.MCP_CHANGE_TOKEN_SUBSCRIBER = False  # likewise (tests/performance/test_hot_path.py)
    settings.MCP_USAGE_FLUSH_SECONDS = 0  # no flush thread in the test process (tests/usage/ flush by hand)


# The hang watchdog names unfinished tasks from 90 s on, and cancels them from this many seconds.
CANCEL_AFTER_SECONDS = 240


@pytest.fixture(autouse=True)
def _hang_watchdog(request):
    """If a test (teardown included) runs over 90 s, print every unfinished asyncio task's stack (and from
    CANCEL_AFTER_SECONDS on, cancel them).

    A task that ignores cancellation would otherwise hang the suite silently in the event loop's
    teardown; this names it (and cancels it again). Set up first (autouse, no dependencies), so it
    is torn down last.
    """
    finished = threading.Event()

    def watch() -> None:
        waited, total = 90, 0
        while not finished.wait(waited):
            total += waited
            print(f"\n=== {request.node.nodeid} still running after {total} s; unfinished tasks:", file=sys.stderr)
            for obj in gc.get_objects():
                try:
                    unfinished = isinstance(obj, asyncio.Task) and not obj.done()
                except ReferenceError:  # a weak proxy whose object went while we looked
                    continue
                if unfinished:
                    print(f"--- {obj!r}", file=sys.stderr)
                    obj.print_stack(file=sys.stderr)
                    loop = obj.get_loop()
                    # A slow test on a loaded machine is not a hang: its tasks are cancelled only near
                    # pytest-timeout's 300 s (a browser test of many steps ran past 90 s in CI).
                    if loop.is_running() and total >= CANCEL_AFTER_SECONDS:
                        # A task that swallowed one cancellation (the loop's teardown sends only one)
                        # gets another, so one such task cannot stall the rest of the suite.
                        loop.call_soon_threadsafe(obj.cancel)
            sys.stderr.flush()
            waited = 30

    threading.Thread(target=watch, name="hang-watchdog", daemon=True).start()
    yield
    finished.set()


@pytest_asyncio.fixture(autouse=True)
async def _cancel_leftover_tasks():
    """Cancel what a test left running in its event loop, more than once if a task ignores the first.

    The loop's own teardown cancels each task once and then waits without bound. A task parked in
    channels_redis's receive (the cancel listener's) was seen to survive that single cancellation.
    """
    yield
    current = asyncio.current_task()
    for _ in range(3):
        pending = [task for task in asyncio.all_tasks() if task is not current and not task.done()]
        if not pending:
            return
        for task in pending:
            task.cancel()
        await asyncio.wait(pending, timeout=1.0)
