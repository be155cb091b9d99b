"""The deployment files that cannot run here (no container engine): the Dockerfile, compose.yaml, nginx's and
Prometheus's configuration stay consistent with the Procfile, bin/entrypoint, the settings and
docs/operations.md. The Procfile itself runs in tests/e2e/test_procfile.py.
"""

from __future__ import annotations

import configparser
import json
import re
import shlex
from importlib import resources
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import jsonschema
import yaml
from django.conf import settings

from lib import redis_url

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


# deploy/compose.fleet.yaml (AMB-371): laid over compose.yaml with `-f compose.yaml -f deploy/compose.fleet.yaml`.
FLEET: dict[str, Any] = yaml.safe_load((ROOT / "deploy" / "compose.fleet.yaml").read_text())
SENTINEL_CONF = (ROOT / "deploy" / "sentinel.conf").read_text()
PGBOUNCER_INI = (ROOT / "deploy" / "pgbouncer.ini").read_text()
# Lists compose replaces rather than merges (compose-spec merge.md); `volumes` merge by target.
REPLACED_LISTS = {"command", "entrypoint", "test"}


def merged(base: Any, override: Any, key: str = "") -> Any:
    """compose's merge of `override` into `base` for what the fleet file uses (compose-spec merge.md):
    mappings key by key, `command` and the like replaced, `volumes` by their target path."""
    if isinstance(base, dict) and isinstance(override, dict):
        out = dict(base)
        for name, value in override.items():
            out[name] = merged(base[name], value, name) if name in base else value
        return out
    if isinstance(base, list) and isinstance(override, list):
        if key in REPLACED_LISTS:
            return override
        # Only volumes are merged here: a list this function does not model must not pass unnoticed.
        assert key == "volumes", f"the fleet file merges a `{key}` list: model compose's rule for it here"
        by_target = {volume.split(":")[1]: volume for volume in base + override}
        return list(by_target.values())
    return override


FLEET_COMPOSE = merged(COMPOSE, FLEET)
FLEET_SERVICES: dict[str, dict[str, Any]] = FLEET_COMPOSE["services"]
FLEET_APP = {name: service for name, service in FLEET_SERVICES.items() if "build" in service}


def sentinel_directives() -> list[list[str]]:
    """deploy/sentinel.conf as redis-server reads it: one directive a line, its arguments split as words."""
    lines = (line.strip() for line in SENTINEL_CONF.splitlines())
    return [shlex.split(line) for line in lines if line and not line.startswith("#")]


def pgbouncer_config() -> configparser.ConfigParser:
    # PgBouncer's own rule: ";" and "#" start a comment only at the start of a line, so no inline
    # comment prefixes (a comment after a value is part of the value there, and here).
    parser = configparser.ConfigParser(comment_prefixes=(";", "#"), inline_comment_prefixes=None)
    parser.read_string(PGBOUNCER_INI)
    return parser


def mounts(service: dict[str, Any]) -> dict[str, str]:
    """A service's bind mounts, target path to source (`:ro` required: these files are configuration)."""
    found = {}
    for volume in service.get("volumes", []):
        source, target, *mode = volume.split(":")
        if source.startswith("./"):
            assert mode == ["ro"], volume
            found[target] = source
    return found


def sentinel_services() -> dict[str, dict[str, Any]]:
    return {name: s for name, s in FLEET_SERVICES.items() if "--sentinel" in " ".join(s.get("command", []))}


def test_the_fleet_file_and_the_merged_fleet_are_valid_against_the_compose_specification() -> None:
    schema_file = resources.files("check_jsonschema.builtin_schemas.vendor") / "compose-spec.json"
    schema = json.loads(schema_file.read_text())
    validator = jsonschema.validators.validator_for(schema)(schema)
    validator.validate(FLEET)
    validator.validate(FLEET_COMPOSE)
    # One command: the header says it, operations.md repeats it.
    command = "docker compose -f compose.yaml -f deploy/compose.fleet.yaml up"
    assert command in (ROOT / "deploy" / "compose.fleet.yaml").read_text()
    assert command in OPERATIONS


def test_in_the_fleet_every_process_reaches_postgresql_only_through_pgbouncer_in_transactions() -> None:
    config = pgbouncer_config()
    assert config["pgbouncer"]["pool_mode"] == "transaction"
    bouncer = FLEET_SERVICES["pgbouncer"]
    files = mounts(bouncer)
    assert files["/etc/pgbouncer/pgbouncer.ini"] == "./deploy/pgbouncer.ini"
    userlist = (ROOT / files[config["pgbouncer"]["auth_file"]].removeprefix("./")).read_text()
    logins = dict(shlex.split(line) for line in userlist.splitlines() if line.strip())
    postgres = [name for name, s in FLEET_SERVICES.items() if s.get("image", "").startswith("postgres:")]
    assert len(postgres) == 1
    for name, service in FLEET_APP.items():
        environment = service["environment"]
        assert environment["DATABASE_POOLING"] == "transaction", name
        # The wall still binds a role that is no superuser: set per transaction behind the pooler.
        assert environment["DATABASE_ROLE"], name
        url = urlsplit(environment["DATABASE_URL"])
        assert (url.hostname, url.port) == ("pgbouncer", int(config["pgbouncer"]["listen_port"])), name
        assert logins[url.username] == url.password, f"{name}: PgBouncer would refuse {url.username}"
        target = dict(pair.split("=", 1) for pair in config["databases"][url.path.lstrip("/")].split())
        assert target["host"] == postgres[0] and target["port"] == "5432", target
        assert target["dbname"] == url.path.lstrip("/")
        assert all(urlsplit(str(value)).hostname != postgres[0] for value in environment.values()), name


def test_in_the_fleet_redis_url_names_every_sentinel_and_the_service_they_monitor() -> None:
    directives = sentinel_directives()
    port = int(next(d[1] for d in directives if d[0] == "port"))
    monitors = [d[2:] for d in directives if d[:2] == ["sentinel", "monitor"]]
    assert len(monitors) == 1
    service, primary, primary_port, quorum = monitors[0]
    # The monitor names a compose service, which a sentinel resolves only when told to, before it.
    resolve = directives.index(["sentinel", "resolve-hostnames", "yes"])
    assert resolve < directives.index(["sentinel", "monitor", *monitors[0]])
    assert ["sentinel", "down-after-milliseconds", service, "5000"] in directives
    sentinels = sentinel_services()
    assert len(sentinels) >= 3
    majority = len(sentinels) // 2 + 1
    assert int(quorum) == majority, "a majority of the sentinels must agree the primary is down"
    assert primary in FLEET_SERVICES and FLEET_SERVICES[primary]["image"].startswith("redis:")
    replicas = [n for n, s in FLEET_SERVICES.items() if "--replicaof" in s.get("command", [])]
    assert len(replicas) == 1
    replica = FLEET_SERVICES[replicas[0]]["command"]
    assert replica[replica.index("--replicaof") + 1 :][:2] == [primary, primary_port]
    for name, sentinel in sentinels.items():
        script = sentinel["command"][-1]
        conf_path = next(t for t, s in mounts(sentinel).items() if s == "./deploy/sentinel.conf")
        # A sentinel rewrites its file: it starts from a copy in a writable place, never the mount.
        copy = re.search(rf"cp {re.escape(conf_path)} (\S+)", script)
        assert copy and f"redis-server {copy.group(1)} --sentinel" in script, name
        assert f"sentinel announce-ip {name}'" in script, f"{name} must announce its own service name"
        assert f"sentinel ckquorum {service}" in " ".join(sentinel["healthcheck"]["test"]), name
    for name, app in FLEET_APP.items():
        target = redis_url.parse(app["environment"]["REDIS_URL"])
        assert target.sentinel, name
        assert sorted(target.sentinels) == sorted((sentinel, port) for sentinel in sentinels), name
        assert target.service == service, name


def test_the_fleet_starts_in_order_with_migrate_once_before_the_processes() -> None:
    for name, service in FLEET_SERVICES.items():
        for dependency, condition in service.get("depends_on", {}).items():
            target = FLEET_SERVICES[dependency]
            if condition["condition"] == "service_healthy":
                # Our image has its HEALTHCHECK (the Dockerfile); any other service needs one of its own.
                check = target.get("healthcheck", {})
                checked = "build" in target or (check.get("test") and not check.get("disable"))
                assert checked, f"{name} -> {dependency}"
            elif condition["condition"] == "service_completed_successfully":
                assert target["restart"] == "no", f"{dependency} runs once"
    # No cycle: compose would refuse to start.
    order: list[str] = []
    while len(order) < len(FLEET_SERVICES):
        ready = [
            name
            for name, service in FLEET_SERVICES.items()
            if name not in order and set(service.get("depends_on", {})) <= set(order)
        ]
        assert ready, f"a cycle among {set(FLEET_SERVICES) - set(order)}"
        order += ready
    pooled = {"pgbouncer", *sentinel_services()}
    for name, service in FLEET_APP.items():
        needs = {dep: c["condition"] for dep, c in service["depends_on"].items()}
        assert all(needs[dep] == "service_healthy" for dep in pooled), name
        if service["command"] == ["release"]:
            assert service["restart"] == "no", "migrate is a one-shot"
        else:
            assert needs["migrate"] == "service_completed_successfully", name
    assert FLEET_SERVICES["pgbouncer"]["depends_on"]["postgres"]["condition"] == "service_healthy"


def test_in_the_fleet_the_proxy_balances_over_both_web_processes_with_passive_checks() -> None:
    proxy = FLEET_SERVICES["proxy"]
    assert mounts(proxy)["/etc/nginx/conf.d/default.conf"] == "./deploy/nginx.conf"
    web = {name: s for name, s in FLEET_APP.items() if s["command"] == ["web"]}
    assert len(web) == 2
    block = nginx_block("upstream mcp_platform")
    servers = re.findall(r"^\s*server\s+(\S+?):(\d+)(.*);", block, re.M)
    assert sorted((host, port) for host, port, _ in servers) == sorted(
        (name, service["environment"]["PORT"]) for name, service in web.items()
    )
    # Open-source nginx has no active checks (`health_check` is NGINX Plus): a process is taken out for
    # fail_timeout after a refused or timed-out attempt, and the request goes to the other one.
    assert all("max_fails=" in options and "fail_timeout=" in options for _, _, options in servers)
    assert "error" in directives(nginx_block("server"))["proxy_next_upstream"].split()
    # No sticky sessions: any process serves any session.
    statements = re.sub(r"#.*", "", block).split(";")
    assert not {"hash", "ip_hash", "sticky"} & {words.split()[0] for words in statements if words.strip()}
    needs = {dep: c["condition"] for dep, c in proxy["depends_on"].items()}
    assert needs == dict.fromkeys(web, "service_healthy")


def test_in_the_fleet_every_variable_is_documented_and_equal_on_every_process() -> None:
    must_be_equal = ["SECRET_KEY", "DATABASE_URL", "DATABASE_ROLE", "DATABASE_POOLING", "REDIS_URL"]
    for name, service in FLEET_APP.items():
        for variable in service["environment"]:
            assert f"`{variable}`" in OPERATIONS, f"{name}: {variable} is not in docs/operations.md"
    for variable in must_be_equal:
        assert len({json.dumps(s["environment"].get(variable)) for s in FLEET_APP.values()}) == 1, variable


def test_the_fleet_publishes_nothing_beyond_compose_yaml_and_only_on_loopback() -> None:
    # The sentinels, the replica and PgBouncer are reached on the compose network only.
    published = {name: service["ports"] for name, service in FLEET_SERVICES.items() if "ports" in service}
    assert published == {name: service["ports"] for name, service in SERVICES.items() if "ports" in service}
    assert all(port.startswith("127.0.0.1:") for ports in published.values() for port in ports)
