"""The tenant wall in PostgreSQL: row-level security behind the querysets (AMB-96).

Every tenant-owned table has a policy that shows a row only when its `tenant_id` is in the session's
`mcp.tenants` setting, or when `mcp.rls_bypass` is `on` (migration `mcp_app/0011_tenant_wall`).
Which tenants a piece of code may see is a `Scope` held in a context variable, so it follows a
request into `sync_to_async` threads and a job into its tasks. An execute wrapper on every PostgreSQL
connection makes the session's settings equal to the running code's scope before a statement goes
out: a round trip only when the scope changed since the connection's last statement.

Nothing here decides who may see what: the transport sets the tenant of the URL (`enter`), the web
middleware the tenants of the signed-in user, a worker the job's tenant; the few places that work
across tenants (migrations, management commands, the usage flush, metrics) say so with `bypass`.
Code with no scope sees no tenant's rows. SQLite has no such wall and keeps working without it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.db.backends.signals import connection_created
from psycopg import pq

logger = logging.getLogger("mcp_app.rls")

SET_SQL = "SELECT set_config('mcp.tenants', %s, false), set_config('mcp.rls_bypass', %s, false)"


@dataclass(frozen=True)
class Scope:
    """The tenants a piece of code may see in the database; `bypass` sees every row."""

    tenants: tuple[int, ...] = ()
    bypass: bool = False

    @classmethod
    def of(cls, tenant_ids: Iterable[int]) -> Scope:
        return cls(tuple(sorted({int(t) for t in tenant_ids})))

    def settings(self) -> tuple[str, str]:
        return ",".join(str(t) for t in self.tenants), "on" if self.bypass else "off"


NOTHING = Scope()
EVERYTHING = Scope(bypass=True)

_scope: ContextVar[Scope | None] = ContextVar("mcp_rls_scope", default=None)
# What code that set no scope gets: nothing in a serving process or a worker, everything in a
# management command or the test process (`bypass_process`).
_process_default: Scope = NOTHING


def current() -> Scope:
    scope = _scope.get()
    return _process_default if scope is None else scope


def enter(scope: Scope) -> None:
    """Set the scope for the rest of the running task (a request's consumer: the task ends with it)."""
    _scope.set(scope)


def admit(tenant_id: int) -> None:
    """Add the tenant a request turned out to be about (an OAuth request's resource) to its scope."""
    scope = current()
    if not scope.bypass and tenant_id not in scope.tenants:
        _scope.set(Scope.of((*scope.tenants, tenant_id)))


@contextmanager
def scoped(scope: Scope) -> Iterator[None]:
    token = _scope.set(scope)
    try:
        yield
    finally:
        _scope.reset(token)


@contextmanager
def tenant(tenant_id: int) -> Iterator[None]:
    with scoped(Scope((int(tenant_id),))):
        yield


@contextmanager
def bypass(reason: str) -> Iterator[None]:
    """Work across tenants on purpose; `reason` goes to the log (debug: these run every few seconds)."""
    logger.debug("tenant wall bypassed: %s", reason)
    with scoped(EVERYTHING):
        yield


_process_reason = ""


def bypass_process(reason: str) -> None:
    """Let code with no scope of its own see every tenant in this process (a management command)."""
    global _process_default, _process_reason
    _process_default, _process_reason = EVERYTHING, reason


def wrap_iterator(scope: Scope, chunks: Iterable[Any]) -> Iterator[Any]:
    """Iterate `chunks` inside `scope`: a streaming response's body is produced after its view returned."""
    iterator = iter(chunks)
    while True:
        with scoped(scope):
            try:
                chunk = next(iterator)
            except StopIteration:
                return
        yield chunk


def _align(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]) -> Any:
    connection = context["connection"]
    wanted = current()
    if (connection.mcp_rls_scope != wanted or connection.mcp_rls_doubt) and not _failed(connection):
        # A plain cursor of its own: the statement's cursor may be a server-side one (iterator()).
        with connection.connection.cursor() as cursor:
            cursor.execute(SET_SQL, wanted.settings())
        connection.mcp_rls_scope = wanted
        # Set inside a transaction, the value is undone if it rolls back (to a savepoint, even): set
        # it again before every statement until one runs outside a transaction.
        connection.mcp_rls_doubt = connection.in_atomic_block or not connection.get_autocommit()
    return execute(sql, params, many, context)


def _failed(connection: Any) -> bool:
    """A failed transaction takes no statement but its rollback: set nothing then (still in doubt)."""
    return connection.connection.info.transaction_status == pq.TransactionStatus.INERROR


def _on_connect(sender: Any, connection: Any, **kwargs: Any) -> None:
    if connection.vendor != "postgresql":
        return
    connection.mcp_rls_scope = None  # a new session has no settings yet
    connection.mcp_rls_doubt = False
    if _align not in connection.execute_wrappers:
        connection.execute_wrappers.append(_align)
    _say_process_bypass(connection)


_bypass_said = False


def _say_process_bypass(connection: Any) -> None:
    """Log a command's bypass once, and only where there is a wall to bypass: PostgreSQL, connected as (or
    SET ROLE to) a role that row-level security binds. A superuser or BYPASSRLS role, or SQLite, has none."""
    global _bypass_said
    if not _process_reason or _bypass_said:
        return
    _bypass_said = True
    with connection.connection.cursor() as cursor:
        cursor.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        row = cursor.fetchone()
    if row is not None and not row[0]:
        # In words: an operator reading a command's output should not have to look the term up (AMB-236).
        logger.info(
            "tenant wall bypassed for this process: %s (a management command sees every tenant's rows; "
            "requests and background jobs stay limited to their own tenant by PostgreSQL row-level security)",
            _process_reason,
        )


def install() -> None:
    connection_created.connect(_on_connect, dispatch_uid="tenants.wall")
