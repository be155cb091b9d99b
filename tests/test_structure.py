"""The shape of the code: no cycles between modules or packages, layers kept, modules kept short.

Read from the source with `ast` (nothing is imported), so a violation fails here with the file and
line, before it turns into an import-order bug at run time. Imports inside functions are ruff's
PLC0415 (pyproject.toml), which .ci/run checks.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROJECT = ("mcp_app", "tenants", "audit", "mcpsite", "formfields")

# Which packages a package must never import from (the layering of docs/architecture.md).
FORBIDDEN = {
    "mcp_app.core": ("mcp_app", "tenants", "mcpsite", "django.http"),
    "mcp_app.infra": ("mcp_app", "tenants", "mcpsite"),
    # The client of upstream MCP servers sits beside infra: core, infra, the SDK; nothing that knows rows or wire.
    "mcp_app.federation": (
        "mcp_app.models",
        "mcp_app.definitions",
        "mcp_app.catalog",
        "mcp_app.handlers",
        "mcp_app.protocol",
        "mcp_app.transport",
        "mcp_app.streams",
        "mcp_app.background",
        "mcp_app.admin",
        "mcp_app.api",
        "mcpsite",
        "tenants",
        "django.http",
    ),
    "mcp_app.content": (
        "mcp_app.catalog",
        "mcp_app.handlers",
        "mcp_app.definitions",
        "mcp_app.protocol",
        "mcp_app.transport",
    ),
    "mcp_app.handlers": (
        "mcp_app.definitions",
        "mcp_app.background",
        "mcp_app.catalog",
        "mcp_app.protocol",
        "mcp_app.transport",
        "mcp_app.admin",
        "mcp_app.models",
        "mcp_app.upstream_rows",
        "mcp_app.upstreams",
    ),
    # A row's checks sit on the handlers (a configuration is its kind's) and under the models.
    "mcp_app.definitions": (
        "mcp_app.models",
        "mcp_app.catalog",
        "mcp_app.background",
        "mcp_app.protocol",
        "mcp_app.transport",
        "mcp_app.admin",
        "mcp_app.api",
        "mcp_app.portability",
    ),
    "mcp_app.protocol": ("mcp_app.transport", "mcp_app.admin", "mcp_app.oauth", "mcp_app.drafts", "django.http"),
    "mcp_app.background": ("mcp_app.protocol", "mcp_app.transport", "mcp_app.admin"),
    "mcp_app.catalog": ("mcp_app.protocol", "mcp_app.transport", "mcp_app.admin", "mcp_app.background"),
    "mcp_app.oauth": ("mcp_app.transport", "mcp_app.admin", "mcp_app.protocol"),
    "mcp_app.portability": (
        "mcp_app.transport",
        "mcp_app.protocol",
        "mcp_app.admin",
        "mcp_app.api",
        "django.http",
    ),
    "mcp_app.usage": ("mcp_app.transport", "mcp_app.protocol", "mcp_app.admin", "mcp_app.background"),
    # Cross-process session and stream state: the transport's consumers use it, never the other way.
    "mcp_app.streams": ("mcp_app.transport", "mcp_app.admin", "mcp_app.api", "django.http"),
    "mcp_app.history": ("mcp_app.transport", "mcp_app.protocol", "mcp_app.admin", "mcp_app.api", "mcp_app.drafts"),
    # Drafts and publishing (AMB-218): over history, under the admin, the API and portability's import;
    # a draft is tried through the protocol core (trial.py), which never reads drafts.
    "mcp_app.drafts": ("mcp_app.transport", "mcp_app.admin", "mcp_app.api", "mcp_app.portability"),
    # Upstream servers: their rows sit with the models; the service that syncs and pins them beside history.
    "mcp_app.upstream_rows": (
        "mcp_app.catalog",
        "mcp_app.handlers",
        "mcp_app.protocol",
        "mcp_app.transport",
        "mcp_app.admin",
        "mcp_app.api",
        "mcp_app.upstreams",
    ),
    "mcp_app.upstreams": ("mcp_app.transport", "mcp_app.protocol", "mcp_app.admin", "mcp_app.api"),
    # Connected accounts: the vault, its provider client and pages sit beside upstreams, under admin and api.
    "mcp_app.identity": ("mcp_app.transport", "mcp_app.protocol", "mcp_app.admin", "mcp_app.api"),
    "mcp_app.connect": ("mcp_app.transport", "mcp_app.admin", "mcp_app.api"),
    # The self-check reads the endpoint as the connect page does, beside it; the admin, API and command show it.
    "mcp_app.selfcheck": ("mcp_app.transport", "mcp_app.admin", "mcp_app.api", "django.http"),
    "mcp_app.operations": ("mcp_app.transport", "mcp_app.admin", "mcp_app.api"),
    "mcp_app.signals": ("mcp_app.transport", "mcp_app.protocol", "mcp_app.admin", "mcp_app.api"),
    "mcp_app.api": ("mcp_app.admin",),
    "mcp_app.admin": ("mcp_app.api",),
    # The audit trail sits between tenants and mcp_app: mcp_app records through audit.trail.record.
    "audit": ("mcp_app", "mcpsite"),
    "tenants": ("mcp_app", "audit", "mcpsite"),
    # The bottom: the shared form fields (tenants' and mcp_app's admins) and the nesting limit.
    "formfields": ("mcp_app", "tenants", "audit"),
    "mcpsite.nesting": ("mcp_app", "tenants", "audit", "formfields", "mcpsite"),
}

# mcpsite/ is the top (settings, URLs, ASGI, Celery, pages, middleware): nothing below it imports it,
# but for its leaf nesting.py (which imports nothing of the project) that every layer reads.
SITE_LEAVES = {"mcpsite.nesting"}


def project_files() -> list[Path]:
    files = []
    for top in PROJECT:
        files += [p for p in (ROOT / top).rglob("*.py") if "migrations" not in p.parts]
    return sorted(files)


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in project_files()}


def resolve(importer: str, node: ast.ImportFrom | ast.Import) -> list[str]:
    """The project modules an import statement loads (a `from pkg import mod` names the module)."""
    if isinstance(node, ast.Import):
        bases = [alias.name for alias in node.names]
        return [b for b in bases if b.split(".")[0] in PROJECT or b.startswith("django.http")]
    if node.level:
        is_package = MODULES.get(importer) and MODULES[importer].name == "__init__.py"
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        package = package[: len(package) - (node.level - 1)]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    if base.split(".")[0] not in PROJECT:
        return [base] if base.startswith("django.http") else []
    out = []
    for alias in node.names:
        candidate = f"{base}.{alias.name}"
        out.append(candidate if candidate in MODULES else base)
    return out


def imports() -> list[tuple[str, str, int, bool]]:
    """(importer, imported module, line, at module level) for every project import."""
    found = []
    for name, path in MODULES.items():
        tree = ast.parse(path.read_text(), str(path))
        top_level = {id(n) for n in tree.body}
        # Imports under `if TYPE_CHECKING:` at module level count as module level.
        for node in tree.body:
            if isinstance(node, ast.If):
                top_level |= {id(n) for n in ast.walk(node)}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import | ast.ImportFrom):
                for target in resolve(name, node):
                    found.append((name, target, node.lineno, id(node) in top_level))
    return found


def package_of(module: str) -> str:
    """A module's room: its sub-package of mcp_app, or itself for a module at an app's root."""
    parts = module.split(".")
    if parts[0] == "mcp_app" and len(parts) >= 3:
        return ".".join(parts[:2])
    if parts[0] == "mcp_app" and len(parts) == 2 and MODULES.get(module, Path()).name == "__init__.py":
        return module
    return module


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_two_modules_import_each_other_even_through_others() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for importer, target, _line, top in imports():
        if top and target in MODULES and target != importer:
            edges[importer].add(target)
    assert cycles(edges) == []


def test_no_two_packages_import_each_other_even_through_others() -> None:
    edges: dict[str, set[str]] = defaultdict(set)
    for importer, target, _line, _top in imports():
        if target not in MODULES:
            continue
        a, b = package_of(importer), package_of(target)
        if a != b:
            edges[a].add(b)
    assert cycles(edges) == []


def test_each_layer_imports_nothing_from_the_layers_above_it() -> None:
    broken = []
    for importer, target, line, _top in imports():
        for package, banned in FORBIDDEN.items():
            if importer == package or importer.startswith(package + "."):
                for prefix in banned:
                    if (target == prefix or target.startswith(prefix + ".")) and not (
                        target == package or target.startswith(package + ".")
                    ):
                        broken.append(f"{MODULES[importer].relative_to(ROOT)}:{line} imports {target}")
    assert not broken, "\n".join(broken)


# Django's conventional modules; everything else lives in a package named for what it is.
ROOT_MODULES = {"__init__.py", "apps.py", "models.py"}


def test_the_app_root_holds_only_djangos_conventional_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "mcp_app").glob("*.py") if p.name not in ROOT_MODULES)
    assert not loose, f"modules at the mcp_app/ root that belong in a package: {loose}"


def test_nothing_below_the_site_imports_it_but_its_nesting_limit() -> None:
    broken = [
        f"{MODULES[importer].relative_to(ROOT)}:{line} imports {target}"
        for importer, target, line, _top in imports()
        if target.split(".")[0] == "mcpsite"
        and importer.split(".")[0] != "mcpsite"
        and target not in SITE_LEAVES
    ]
    assert not broken, "\n".join(broken)


def test_no_module_is_over_about_400_lines_without_a_reason_at_its_top() -> None:
    long = []
    for path in MODULES.values():
        lines = path.read_text().splitlines()
        if len(lines) > 420 and not any("Longer than" in line for line in lines[:20]):
            long.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not long, "\n".join(long)


def test_the_cycle_finder_reports_a_loop_through_a_third_module_and_nothing_else():
    # The checks above are only as good as this: a loop a -> b -> c -> a, and d hanging off it.
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": {"c"}}) == []
