"""Settings read from the environment as a person's shell leaves it."""

from __future__ import annotations

import os
import subprocess

from tests import zygote


def engine_under(**env: str) -> subprocess.CompletedProcess[str]:
    code = "import django; django.setup(); from django.conf import settings as s; print(s.DATABASES['default']['ENGINE'])"
    run_env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "DATABASE_ROLE")}
    run_env.update(DJANGO_SETTINGS_MODULE="mcpsite.settings", **env)
    return zygote.run_code(code, run_env)


def test_an_empty_database_url_means_the_embedded_sqlite_database_as_an_unset_one_does() -> None:
    empty, unset = engine_under(DATABASE_URL=""), engine_under()
    assert empty.returncode == 0, empty.stderr
    assert empty.stdout.strip() == unset.stdout.strip() == "django.db.backends.sqlite3"
    given = engine_under(DATABASE_URL="postgres://u@127.0.0.1:5432/x")
    assert given.stdout.strip() == "django.db.backends.postgresql", given.stderr


def setting_under(name: str, **env: str) -> str:
    code = f"from mcpsite import settings as s; print(s.{name})"
    run_env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", name)}
    run_env.update(DJANGO_SETTINGS_MODULE="mcpsite.settings", **env)
    done = zygote.run_code(code, run_env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_without_redis_no_process_caches_a_revocable_credential() -> None:
    """No bus tells the other processes of a revocation (AMB-296): the token cache is off, whatever is asked."""
    assert setting_under("MCP_TOKEN_CACHE_SECONDS", MCP_TOKEN_CACHE_SECONDS="3600") == "0"
    assert setting_under("MCP_TOKEN_CACHE_SECONDS") == "0"
    with_redis = {"REDIS_URL": "redis://127.0.0.1:6379/0"}
    assert setting_under("MCP_TOKEN_CACHE_SECONDS", **with_redis) == "5"
    assert setting_under("MCP_TOKEN_CACHE_SECONDS", MCP_TOKEN_CACHE_SECONDS="60", **with_redis) == "60"
