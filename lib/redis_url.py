"""REDIS_URL read once: a plain Redis (`redis://`, `rediss://`, `unix://`) or one behind Sentinel.

A Sentinel URL names the sentinels, the monitored service and the database, the form the `limits`
library and others already read:

    redis+sentinel://[[user]:password@]host:port[,host:port...]/service[/db][?sentinel_password=...]

The password is the primary's (and its replicas'); the sentinels take `sentinel_password` when they
ask for one. Every Redis client of the platform (its own pools, the cache, the channel layer, the
Celery broker) is built from what this module reads, so a Sentinel URL is as natural as a plain one.
No Django here: settings.py reads it too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import redis.connection

PLAIN_SCHEMES = frozenset({"redis", "rediss", "unix"})
SENTINEL_SCHEME = "redis+sentinel"
SENTINEL_PORT = 26379


class RedisUrlError(ValueError):
    """REDIS_URL cannot be read; the message says what is wrong and what the form is."""


@dataclass(frozen=True)
class RedisTarget:
    url: str = field(repr=False)  # it may hold the password
    db: int = 0
    # Sentinel only: the sentinels, the monitored service's name, and the credentials.
    sentinels: tuple[tuple[str, int], ...] = ()
    service: str = ""
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    sentinel_password: str | None = field(default=None, repr=False)

    @property
    def sentinel(self) -> bool:
        return bool(self.sentinels)

    def master_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of a connection to the primary (db and credentials)."""
        found: dict[str, Any] = {"db": self.db}
        if self.username:
            found["username"] = self.username
        if self.password:
            found["password"] = self.password
        return found

    def sentinel_kwargs(self) -> dict[str, Any] | None:
        return {"password": self.sentinel_password} if self.sentinel_password else None

    def celery_broker(self) -> tuple[str, dict[str, Any]]:
        """Kombu's broker URL and transport options for this Redis (kombu writes Sentinel its own way)."""
        if not self.sentinel:
            return self.url, {}
        credentials = ""
        if self.password:
            credentials = f"{self.username or ''}:{self.password}@"
        # kombu reads the credentials and the db from the first URL, the other sentinels' addresses only.
        urls = [f"sentinel://{credentials}{host}:{port}/{self.db}" for host, port in self.sentinels[:1]]
        urls += [f"sentinel://{host}:{port}" for host, port in self.sentinels[1:]]
        options: dict[str, Any] = {"master_name": self.service}
        if self.sentinel_password:
            options["sentinel_kwargs"] = self.sentinel_kwargs()
        return ";".join(urls), options


def parse(url: str) -> RedisTarget:
    """Read REDIS_URL; RedisUrlError with the expected form when it is neither kind."""
    parts = urlsplit(url)
    if parts.scheme in PLAIN_SCHEMES:
        return RedisTarget(url=url, db=_plain_db(url))
    if parts.scheme != SENTINEL_SCHEME:
        raise RedisUrlError(
            f"REDIS_URL must be redis://, rediss://, unix:// or {SENTINEL_SCHEME}://, got {url!r}"
        )
    credentials, _, hosts = parts.netloc.rpartition("@")
    username, _, password = credentials.partition(":") if credentials else ("", "", "")
    sentinels = tuple(_address(each, url) for each in hosts.split(",") if each)
    path = [unquote(each) for each in parts.path.split("/") if each]
    if not sentinels or not path or len(path) > 2:
        raise RedisUrlError(
            f"a Sentinel REDIS_URL is {SENTINEL_SCHEME}://[:password@]host:port[,host:port]/service[/db], "
            f"got {url!r}"
        )
    db = path[1] if len(path) == 2 else "0"
    if not db.isdigit():
        raise RedisUrlError(f"the database of REDIS_URL must be a number, got {db!r}")
    query = parse_qs(parts.query)
    return RedisTarget(
        url=url,
        db=int(db),
        sentinels=sentinels,
        service=path[0],
        username=unquote(username) or None,
        password=unquote(password) or None,
        sentinel_password=next(iter(query.get("sentinel_password", [])), None),
    )


def _address(text: str, url: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":") if ":" in text else (text, "", str(SENTINEL_PORT))
    if not host or not port.isdigit():
        raise RedisUrlError(f"a sentinel's address must be host:port, got {text!r} in {url!r}")
    return host, int(port)


def _plain_db(url: str) -> int:
    try:
        return int(redis.connection.parse_url(url).get("db", 0))
    except ValueError as error:
        raise RedisUrlError(f"REDIS_URL cannot be read ({error}): {url!r}") from error
