"""Settings for the MCP hosting platform.

Every deployment value comes from the environment and has an embedded default that
needs no external service: SQLite, the in-memory channel layer, tools run in-process.

Longer than 400 lines: one settings module (style §7), each setting beside the reason for its default.
"""

from __future__ import annotations

import ipaddress
import os
import re
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dj_database_url
from csp import constants as _csp
from django.core.exceptions import ImproperlyConfigured
from dotenv import load_dotenv

from lib import redis_url as _redis_url

BASE_DIR = Path(__file__).resolve().parent.parent

# One local configuration per checkout (AMB-297): `./bin/serve` writes what it decides (the loopback the
# demo's http tools post to, the database and Redis it was given) into `.env`, and every entry point that
# loads these settings (Daphne, each manage.py command, the Celery worker) reads it, so the command line
# sees what the server sees. The process's own environment wins over the file. MCP_ENV_FILE names another
# file, or none when empty (the test suite sets it empty: a developer's .env must not reach the tests).
_ENV_FILE = os.environ.get("MCP_ENV_FILE", str(BASE_DIR / ".env"))
if _ENV_FILE:
    load_dotenv(_ENV_FILE, override=False)


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    value = raw.strip().lower()
    if value in {"1", "true", "yes", "on"}:
        return True
    if value in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (1/0, true/false), got {raw!r}")


def _env_int(name: str, default: int, minimum: int = 0) -> int:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be an integer, got {raw!r}") from None
    if value < minimum:
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {value}")
    return value


def _env_float(name: str, default: float, minimum: float = 0.0) -> float:
    raw = os.environ.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name} must be a number, got {raw!r}") from None
    if not value >= minimum:  # also refuses NaN
        raise ImproperlyConfigured(f"{name} must be >= {minimum}, got {raw!r}")
    return value


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    if raw is None:
        return default
    return [item.strip() for item in raw.split(",") if item.strip()]


def _secret_key() -> str:
    key = os.environ.get("SECRET_KEY")
    if key:
        return key
    # Dev only: a generated key kept beside the project so sessions and encrypted
    # handler secrets survive restarts.
    path = BASE_DIR / ".secret_key"
    if path.exists():
        return path.read_text().strip()
    key = secrets.token_urlsafe(50)
    path.write_text(key)
    return key


SECRET_KEY = _secret_key()
# Old keys, comma-separated: signatures made with them (sessions, cursors, requestState, form links)
# still verify, and handler secrets encrypted with them still decrypt until `rotate_secrets` runs.
SECRET_KEY_FALLBACKS = _env_list("SECRET_KEY_FALLBACKS", [])
DEBUG = _env_bool("DEBUG", False)

MCP_PUBLIC_URL = os.environ.get("MCP_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
_public = urlsplit(MCP_PUBLIC_URL)
if _public.scheme not in {"http", "https"} or not _public.hostname:
    raise ImproperlyConfigured(f"MCP_PUBLIC_URL must be an http(s) URL, got {MCP_PUBLIC_URL!r}")

ALLOWED_HOSTS = _env_list("ALLOWED_HOSTS", [_public.hostname, "127.0.0.1", "localhost", "[::1]"])
CSRF_TRUSTED_ORIGINS = _env_list("CSRF_TRUSTED_ORIGINS", [f"{_public.scheme}://{_public.netloc}"])
# The authorization pages carry `state`, `code_challenge` and the client's redirect URI in their URL: never
# send it to another site, but do send our own origin to ourselves. `no-referrer` made browsers post forms
# with `Origin: null`, which Django's CSRF check refuses, so nobody could sign in (issue 8).
SECURE_REFERRER_POLICY = "same-origin"
# Every page's Content-Security-Policy (django-csp): scripts from our own static files, and an inline
# one only with the response's nonce (`{{ request.csp_nonce }}`); no page may be framed (consent and
# sign-in pages above all); client logos on the consent page may come from any https origin. No
# form-action: after the consent form the browser must follow the redirect to the client.
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [_csp.SELF],
        "script-src": [_csp.SELF, _csp.NONCE],
        "style-src": [_csp.SELF, _csp.UNSAFE_INLINE],
        "img-src": [_csp.SELF, "data:", "blob:", "https:"],
        "font-src": [_csp.SELF, "data:"],
        # The Try page plays audio a tool returned, as a data: URL (AMB-251).
        "media-src": [_csp.SELF, "data:"],
        "connect-src": [_csp.SELF],
        "worker-src": [_csp.SELF, "blob:"],
        "frame-ancestors": [_csp.NONE],
        "base-uri": [_csp.SELF],
        "object-src": [_csp.NONE],
    }
}
X_FRAME_OPTIONS = "DENY"
if _public.scheme == "https":
    # Served over TLS (behind a proxy): cookies never travel in clear, and browsers remember to use TLS.
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = _env_int("MCP_HSTS_SECONDS", 31_536_000, minimum=0)


def _proxy_ssl_header() -> tuple[str, str] | None:
    """MCP_PROXY_SSL_HEADER: `Name` (https when it says `https`) or `Name=value` (e.g. X-Forwarded-Ssl=on)."""
    raw = os.environ.get("MCP_PROXY_SSL_HEADER", "").strip()
    if not raw:
        return None
    name, _, value = raw.partition("=")
    name, value = name.strip(), (value.strip() if "=" in raw else "https")
    if not re.fullmatch(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*", name) or not re.fullmatch(
        r"[A-Za-z0-9.:-]+", value
    ):
        raise ImproperlyConfigured(
            f"MCP_PROXY_SSL_HEADER must be a header name, or name=value (X-Forwarded-Proto, X-Forwarded-Ssl=on), got {raw!r}"
        )
    return f"HTTP_{name.upper().replace('-', '_')}", value


# Behind a TLS-terminating proxy (AMB-110): the header by which it says the client's connection was https.
# Off unless set: a process reachable without the proxy would believe any client's header.
SECURE_PROXY_SSL_HEADER = _proxy_ssl_header()
# A plain-HTTP GET of a page goes to https, other methods are refused in words (mcpsite/middleware.py);
# on by default only where the process can tell an https request, else it would redirect to itself for ever.
SECURE_SSL_REDIRECT = _env_bool(
    "MCP_SSL_REDIRECT", _public.scheme == "https" and SECURE_PROXY_SSL_HEADER is not None
)
if SECURE_SSL_REDIRECT and _public.scheme != "https":
    raise ImproperlyConfigured(f"MCP_SSL_REDIRECT=1 needs an https MCP_PUBLIC_URL, got {MCP_PUBLIC_URL!r}")
# Called over plain HTTP inside the cluster, by the pod's IP (kubelet, Prometheus): never redirected
# to https, and answered whatever their Host (AMB-111, mcpsite.middleware.CommonMiddleware).
MCP_CLUSTER_PATHS = [r"^health/live$", r"^health/ready$", r"^metrics$"]
SECURE_REDIRECT_EXEMPT = MCP_CLUSTER_PATHS
# A refused form (stale tab, cookies blocked) gets a page that says what to do, not a bare 403.
CSRF_FAILURE_VIEW = "mcpsite.views.csrf_failure"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "simple_history",
    "health_check",
    # Only its static JSONEditor build, for the admin's JSON editor (lib/formfields.py, AMB-70).
    "django_json_widget",
    "oauth2_provider",
    # Sign-in throttling of the admin and the authorization server's login page (AXES_* below).
    "axes",
    "tenants",
    # The audit trail of security-relevant events (audit/: below mcp_app, above tenants).
    "audit",
    "mcp_app",
]

MIDDLEWARE = [
    # Before Django's redirect to https: a plain-HTTP POST there is refused in words, not redirected (AMB-110).
    "mcpsite.middleware.HttpsOnlyWrites",
    "django.middleware.security.SecurityMiddleware",
    # Content-Security-Policy on every page (CONTENT_SECURITY_POLICY below).
    "csp.middleware.CSPMiddleware",
    # Serves collected static files (the admin's CSS/JS) from Daphne itself: no web server needed.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    # Django's, without the host check for the probes and /metrics (AMB-111).
    "mcpsite.middleware.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The database's tenant wall (row-level security, AMB-96): the rest runs in the user's tenants.
    "mcpsite.tenant_wall.TenantWallMiddleware",
    # Keeps the request for audit events recorded from model signals (their actor and address).
    "audit.trail.RequestMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    # Records who made each definition change (django-simple-history), for the history and revert.
    "simple_history.middleware.HistoryRequestMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: turns a locked-out sign-in into its lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "mcpsite.urls"
ASGI_APPLICATION = "mcpsite.asgi.application"
WSGI_APPLICATION = None

TEMPLATES: list[dict[str, Any]] = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    # An empty DATABASE_URL (`export DATABASE_URL=` in a shell) means the default too, as it does for
    # REDIS_URL: dj_database_url took it for a configuration with no engine, and every command failed
    # with KeyError: 'ENGINE'.
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        conn_max_age=_env_int("DB_CONN_MAX_AGE", 600),
        # A kept connection the server dropped (a restart, a terminated backend) is noticed and replaced
        # before it is used, instead of failing the first request that meets it.
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Daphne serves many requests concurrently from one thread pool: wait for locks
    # instead of failing with "database is locked". IMMEDIATE: a transaction takes the write lock
    # when it begins, so it waits for it; a deferred one that read first and then wrote got "database
    # is locked" at once, the timeout unused (an OAuth revocation beside calls, on ./bin/serve's SQLite).
    # WAL: readers never wait for a writer (an owner's long import in another process, a Celery job),
    # nor a writer for readers; NORMAL is WAL's safe pairing (a power cut may lose the last commits, never
    # corrupt). Kept in the file itself; an in-memory database answers "memory" and stays as it is.
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        timeout=20,
        transaction_mode="IMMEDIATE",
        init_command="PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    )
    DATABASES["default"]["CONN_MAX_AGE"] = 0

# "transaction" when DATABASE_URL is a pooler in transaction mode (PgBouncer's pool_mode=transaction):
# the tenant wall then sets its scope and role per transaction (AMB-365), and no cursor outlives one.
DATABASE_POOLING = os.environ.get("DATABASE_POOLING") or "session"
if DATABASE_POOLING not in {"session", "transaction"}:
    raise ImproperlyConfigured(
        f"DATABASE_POOLING must be 'session' or 'transaction', got {DATABASE_POOLING!r}"
    )
# The role the platform's statements run as: one without BYPASSRLS, so the tenant wall binds it even
# when DATABASE_URL's user is a superuser (AMB-96).
DATABASE_ROLE = (
    os.environ.get("DATABASE_ROLE") or None
    if DATABASES["default"]["ENGINE"].startswith("django.db.backends.postgresql")
    else None
)
if DATABASE_ROLE and DATABASE_POOLING == "session":
    # SET ROLE once per connection (Django's assume_role). Behind a transaction pooler a session's role
    # would go to whichever client's transaction it serves next: the wall sets it per transaction there.
    DATABASES["default"].setdefault("OPTIONS", {})["assume_role"] = DATABASE_ROLE
if DATABASE_POOLING == "transaction" and DATABASES["default"]["ENGINE"].startswith(
    "django.db.backends.postgresql"
):
    # A server-side cursor (QuerySet.iterator) lives in its server session, which the next transaction
    # may not get: Django's own advice for transaction pooling.
    DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = True

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# A plain Redis or one behind Sentinel (redis+sentinel://host:port[,host:port]/service[/db]; lib/redis_url.py).
REDIS_URL = os.environ.get("REDIS_URL") or None
try:
    _redis = _redis_url.parse(REDIS_URL) if REDIS_URL else None
except _redis_url.RedisUrlError as error:
    raise ImproperlyConfigured(str(error)) from error

CHANNEL_LAYERS = {
    "default": (
        {
            # channels_redis with blocking pools and a socket timeout above BZPOPMIN's (see the module).
            "BACKEND": "mcp_app.infra.layer.RedisChannelLayer",
            "CONFIG": {"hosts": [REDIS_URL], "capacity": 1000, "expiry": 60},
        }
        if REDIS_URL
        else {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    )
}

CACHES = {
    "default": (
        {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            # A list: Django splits a string at commas, and a Sentinel URL lists its sentinels with them.
            "LOCATION": [REDIS_URL],
            # Wait for a free connection under a burst instead of failing (redis-py's default pool raises).
            # The pool class reads Sentinel URLs too (mcp_app/infra/redis_client.py).
            "OPTIONS": {"pool_class": "mcp_app.infra.redis_client.CachePool", "max_connections": 64, "timeout": 20},
        }
        if REDIS_URL
        else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}
    )
}

# Celery: background tools. Without a broker URL, tasks run in-process (eager).
# The broker is REDIS_URL's Redis unless CELERY_BROKER_URL names another; kombu spells Sentinel its own way.
_broker, CELERY_BROKER_TRANSPORT_OPTIONS = _redis.celery_broker() if _redis else ("memory://", {})
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or _broker
if os.environ.get("CELERY_BROKER_URL"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {}
CELERY_RESULT_BACKEND = None
CELERY_TASK_ALWAYS_EAGER = _env_bool(
    "CELERY_TASK_ALWAYS_EAGER", not (os.environ.get("CELERY_BROKER_URL") or REDIS_URL)
)
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Background tools (mcp_app.background.relay): "celery" sends them to workers, "inline" runs them in the server
# process. Workers need the broker and the Redis channel layer (their replies travel through it).
MCP_BACKGROUND_TOOLS = os.environ.get("MCP_BACKGROUND_TOOLS") or (
    "celery" if REDIS_URL and not CELERY_TASK_ALWAYS_EAGER else "inline"
)
if MCP_BACKGROUND_TOOLS not in {"celery", "inline"}:
    raise ImproperlyConfigured(f"MCP_BACKGROUND_TOOLS must be celery or inline, not {MCP_BACKGROUND_TOOLS!r}")
if MCP_BACKGROUND_TOOLS == "celery" and not REDIS_URL:
    raise ImproperlyConfigured(
        "MCP_BACKGROUND_TOOLS=celery needs REDIS_URL (the workers reply through Redis)"
    )
MCP_BACKGROUND_QUEUE = os.environ.get("MCP_BACKGROUND_QUEUE", "mcp-tools")
CELERY_TASK_DEFAULT_QUEUE = MCP_BACKGROUND_QUEUE
# How long a background tool may wait in the queue for a worker before the caller gets an error (a tool's
# own worker_wait_seconds overrides it; AMB-114).
MCP_BACKGROUND_START_SECONDS: float = _env_int("MCP_BACKGROUND_START_SECONDS", 30, minimum=1)
# A started job's worker sends a sign of life every second; after this long without one the run is
# lost (its worker died or hangs) and the caller gets an isError result at once.
MCP_BACKGROUND_LIVENESS_SECONDS: float = _env_int("MCP_BACKGROUND_LIVENESS_SECONDS", 10, minimum=2)
# Tools that ask the client (protocol/asking.py): how long a legacy call waits for the client's
# answer, and how long a 2026-07-28 requestState stays valid.
MCP_ASK_TIMEOUT_SECONDS: float = _env_int("MCP_ASK_TIMEOUT_SECONDS", 300, minimum=1)
MCP_ASK_STATE_SECONDS: int = _env_int("MCP_ASK_STATE_SECONDS", 600, minimum=10)
# A sensitive form's page (URL-mode elicitation, handlers/url_forms.py): how long its link and the
# answers given on it are kept; and how long a 2026-07-28 retry waits for the page to be submitted
# before asking again.
MCP_URL_FORM_SECONDS: int = _env_int("MCP_URL_FORM_SECONDS", 600, minimum=10)
MCP_URL_FORM_WAIT_SECONDS: int = _env_int("MCP_URL_FORM_WAIT_SECONDS", 30, minimum=0)
# Background runs (ToolRun rows, listed in the admin) older than this are deleted.
MCP_TOOL_RUN_RETENTION_DAYS = _env_int("MCP_TOOL_RUN_RETENTION_DAYS", 30, minimum=1)
# Usage (mcp_app/usage/): each process writes its counts this often and at exit (0: never, tests);
# the per-minute buckets are kept this many days.
MCP_USAGE_FLUSH_SECONDS = _env_int("MCP_USAGE_FLUSH_SECONDS", 10, minimum=0)
MCP_USAGE_RETENTION_DAYS = _env_int("MCP_USAGE_RETENTION_DAYS", 8, minimum=1)
# Governance events (AMB-355: denials, guardrail blocks and redactions, throttles), written by the usage
# flush, are kept this many days.
MCP_GOVERNANCE_EVENT_DAYS = _env_int("MCP_GOVERNANCE_EVENT_DAYS", 30, minimum=1)
# Without Redis nothing tells a server that another process (manage.py, another server) changed a
# tenant: it rereads the tenant's version from the database at most this often. With Redis changes
# arrive at once and this is unused.
MCP_VERSION_RECHECK_SECONDS = _env_float("MCP_VERSION_RECHECK_SECONDS", 5.0, minimum=0.0)
# Tenants whose facts and catalog a process keeps (least recently used out, AMB-367); the next request of
# an evicted tenant loads it again. Sizes: docs/operations.md (Sizing).
MCP_CATALOG_TENANTS = _env_int("MCP_CATALOG_TENANTS", 2000, minimum=1)
# Kept tool results (mcp_app/protocol/result_cache.py, AMB-374): at most this many bytes a tenant.
MCP_RESULT_CACHE_TENANT_BYTES = _env_int("MCP_RESULT_CACHE_TENANT_BYTES", 8 * 1024 * 1024, minimum=1024)
# Prometheus metrics at /metrics (mcp_app/operations/metrics.py): a bearer token, or networks allowed to scrape
# (comma-separated CIDRs); with neither, loopback only. Past MAX_TENANTS tenants, the rest are "(other)".
MCP_METRICS_TOKEN = os.environ.get("MCP_METRICS_TOKEN", "")
MCP_METRICS_ALLOW = _env_list("MCP_METRICS_ALLOW", [])
for _network in MCP_METRICS_ALLOW:
    try:
        ipaddress.ip_network(_network, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"MCP_METRICS_ALLOW: {_network!r} is not a network (e.g. 10.0.0.0/8)"
        ) from None
MCP_METRICS_MAX_TENANTS = _env_int("MCP_METRICS_MAX_TENANTS", 100, minimum=1)
# Upstream servers labelled by name per tenant in /metrics (the most called); the rest of a tenant's are
# "(other)", so a tenant creating thousands of upstreams adds at most this many series (AMB-173).
MCP_METRICS_MAX_UPSTREAMS = _env_int("MCP_METRICS_MAX_UPSTREAMS", 20, minimum=1)

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
# Where collectstatic writes and WhiteNoise serves from; a container or a parallel test run may set its own.
STATIC_ROOT = Path(os.environ.get("STATIC_ROOT") or BASE_DIR / "staticfiles")
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # Compressed copies are written at collectstatic; no manifest, so templates still render
    # (e.g. in tests) when collectstatic has not run.
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
MEDIA_ROOT = BASE_DIR / "media"
MEDIA_URL = "media/"

LOGIN_URL = "/admin/login/"

# Sign-in throttling (django-axes, shared by every process through the database): after
# MCP_SIGNIN_FAILURE_LIMIT wrong passwords for one username from one address, that pair is refused
# (429, a page saying when to retry) for MCP_SIGNIN_COOLOFF_MINUTES; a success clears the count.
# Locking the pair, not the account, keeps a stranger from locking a person out from elsewhere.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# Single sign-on (mcpsite/sso.py, AMB-212..214): people sign in to the admin and the consent page with an
# OpenID Connect provider (found from MCP_OIDC_ISSUER's discovery document), beside the password form.
# Off unless the issuer and this platform's client there are given.
MCP_OIDC_ISSUER = os.environ.get("MCP_OIDC_ISSUER", "").strip().rstrip("/")
MCP_OIDC_CLIENT_ID = os.environ.get("MCP_OIDC_CLIENT_ID", "").strip()
MCP_OIDC_CLIENT_SECRET = os.environ.get("MCP_OIDC_CLIENT_SECRET", "")
MCP_OIDC_ENABLED = bool(MCP_OIDC_ISSUER or MCP_OIDC_CLIENT_ID or MCP_OIDC_CLIENT_SECRET)
if MCP_OIDC_ENABLED and not (MCP_OIDC_ISSUER and MCP_OIDC_CLIENT_ID and MCP_OIDC_CLIENT_SECRET):
    raise ImproperlyConfigured(
        "Single sign-on needs MCP_OIDC_ISSUER, MCP_OIDC_CLIENT_ID and MCP_OIDC_CLIENT_SECRET"
    )
if MCP_OIDC_ENABLED and urlsplit(MCP_OIDC_ISSUER).scheme not in {"http", "https"}:
    raise ImproperlyConfigured(f"MCP_OIDC_ISSUER must be an http(s) URL, got {MCP_OIDC_ISSUER!r}")
# The button says "Sign in with <this>"; the claim holding the person's groups (tenants' sso_groups).
MCP_OIDC_PROVIDER_NAME = os.environ.get("MCP_OIDC_PROVIDER_NAME", "").strip() or "single sign-on"
MCP_OIDC_GROUPS_CLAIM = os.environ.get("MCP_OIDC_GROUPS_CLAIM", "").strip() or "groups"
# When set, only addresses of these domains may sign in this way (comma-separated); empty: any.
MCP_OIDC_ALLOWED_DOMAINS = [d.lower() for d in _env_list("MCP_OIDC_ALLOWED_DOMAINS", [])]
# Always listed, each idle unless MCP_OIDC_ENABLED (the backend answers only the provider's callback).
AUTHENTICATION_BACKENDS.append("mcpsite.sso.SsoBackend")
TEMPLATES[0]["OPTIONS"]["context_processors"].append("mcpsite.sso.context")
# mozilla-django-oidc's own names: a signed (RS256, the provider's JWKS) id_token, PKCE S256, the nonce.
OIDC_RP_CLIENT_ID = MCP_OIDC_CLIENT_ID
OIDC_RP_CLIENT_SECRET = MCP_OIDC_CLIENT_SECRET
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_RP_SCOPES = "openid email"
OIDC_USE_PKCE = True
OIDC_TIMEOUT = 10
OIDC_AUTHENTICATION_CALLBACK_URL = "sso-callback"
LOGIN_REDIRECT_URL = "/"

AXES_FAILURE_LIMIT = _env_int("MCP_SIGNIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=_env_int("MCP_SIGNIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "mcpsite.lockout.locked_out"
# Successful sign-ins are Django's own business; axes keeps only the failures.
AXES_DISABLE_ACCESS_LOG = True

# LOG_FORMAT=json: one JSON object a line, with the running request's tenant, session, client, request
# id, method and tool (mcp_app/core/logs.py); MCP_LOG_REQUESTS=1 adds a line per answered request with
# its duration and outcome (logger mcp_app.requests).
LOG_FORMAT = os.environ.get("LOG_FORMAT", "text")
if LOG_FORMAT not in {"text", "json"}:
    raise ImproperlyConfigured(f"LOG_FORMAT must be text or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_fields": {"()": "mcp_app.core.logs.RequestFields"}},
    "formatters": {"json": {"()": "mcp_app.core.logs.JsonFormatter"}},
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["request_fields"],
            **({"formatter": "json"} if LOG_FORMAT == "json" else {}),
        }
    },
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {
        "mcp_app": {"level": os.environ.get("MCP_LOG_LEVEL", "INFO")},
        "mcp_app.requests": {"level": "INFO" if _env_bool("MCP_LOG_REQUESTS", False) else "WARNING"},
    },
}

REST_FRAMEWORK = {
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # A `manage` bearer token first (its 401 carries the Bearer challenge), else the admin's session
    # (with its CSRF check): mcp_app/api/authentication.py.
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "mcp_app.api.authentication.ManageTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_SCHEMA_CLASS": "mcp_app.api.schema.ApiSchema",
    "EXCEPTION_HANDLER": "mcp_app.api.errors.handle",
    # JSON through the one nesting limit (AMB-119); forms and multipart as DRF reads them.
    "DEFAULT_PARSER_CLASSES": [
        "mcp_app.api.parsers.BoundedJSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
}
# The management API's OpenAPI schema (mcp_app/api/); the docs page's assets come from
# drf_spectacular_sidecar's static files, never a CDN.
SPECTACULAR_SETTINGS = {
    "TITLE": "MCP platform management API",
    "DESCRIPTION": "Tools, prompts, resources, templates, runs, OAuth clients, members and settings of a tenant. "
    "To use this page's *Try it out*, [sign in](/admin/login/?next=/api/v1/docs/) to the admin "
    "(its session is accepted here), or *Authorize* with a `manage` token.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # "Try it out" with the admin's session (AMB-78): the page's own interceptor sends the CSRF token
    # rendered with the page, stale once the person signs in after opening it (every write then 403).
    # This one (a JS string: drf-spectacular passes it unchanged) runs that interceptor, then sends
    # the token of the csrftoken cookie as it is at the time of the request.
    "SWAGGER_UI_SETTINGS": """{
  deepLinking: true,
  requestInterceptor: (request) => {
    request = requestInterceptor(request);
    const cookie = document.cookie.split("; ").find((c) => c.startsWith("csrftoken="));
    if (cookie && !["GET", undefined].includes(request.method) && request.credentials === "same-origin") {
      for (const name of Object.keys(request.headers)) {
        if (name.toLowerCase() === "x-csrftoken") delete request.headers[name];
      }
      request.headers["X-CSRFToken"] = decodeURIComponent(cookie.slice("csrftoken=".length));
    }
    return request;
  },
}""",
}

# E-mail (invitations, AMB-105): Django's backend. The console backend prints each mail to the process's
# output (development); production sets the SMTP backend and its host. Tests use locmem (mail.outbox),
# the end-to-end servers the file backend (EMAIL_FILE_PATH).
EMAIL_BACKEND = os.environ.get("EMAIL_BACKEND") or "django.core.mail.backends.console.EmailBackend"
EMAIL_FILE_PATH = os.environ.get("EMAIL_FILE_PATH") or str(BASE_DIR / "sent-mail")
EMAIL_HOST = os.environ.get("EMAIL_HOST", "localhost")
EMAIL_PORT = _env_int("EMAIL_PORT", 25, minimum=1)
EMAIL_HOST_USER = os.environ.get("EMAIL_HOST_USER", "")
EMAIL_HOST_PASSWORD = os.environ.get("EMAIL_HOST_PASSWORD", "")
EMAIL_USE_TLS = _env_bool("EMAIL_USE_TLS", False)
EMAIL_USE_SSL = _env_bool("EMAIL_USE_SSL", False)
# An unreachable mail server fails the invitation (undone, said on the page) instead of hanging it.
EMAIL_TIMEOUT = _env_int("EMAIL_TIMEOUT", 10, minimum=1)
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL") or f"MCP platform <noreply@{_public.hostname}>"
# Invitations (tenants/invitations.py): how long a link works, and how many an hour one tenant, and
# one inviter, may send (AMB-107; 0: no limit).
MCP_INVITATION_DAYS = _env_int("MCP_INVITATION_DAYS", 7, minimum=1)
MCP_INVITATIONS_PER_HOUR = _env_int("MCP_INVITATIONS_PER_HOUR", 20, minimum=0)

# --- MCP platform settings -------------------------------------------------------
MCP_SERVER_NAME = os.environ.get("MCP_SERVER_NAME", "django-mcp-platform")
MCP_SERVER_VERSION = "0.1.0"
# Largest accepted POST body; larger → 413.
# SIGTERM under Daphne: how long calls in flight may take to finish before they are cancelled.
MCP_SHUTDOWN_GRACE_SECONDS = _env_int("MCP_SHUTDOWN_GRACE_SECONDS", 20, minimum=0)
MCP_MAX_BODY_BYTES = _env_int("MCP_MAX_BODY_BYTES", 4 * 1024 * 1024, minimum=1024)
# Largest document an owner may send (a tenant document, an OpenAPI description, an mcpServers file:
# the admin's import pages, the API's imports, an OpenAPI URL's answer), refused before it is parsed
# (portability/limits.py, AMB-278). A 19 MB YAML held a worker for two minutes.
MCP_MAX_UPLOAD_BYTES = _env_int("MCP_MAX_UPLOAD_BYTES", 2 * 1024 * 1024, minimum=64 * 1024)
# The admin's second import step posts the document back as a form field (escaped: up to 3x longer).
DATA_UPLOAD_MAX_MEMORY_SIZE = max(2_621_440, 3 * MCP_MAX_UPLOAD_BYTES + 65_536)
# Deepest JSON/YAML nesting accepted anywhere (lib/nesting.py, AMB-115); definitions get 8 less.
MCP_MAX_JSON_DEPTH = _env_int("MCP_MAX_JSON_DEPTH", 64, minimum=16)
# Idle sessions expire after this many seconds (then 404).
MCP_SESSION_IDLE_SECONDS = _env_int("MCP_SESSION_IDLE_SECONDS", 3600, minimum=10)
# A new session nobody has used since its initialize expires sooner (AMB-104); its first later
# request gives it MCP_SESSION_IDLE_SECONDS like any other.
MCP_SESSION_FIRST_IDLE_SECONDS = _env_int("MCP_SESSION_FIRST_IDLE_SECONDS", 60, minimum=1)
# With Redis, a process serves a session it has read from memory for at most this many seconds before
# reading it again (which also renews its idle time); a change or end of the session made by any process
# reaches every process's memory by push at once (AMB-189). 0: read it from Redis on every request.
MCP_SESSION_CACHE_SECONDS = _env_int("MCP_SESSION_CACHE_SECONDS", 10, minimum=0)
# Open sessions one client (OAuth user, else OAuth client, else address) may hold per tenant (AMB-100); 0: no cap.
MCP_SESSIONS_PER_CLIENT = _env_int("MCP_SESSIONS_PER_CLIENT", 100, minimum=0)
# How long SSE events are kept for Last-Event-ID replay.
MCP_EVENT_RETENTION_SECONDS = _env_int("MCP_EVENT_RETENTION_SECONDS", 600, minimum=10)
# SSE `retry:` hint, milliseconds.
MCP_SSE_RETRY_MS = _env_int("MCP_SSE_RETRY_MS", 1000, minimum=0)
# Keep-alive comment interval on idle SSE streams, seconds.
MCP_SSE_KEEPALIVE_SECONDS = _env_int("MCP_SSE_KEEPALIVE_SECONDS", 15, minimum=1)
# A GET resuming a request's stream (Last-Event-ID) waits at most this long for the rest of it,
# then closes; the client reconnects with its latest Last-Event-ID.
MCP_SSE_RESUME_WAIT_SECONDS = _env_int("MCP_SSE_RESUME_WAIT_SECONDS", 60, minimum=1)
# Templates (AMB-97, 98): how long one render may run (prompts and resources have no timeout of their
# own; a tool's timeout bounds it too); render processes per serving process, and per tenant at a time.
MCP_TEMPLATE_SECONDS = _env_int("MCP_TEMPLATE_SECONDS", 5, minimum=1)
MCP_TEMPLATE_PROCESSES = _env_int("MCP_TEMPLATE_PROCESSES", 2, minimum=1)
MCP_TEMPLATE_PROCESSES_PER_TENANT = _env_int("MCP_TEMPLATE_PROCESSES_PER_TENANT", 1, minimum=1)
# Start the render processes' forkserver (a process that sets Django up) when a serving process or a
# worker's pool child starts, so the first large template does not wait for it; off: on first need
# (the end-to-end tests' many short-lived servers, most of which never render a large template).
MCP_TEMPLATE_WARM = _env_bool("MCP_TEMPLATE_WARM", True)
# Page size for */list results.
MCP_PAGE_SIZE = _env_int("MCP_PAGE_SIZE", 50, minimum=1)
# Hosts/networks the http handler may reach although they are private or loopback
# (comma-separated hostnames, IPs or CIDRs). Empty in production.
MCP_HTTP_HANDLER_ALLOW = _env_list("MCP_HTTP_HANDLER_ALLOW", [])
MCP_HTTP_HANDLER_MAX_RESPONSE_BYTES = _env_int(
    "MCP_HTTP_HANDLER_MAX_RESPONSE_BYTES", 2 * 1024 * 1024, minimum=1024
)
# Upstream MCP servers (mcp_app/federation/, docs/decisions/federation.md): their URLs pass the same SSRF
# guard and MCP_HTTP_HANDLER_ALLOW as http tools. Seconds to connect; connections (sessions) kept per upstream
# in each process, and how long a call past that bound waits for one; an idle connection closes after
# MCP_UPSTREAM_IDLE_SECONDS. The breaker: that many consecutive failures to reach an upstream stop calls to
# The MCP Registry (mcp_app/registry/, docs/decisions/registry.md, AMB-372, AMB-373). Served: the
# namespace of every listed tenant's server name (blank: the public host reversed, mcp.example.com ->
# com.example.mcp). Used: the registry "Add an upstream from a registry" searches unless told another, and
# how long and how large one answer of a registry may be (read through the SSRF guard, as http tools are).
MCP_REGISTRY_NAMESPACE = os.environ.get("MCP_REGISTRY_NAMESPACE", "").strip()
if MCP_REGISTRY_NAMESPACE and not re.fullmatch(r"[a-zA-Z0-9.-]{1,136}", MCP_REGISTRY_NAMESPACE):
    raise ImproperlyConfigured(
        f"MCP_REGISTRY_NAMESPACE must be 1-136 letters, digits, '.' and '-', got {MCP_REGISTRY_NAMESPACE!r}"
    )
MCP_REGISTRY_URL = os.environ.get("MCP_REGISTRY_URL", "https://registry.modelcontextprotocol.io").rstrip("/")
MCP_REGISTRY_FETCH_SECONDS = _env_int("MCP_REGISTRY_FETCH_SECONDS", 10, minimum=1)
MCP_REGISTRY_MAX_BYTES = _env_int("MCP_REGISTRY_MAX_BYTES", 1024 * 1024, minimum=1024)
# The registry's reads (/v0.1/..., /t/<slug>/server.json) one address may make in any minute (0: no
# limit): they are public, and a flood of 100-server pages cost the serving process 4-5x another
# tenant's p99 (tests/e2e/test_registry_isolation.py). A gallery or a person browsing needs a few.
MCP_REGISTRY_READS_PER_MINUTE = _env_int("MCP_REGISTRY_READS_PER_MINUTE", 60, minimum=0)
# it for MCP_UPSTREAM_BREAKER_SECONDS, then one call probes it.
MCP_UPSTREAM_CONNECT_SECONDS = _env_int("MCP_UPSTREAM_CONNECT_SECONDS", 10, minimum=1)
MCP_UPSTREAM_MAX_SESSIONS = _env_int("MCP_UPSTREAM_MAX_SESSIONS", 32, minimum=1)
MCP_UPSTREAM_POOL_WAIT_SECONDS = _env_int("MCP_UPSTREAM_POOL_WAIT_SECONDS", 2, minimum=0)
MCP_UPSTREAM_IDLE_SECONDS = _env_int("MCP_UPSTREAM_IDLE_SECONDS", 300, minimum=1)
MCP_UPSTREAM_BREAKER_FAILURES = _env_int("MCP_UPSTREAM_BREAKER_FAILURES", 5, minimum=1)
MCP_UPSTREAM_BREAKER_SECONDS = _env_int("MCP_UPSTREAM_BREAKER_SECONDS", 30, minimum=1)
# The largest message an upstream may send (a JSON reply, or one event of an SSE stream): a tenant's
# upstream must not fill this process's memory, which serves every tenant.
MCP_UPSTREAM_MAX_MESSAGE_BYTES = _env_int("MCP_UPSTREAM_MAX_MESSAGE_BYTES", 4 * 1024 * 1024, minimum=1024)
# The messages one call's reply may carry (AMB-188): a burst, then so many a second. Past it the call
# ends with an error and the upstream's breaker opens: parsing a flood costs every tenant's loop.
MCP_UPSTREAM_MESSAGE_BURST = _env_int("MCP_UPSTREAM_MESSAGE_BURST", 200, minimum=10)
MCP_UPSTREAM_MESSAGES_PER_SECOND = _env_int("MCP_UPSTREAM_MESSAGES_PER_SECOND", 50, minimum=1)
# The upstream servers one tenant may add: each has a message budget and a breaker of its own (AMB-188),
# so this bounds what one tenant's upstreams can cost a process however many it registers.
MCP_UPSTREAMS_PER_TENANT = _env_int("MCP_UPSTREAMS_PER_TENANT", 50, minimum=1)
# Fan-in of upstreams' list changes (mcp_app/upstreams/watcher.py, docs/decisions/upstreams.md AMB-180..183):
# each serving process listens to at most MCP_UPSTREAM_WATCH_MAX upstreams, each held by one process of the
# deployment at a time (a Redis lease of that many seconds, renewed every third of it); which upstreams
# exist is looked at again every MCP_UPSTREAM_WATCH_RESCAN_SECONDS; notifications within the debounce
# window make one sync; a lost connection is tried again after 1 s, doubling up to the backoff cap; a
# legacy session is pinged every MCP_UPSTREAM_WATCH_PING_SECONDS (its GET stream can die unnoticed).
MCP_UPSTREAM_WATCH = _env_bool("MCP_UPSTREAM_WATCH", True)
MCP_UPSTREAM_WATCH_MAX = _env_int("MCP_UPSTREAM_WATCH_MAX", 100, minimum=0)
MCP_UPSTREAM_WATCH_DEBOUNCE_MS = _env_int("MCP_UPSTREAM_WATCH_DEBOUNCE_MS", 1000, minimum=0)
MCP_UPSTREAM_WATCH_LEASE_SECONDS = _env_int("MCP_UPSTREAM_WATCH_LEASE_SECONDS", 30, minimum=3)
MCP_UPSTREAM_WATCH_RESCAN_SECONDS = _env_int("MCP_UPSTREAM_WATCH_RESCAN_SECONDS", 30, minimum=1)
MCP_UPSTREAM_WATCH_BACKOFF_SECONDS = _env_int("MCP_UPSTREAM_WATCH_BACKOFF_SECONDS", 300, minimum=1)
MCP_UPSTREAM_WATCH_PING_SECONDS = _env_int("MCP_UPSTREAM_WATCH_PING_SECONDS", 60, minimum=1)
# Extra modules whose import registers python handlers (comma-separated).
MCP_PYTHON_HANDLER_MODULES = _env_list("MCP_PYTHON_HANDLER_MODULES", ["mcp_app.demo.callables"])
# Tool calls allowed per session in any 60 s (TL-13); 0 disables the limit. Burst: in any one second.
MCP_TOOL_CALLS_PER_MINUTE = _env_int("MCP_TOOL_CALLS_PER_MINUTE", 1200, minimum=0)
MCP_TOOL_CALLS_BURST = _env_int("MCP_TOOL_CALLS_BURST", 120, minimum=1)
# How long an MCP endpoint trusts its lookup of a bearer token or API key (seconds; 0: look up every
# request). A revocation holds at once in every process (AMB-296): the revoking process drops its entry,
# and with Redis every other one drops it on the eviction message. Without Redis there is no bus to carry
# that message (a revoke through manage.py, the admin of another process, a worker), so no process may keep
# a revocable credential past the request that checked it: the cache is off, whatever the variable says.
MCP_TOKEN_CACHE_SECONDS = _env_int("MCP_TOKEN_CACHE_SECONDS", 5, minimum=0) if REDIS_URL else 0
# A tenant's own identity provider (mcp_app/oauth/external_tokens.py, docs/decisions/oauth.md AMB-203..206):
# an accepted token (JWT or introspected) is trusted this long at most, never past its exp; its JWKS is kept
# MCP_IDENTITY_JWKS_SECONDS and fetched again for an unknown kid at most once per
# MCP_IDENTITY_JWKS_REFETCH_SECONDS; a fetch of keys or an introspection gives up after
# MCP_IDENTITY_FETCH_SECONDS; exp and nbf are checked with MCP_IDENTITY_LEEWAY_SECONDS of leeway.
# MCP_IDENTITY_ALLOW_HTTP_LOOPBACK lets an identity provider on a loopback host use http (also under DEBUG).
MCP_IDENTITY_CACHE_SECONDS = _env_int("MCP_IDENTITY_CACHE_SECONDS", 5, minimum=0)
MCP_IDENTITY_JWKS_SECONDS = _env_int("MCP_IDENTITY_JWKS_SECONDS", 300, minimum=1)
MCP_IDENTITY_JWKS_REFETCH_SECONDS = _env_int("MCP_IDENTITY_JWKS_REFETCH_SECONDS", 30, minimum=0)
MCP_IDENTITY_FETCH_SECONDS = _env_int("MCP_IDENTITY_FETCH_SECONDS", 3, minimum=1)
MCP_IDENTITY_LEEWAY_SECONDS = _env_int("MCP_IDENTITY_LEEWAY_SECONDS", 30, minimum=0)
MCP_IDENTITY_ALLOW_HTTP_LOOPBACK = _env_bool("MCP_IDENTITY_ALLOW_HTTP_LOOPBACK", False)
# With Redis, every serving process subscribes to token revocations and evicts at once (oauth.tokens).
MCP_TOKEN_EVICTION_SUBSCRIBER = _env_bool("MCP_TOKEN_EVICTION_SUBSCRIBER", True)
# With Redis, each serving loop listens for moved change tokens (catalog/tokens.py); off, every
# request reads its tenant's token from Redis instead.
MCP_CHANGE_TOKEN_SUBSCRIBER = _env_bool("MCP_CHANGE_TOKEN_SUBSCRIBER", True)

# --- OAuth authorization server (django-oauth-toolkit) ----------------------------
from mcp_app.oauth import scopes as _oauth_scopes  # noqa: E402 - a constants module, no Django imports

# One authorization server for every tenant, at the site origin (AMB-25); mcp_app.oauth binds it to tenants.
MCP_OAUTH_ACCESS_TOKEN_SECONDS = _env_int("MCP_OAUTH_ACCESS_TOKEN_SECONDS", 3600, minimum=60)
MCP_OAUTH_REFRESH_TOKEN_SECONDS = _env_int("MCP_OAUTH_REFRESH_TOKEN_SECONDS", 30 * 24 * 3600, minimum=60)
# Dynamic client registrations accepted per client address per minute (0: no limit); larger bodies → 413.
MCP_OAUTH_REGISTRATIONS_PER_MINUTE = _env_int("MCP_OAUTH_REGISTRATIONS_PER_MINUTE", 10, minimum=0)
# Token endpoint requests (codes exchanged, refreshes) per client address and minute; 0: no limit.
MCP_OAUTH_TOKEN_REQUESTS_PER_MINUTE = _env_int("MCP_OAUTH_TOKEN_REQUESTS_PER_MINUTE", 120, minimum=0)
MCP_OAUTH_MAX_REGISTRATION_BYTES = _env_int("MCP_OAUTH_MAX_REGISTRATION_BYTES", 16 * 1024, minimum=1024)
# Client ID metadata documents: hosts (ALLOWED_HOSTS syntax) whose documents may be fetched although
# they resolve to private or loopback addresses, hosts never fetched, and an extra CA bundle to trust.
# All empty in production: only public hosts with publicly trusted certificates.
MCP_CIMD_ALLOWED_HOSTS = _env_list("MCP_CIMD_ALLOWED_HOSTS", [])
MCP_CIMD_DENIED_HOSTS = _env_list("MCP_CIMD_DENIED_HOSTS", [])
MCP_CIMD_CA_BUNDLE = os.environ.get("MCP_CIMD_CA_BUNDLE") or None

# Named as DOT's swappable models expect, so a model of ours can point at the Application (AMB-197).
OAUTH2_PROVIDER_APPLICATION_MODEL = "oauth2_provider.Application"
OAUTH2_PROVIDER = {
    # DOT's audience check for its DRF integration: only the management API uses it, and only a
    # token whose audience is the API passes it (the MCP endpoints check theirs in mcp_app/oauth/tokens.py).
    "RESOURCE_SERVER_TOKEN_RESOURCE_VALIDATOR": "mcp_app.api.authentication.audience_covers",
    "OAUTH2_SERVER_CLASS": "mcp_app.oauth.authorization_server.McpOAuthServer",
    "OAUTH2_VALIDATOR_CLASS": "mcp_app.oauth.validators.McpOAuth2Validator",
    "APPLICATION_ADMIN_CLASS": "mcp_app.oauth.admin.ApplicationAdmin",
    # The advertised base scopes; per-tool scopes are accepted on top (mcp_app.oauth.validators).
    "SCOPES": dict(_oauth_scopes.BASE_SCOPES),
    "DEFAULT_SCOPES": list(_oauth_scopes.BASE_SCOPES),
    "ACCESS_TOKEN_EXPIRE_SECONDS": MCP_OAUTH_ACCESS_TOKEN_SECONDS,
    "REFRESH_TOKEN_EXPIRE_SECONDS": MCP_OAUTH_REFRESH_TOKEN_SECONDS,
    "AUTHORIZATION_CODE_EXPIRE_SECONDS": 120,
    "ROTATE_REFRESH_TOKEN": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    "PKCE_REQUIRED": True,
    # Never approve silently because of an earlier token (the client cannot ask for "auto" either).
    "REQUEST_APPROVAL_PROMPT": "force",
    # RFC 8252 §7.3 port flexibility for http://localhost too, as for 127.0.0.1 and [::1] (AMB-28).
    "ALLOW_LOCALHOST_LOOPBACK": True,
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    # client_credentials: service clients only (AMB-197); registration still offers the first two alone.
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
    "COMPLIANT_BCP_RFC9700_IMPLICIT_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PASSWORD_GRANT": True,
    "COMPLIANT_BCP_RFC9700_PKCE_METHOD": True,
    "COMPLIANT_BCP_RFC9700_ACCESS_TOKEN_TRANSPORT": True,
    "COMPLIANT_BCP_RFC9700_AUTHZ_RESPONSE_ISS": True,
    # Only the SHA-256 checksum of access and refresh tokens is stored (AU-47, AMB-29).
    "COMPLIANT_BCP_RFC9700_TOKEN_STORAGE": True,
    "DCR_ENABLED": True,
    # Open registration (MCP clients register anonymously), rate-limited per address (AMB-26).
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    "CIMD_METADATA_FETCHER": "mcp_app.oauth.cimd.McpMetadataFetcher",
    "CIMD_REGISTRATION_PERMISSION_CLASSES": ("mcp_app.oauth.cimd.DeniedHostsCIMDPermission",),
}


def _provider_key() -> str:
    """MCP_OIDC_PROVIDER_RSA_KEY (PEM) or the file MCP_OIDC_PROVIDER_KEY_FILE names; "" when neither."""
    key = os.environ.get("MCP_OIDC_PROVIDER_RSA_KEY", "").strip()
    path = os.environ.get("MCP_OIDC_PROVIDER_KEY_FILE", "").strip()
    if path and not key:
        try:
            key = Path(path).read_text().strip()
        except OSError as exc:
            raise ImproperlyConfigured(f"MCP_OIDC_PROVIDER_KEY_FILE: cannot read {path!r}: {exc}") from None
    if key and "PRIVATE KEY-----" not in key:
        raise ImproperlyConfigured("The OpenID Connect provider's key must be an RSA private key in PEM")
    return key


# This platform as an OpenID Connect provider for sign-in clients (mcp_app/oauth/sign_in.py, AMB-214):
# on only with its RS256 signing key. Another deployment's single sign-on (MCP_OIDC_ISSUER) may point here.
MCP_OIDC_PROVIDER_KEY = _provider_key()
if MCP_OIDC_PROVIDER_KEY:
    OAUTH2_PROVIDER.update(
        OIDC_ENABLED=True,
        OIDC_RSA_PRIVATE_KEY=MCP_OIDC_PROVIDER_KEY,
        OIDC_ISS_ENDPOINT=MCP_PUBLIC_URL,
        OAUTH2_SERVER_CLASS="mcp_app.oauth.authorization_server.McpOpenIDServer",
        OIDC_RESPONSE_TYPES_SUPPORTED=["code"],
    )
