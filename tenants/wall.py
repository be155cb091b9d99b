"""The tenant wall in PostgreSQL: row-level security behind the querysets (AMB-96).

Every tenant-owned table has a policy that shows a row only when its `tenant_id` is in the session's
`mcp.tenants` setting, or when `mcp.rls_bypass` is `on` (migration `mcp_app/0011_tenant_wall`).
Which tenants a piece of code may see is a `Scope` held in a context variable, so it follows a
request into `sync_to_async` threads and a job into its tasks. An execute wrapper on every PostgreSQL
connection makes the session's settings equal to the running code's scope before a statement goes
out: a round trip only when the scope changed since the connection's last statement.

Behind a pooler in transaction mode (PgBouncer, `DATABASE_POOLING=transaction`, AMB-365) a server
session serves whichever client's transaction comes next, so nothing set on a session can be trusted:
there every statement runs in a transaction that first sets the scope and the role for itself alone
(`set_config(..., true)`): one the code opened, or one the wall opens around a statement of its own.

Nothing here decides who may see what: the transport sets the tenant of the URL (`enter`), the web
middleware the tenants of the signed-in user, a worker the job's tenant; the few places that work
across tenants (migrations, management commands, the usage flush, metrics) say so with `bypass`.
Code with no scope sees no tenant's rows. SQLite has no such wall and keeps working without it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db.backends.signals import connection_created
from psycopg import pq

logger = logging.getLogger("mcp_app.rls")

SET_SQL = "SELECT set_config('mcp.tenants', %s, false), set_config('mcp.rls_bypass', %s, false)"
# Per transaction (pooled): the role too (DATABASE_ROLE), as a session-wide SET ROLE would go to whichever
# client's transaction that server session serves next. `BEGIN; ` opens the transaction around a
# statement of its own, in the same round trip.
LOCAL_SQL = "SELECT set_config('mcp.tenants', %s, true), set_config('mcp.rls_bypass', %s, true)"
LOCAL_ROLE_SQL = f"{LOCAL_SQL}, set_config('role', %s, true)"
# What PostgreSQL refuses inside a transaction block; none of it reads or writes a tenant's rows.
_NO_TRANSACTION = re.compile(
    r"^\s*(?:(?:CREATE|DROP|ALTER)\s+DATABASE|VACUUM|ALTER\s+SYSTEM|CREATE\s+(?:UNIQUE\s+)?INDEX\s+CONCURRENTLY"
    r"|DROP\s+INDEX\s+CONCURRENTLY|REINDEX)\b",
    re.IGNORECASE,
)


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
    if pooled():
        return _align_per_transaction(execute, sql, params, many, context)
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


def _align_per_transaction(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    """The scope (and role) for this statement's transaction alone, for a pooled server session (AMB-365).

    In a transaction the code opened, set before every statement, as `_align` does in doubt: a savepoint
    rolled back may have undone it, and a server session there is held by this client till the end. A
    statement of its own (autocommit) gets a transaction around it, sent with it in one query when the
    cursor binds client-side (Django's default), else `BEGIN` and the settings, the statement, `COMMIT`.
    """
    connection = context["connection"]
    raw = connection.connection
    status = raw.info.transaction_status
    if status == pq.TransactionStatus.INERROR:
        return execute(sql, params, many, context)  # only the rollback runs now
    own = status == pq.TransactionStatus.IDLE and connection.get_autocommit()
    if own and isinstance(sql, str) and _NO_TRANSACTION.match(sql):
        return execute(sql, params, many, context)
    values = current().settings()
    role = _role()
    statement = LOCAL_ROLE_SQL if role else LOCAL_SQL
    arguments = (*values, role) if role else values
    cursor: Any = getattr(context.get("cursor"), "cursor", None)
    if own and not many and isinstance(sql, str) and hasattr(cursor, "mogrify"):
        # Client-side binding (Django's default): the settings, the statement and the end of its
        # transaction go as one query, one round trip; the cursor then steps to the statement's result.
        one = f"BEGIN; {cursor.mogrify(statement, arguments)}; {cursor.mogrify(sql, params)}; COMMIT"
        try:
            result = execute(one, None, many, context)
        except BaseException:
            raw.rollback()  # the statement failed: its transaction is still open, in error
            raise
        cursor.nextset()
        cursor.nextset()
        return result
    with raw.cursor() as setter:
        setter.execute(f"BEGIN; {statement}" if own else statement, arguments)
    if not own:
        return execute(sql, params, many, context)
    try:
        result = execute(sql, params, many, context)
    except BaseException:
        raw.rollback()
        raise
    raw.commit()
    return result


def _role() -> str | None:
    return getattr(settings, "DATABASE_ROLE", None)


def pooled() -> bool:
    """Whether PostgreSQL is reached through a pooler in transaction mode (`DATABASE_POOLING`)."""
    return getattr(settings, "DATABASE_POOLING", "session") == "transaction"


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
        # Pooled, the role is set per transaction (AMB-365): not yet at connect.
        cursor.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = coalesce(%s, current_user)",
            (_role() if pooled() else None,),
        )
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
