"""The deployment files that cannot run here (no container engine): the Dockerfile, compose.yaml, nginx's and
Prometheus's configuration stay consistent with the Procfile, bin/entrypoint, the settings and
docs/operations.md. The Procfile itself runs in tests/e2e/test_procfile.py.
"""

from __future__ import annotations

import json
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import yaml
from django.conf import settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text())
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
# The services that run this project's image (the others are PostgreSQL, Redis, nginx, ...).
APP = {name: service for name, service in SERVICES.items() if "build" in service}
DOCKERFILE = (ROOT / "Dockerfile").read_text()
ENTRYPOINT = (ROOT / "bin" / "entrypoint").read_text()
OPERATIONS = (ROOT / "docs" / "operations.md").read_text()
NGINX = (ROOT / "deploy" / "nginx.conf").read_text()


def procfile() -> dict[str, list[str]]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return {
        name: shlex.split(command) for name, _, command in (line.partition(":") for line in lines if line)
    }


def entrypoint_roles() -> set[str]:
    """The roles bin/entrypoint's `case` handles by name."""
    return set(re.findall(r"^  (\w+)\)$", ENTRYPOINT, re.M))


def instructions(keyword: str) -> list[str]:
    """The arguments of every Dockerfile instruction `keyword` (continuation lines joined)."""
    text = DOCKERFILE.replace("\\\n", " ")
    return [m.group(1).strip() for m in re.finditer(rf"^{keyword}\s+(.*)$", text, re.M)]


def seconds(value: str) -> int:
    """`30s`, `1m30s`, `1h` (compose durations, nginx times) in seconds."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", value)
    assert match and value, value
    hours, minutes, secs = (int(group or 0) for group in match.groups())
    return hours * 3600 + minutes * 60 + secs


def nginx_block(opening: str) -> str:
    """The text between the braces of the nginx block that starts with `opening` (e.g. `location /t/`)."""
    start = NGINX.index("{", NGINX.index(opening + " ")) + 1
    depth, end = 1, start
    while depth:
        depth += {"{": 1, "}": -1}.get(NGINX[end], 0)
        end += 1
    return NGINX[start : end - 1]


def directives(block: str) -> dict[str, str]:
    """A block's own directives by name (`proxy_set_header` by name and header), nested blocks left out."""
    text = "\n".join(line.split("#", 1)[0] for line in block.splitlines())
    while "{" in text:  # drop nested blocks, their heading included
        text = re.sub(r"[^;{}]*\{[^{}]*\}", "", text)
    found = {}
    for statement in text.split(";"):
        line = " ".join(statement.split())
        if not line:
            continue
        parts = line.split(None, 2 if line.startswith("proxy_set_header") else 1)
        found[" ".join(parts[:-1])] = parts[-1]
    return found


def test_compose_yaml_is_valid_against_the_compose_specification() -> None:
    # check-jsonschema vendors the compose-spec schema; nothing is downloaded.
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    jsonschema.validators.validator_for(schema)(schema).validate(COMPOSE)


def test_compose_runs_two_web_processes_and_two_workers_with_the_procfile_roles() -> None:
    roles = {name: service["command"] for name, service in APP.items()}
    assert sorted(roles.values()) == [["release"], ["web"], ["web"], ["worker"], ["worker"]]
    assert set(procfile()) == {"release", "web", "worker"}
    for role, command in procfile().items():
        # `exec`: the process manager's signal reaches Daphne or Celery, not a shell in between.
        assert command == ["exec", "bin/entrypoint", role]
    assert {"release", "web", "worker"} <= entrypoint_roles()
    worker_names = {s["environment"]["MCP_WORKER_NAME"] for s in APP.values() if s["command"] == ["worker"]}
    assert len(worker_names) == 2


def test_every_environment_variable_compose_sets_is_documented_and_read_by_the_platform() -> None:
    sources = [ENTRYPOINT, (ROOT / "mcpsite" / "settings.py").read_text()]
    sources += [path.read_text() for path in (ROOT / "mcp_app").rglob("*.py")]
    code = "\n".join(sources)
    for name, service in APP.items():
        for variable in service["environment"]:
            assert f"`{variable}`" in OPERATIONS, f"{name}: {variable} is not in docs/operations.md"
            # OTEL_* are read by the OpenTelemetry SDK itself, DATABASE_URL by dj-database-url.
            read_by_library = variable.startswith("OTEL_") or variable == "DATABASE_URL"
            assert read_by_library or variable in code, f"{name}: nothing reads {variable}"


def test_every_process_gets_the_same_values_that_must_be_equal_across_processes() -> None:
    must_be_equal = ["SECRET_KEY", "MCP_PUBLIC_URL", "DATABASE_URL", "REDIS_URL", "MCP_BACKGROUND_QUEUE"]
    shared = {v: {json.dumps(s["environment"].get(v)) for s in APP.values()} for v in must_be_equal}
    assert all(len(values) == 1 for values in shared.values()), shared
    section = OPERATIONS.split("### What must be equal across processes", 1)[1].split("\n## ", 1)[0]
    for variable in [*must_be_equal, "MCP_SECRETS_KEY", "SECRET_KEY_FALLBACKS", "CELERY_BROKER_URL"]:
        assert f"`{variable}`" in section, variable


def test_services_start_in_order_on_health_and_web_processes_outlast_their_drain() -> None:
    for name in ("postgres", "redis"):
        assert SERVICES[name]["healthcheck"]["test"]
    for name, service in APP.items():
        needs = {dep: cond["condition"] for dep, cond in service["depends_on"].items()}
        assert needs["postgres"] == needs["redis"] == "service_healthy", name
        if service["command"] != ["release"]:
            assert needs["migrate"] == "service_completed_successfully", name
    web = [name for name, service in APP.items() if service["command"] == ["web"]]
    assert {dep: c["condition"] for dep, c in SERVICES["proxy"]["depends_on"].items()} == dict.fromkeys(
        web, "service_healthy"
    )
    for name in web:
        grace = int(
            APP[name]["environment"].get("MCP_SHUTDOWN_GRACE_SECONDS", settings.MCP_SHUTDOWN_GRACE_SECONDS)
        )
        assert seconds(APP[name]["stop_grace_period"]) > grace, name
        assert APP[name]["environment"]["MCP_PROXY_HEADERS"] == "1", name
        assert "ports" not in APP[name], f"{name} is reached through the proxy only"


def test_the_image_runs_bin_entrypoint_as_a_non_root_user_and_stops_on_sigterm() -> None:
    assert len(instructions("FROM")) >= 2, "multi-stage: no build leftovers in the image"
    assert json.loads(instructions("ENTRYPOINT")[-1]) == ["bin/entrypoint"]  # exec form: no shell
    assert json.loads(instructions("CMD")[-1]) == ["web"]
    assert instructions("STOPSIGNAL") == ["SIGTERM"]
    assert instructions("USER")[-1] not in {"root", "0"}
    healthcheck = instructions("HEALTHCHECK")[-1]
    assert "/health/live" in healthcheck and "CMD [" in healthcheck
    runs = "\n".join(instructions("RUN"))
    assert "pyproject.toml" in runs and "pip install --no-deps -e ." in runs
    assert "collectstatic" in runs and "SECRET_KEY=" in runs, "static files at build, no key baked in"
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {".git", ".venv", ".secret_key", "db.sqlite3"} <= set(ignored)


def test_the_proxy_streams_mcp_responses_unbuffered_to_every_web_process_and_hides_metrics() -> None:
    upstream = directives(nginx_block("upstream mcp_platform"))
    web = sorted(name for name, service in APP.items() if service["command"] == ["web"])
    servers = re.findall(r"^\s*server\s+(\S+?):(\d+)", nginx_block("upstream mcp_platform"), re.M)
    assert sorted(host for host, _ in servers) == web
    assert "keepalive" not in upstream, "a draining process must refuse new connections, not answer 503"
    server = directives(nginx_block("server"))
    assert server["proxy_http_version"] == "1.1"
    assert server["proxy_set_header X-Forwarded-For"] == "$remote_addr", "overwritten, never appended"
    mcp = directives(nginx_block("location /t/"))
    assert mcp["proxy_buffering"] == "off"
    # Streams stay open far longer than nginx's default 60 s between two reads.
    assert seconds(mcp["proxy_read_timeout"]) >= 3600
    assert directives(nginx_block("location = /metrics")) == {"return": "404"}
    prometheus = yaml.safe_load((ROOT / "deploy" / "prometheus.yml").read_text())
    targets = prometheus["scrape_configs"][0]["static_configs"][0]["targets"]
    assert sorted(targets) == [f"{name}:{port}" for name, (_, port) in zip(web, servers, strict=True)]


def test_behind_nginx_the_web_processes_trust_the_scheme_nginx_always_sets() -> None:
    # AMB-110: MCP_PROXY_SSL_HEADER names the header; nginx must set it on every request (a client's
    # own header never passes as sent), https only when nginx or the TLS proxy before it said so.
    web = [service for service in APP.values() if service["command"] == ["web"]]
    assert {service["environment"]["MCP_PROXY_SSL_HEADER"] for service in web} == {"X-Forwarded-Proto"}
    server = directives(nginx_block("server"))
    variable = server["proxy_set_header X-Forwarded-Proto"]
    mapping = re.search(rf"^map \$http_x_forwarded_proto {re.escape(variable)} \{{(.*?)\}}", NGINX, re.M | re.S)
    assert mapping, f"{variable} is not mapped from the incoming X-Forwarded-Proto"
    entries = dict(line.split() for line in mapping.group(1).replace(";", "").strip().splitlines())
    assert entries == {"default": "$scheme", "https": "https"}


def test_the_kubernetes_probes_need_no_host_header() -> None:
    # AMB-111: the probes answer the kubelet's pod-IP Host themselves.
    manifest = (ROOT / "deploy" / "kubernetes" / "web.yaml").read_text()
    probes = re.findall(r"^\s+(\w+Probe):.*\n\s+httpGet: \{(.*)\}$", manifest, re.M)
    assert {name for name, _ in probes} == {"startupProbe", "livenessProbe", "readinessProbe"}
    assert all("Host" not in spec for _, spec in probes), probes
