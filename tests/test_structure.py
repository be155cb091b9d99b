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
PROJECT = ("mcp_app", "tenants", "audit", "mcpsite", "lib")

# What each package MAY import of the project (and whether it may use `django.http`), bottom to top:
# the table "Packages, bottom to top" of docs/architecture.md, row for row (a test below holds the two
# together). A package names only packages on earlier lines, so the order is kept by construction; within
# a package anything goes. A name is a folder of mcp_app/ (models/ is one, or apps.py), or a top-level
# package; `mcp_app/__init__.py` is Django's empty app package, no room of its own.
HTTP = "django.http"
ALLOWED: dict[str, tuple[str, ...]] = {
    # The bottom: the nesting limit of every JSON and YAML read, the admins' shared form fields.
    "lib": (HTTP,),
    "tenants": ("lib", HTTP),
    "audit": ("tenants", HTTP),
    "core": (),
    "infra": ("lib",),
    "federation": ("core",),
    "content": ("core", "infra", "tenants"),
    "handlers": ("core", "infra", "federation", "content", "lib", "tenants", HTTP),
    "definitions": ("core", "content", "handlers", "lib"),
    "governance": ("core",),
    "models": ("core", "handlers", "definitions", "governance", "tenants"),
    "connected_accounts": ("core", "infra", "federation", "handlers", "models", "tenants", "audit", HTTP),
    "history": ("models", "tenants"),
    "catalog": ("core", "infra", "federation", "content", "handlers", "models", "tenants"),
    "usage": ("infra", "federation", "governance", "models", "tenants", HTTP),
    "upstreams": ("infra", "federation", "handlers", "models", "history", "catalog", "tenants"),
    "oauth": ("core", "infra", "federation", "handlers", "models", "lib", "tenants", "audit", HTTP),
    "background": ("core", "infra", "governance", "handlers", "models", "catalog", "usage", "tenants"),
    "protocol": (
        "core", "infra", "federation", "content", "handlers", "governance", "models", "catalog", "background", "lib",
    ),  # fmt: skip
    "streams": ("core", "infra", "models", "usage", "protocol"),
    "connect": ("core", "catalog", "protocol", "tenants", HTTP),
    # The MCP Registry both ways (AMB-372, AMB-373): served over the tenants, read through the SSRF guard.
    "registry": ("core", "handlers", "models", "oauth", "lib", "tenants", HTTP),
    "drafts": ("core", "models", "history", "catalog", "protocol", "tenants", "audit"),
    "operations": (
        "infra",
        "federation",
        "models",
        "usage",
        "oauth",
        "background",
        "protocol",
        "tenants",
        HTTP,
    ),
    "signals": ("infra", "handlers", "models", "catalog", "oauth", "tenants", "audit"),
    "transport": (
        "core",
        "infra",
        "governance",
        "federation",
        "catalog",
        "usage",
        "upstreams",
        "oauth",
        "protocol",
        "streams",
        "lib",
        "tenants",
        HTTP,
    ),
    "selfcheck": (
        "core",
        "federation",
        "content",
        "definitions",
        "models",
        "catalog",
        "upstreams",
        "protocol",
        "connect",
        "tenants",
    ),
    "portability": (
        "core",
        "content",
        "handlers",
        "definitions",
        "models",
        "oauth",
        "drafts",
        "lib",
        "tenants",
    ),
    "demo": ("core", "handlers", "portability", "lib", "tenants", HTTP),
    # admin and api are siblings: neither imports the other.
    "admin": (
        "core",
        "infra",
        "federation",
        "handlers",
        "connected_accounts",
        "definitions",
        "models",
        "history",
        "catalog",
        "usage",
        "upstreams",
        "oauth",
        "background",
        "protocol",
        "streams",
        "drafts",
        "selfcheck",
        "portability",
        "registry",
        "lib",
        "tenants",
        "audit",
        HTTP,
    ),
    "api": (
        "federation",
        "handlers",
        "models",
        "history",
        "catalog",
        "upstreams",
        "oauth",
        "protocol",
        "drafts",
        "selfcheck",
        "portability",
        "registry",
        "lib",
        "tenants",
        "audit",
        HTTP,
    ),
    "templatetags": ("admin", "tenants"),
    "management": (
        "federation",
        "handlers",
        "models",
        "upstreams",
        "oauth",
        "drafts",
        "selfcheck",
        "portability",
        "demo",
        "api",
        "tenants",
    ),
    "apps": ("handlers", "connected_accounts", "oauth", "signals"),
}
# The top wires the rest together (settings, URLs, ASGI, Celery, pages): it may import every package.
TOP = "mcpsite"


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


def room(module: str) -> str | None:
    """A module's line in ALLOWED: its folder of mcp_app/ (models, apps), else its top-level package."""
    parts = module.split(".")
    if parts[0] != "mcp_app":
        return parts[0]
    return parts[1] if len(parts) > 1 else None


def test_each_package_imports_only_what_its_line_allows() -> None:
    broken = []
    for importer, target, line, _top in imports():
        here = room(importer)
        there = HTTP if target.startswith(HTTP) else room(target)
        if here in (None, TOP, there):
            continue
        if there not in ALLOWED.get(here, ()):
            broken.append(
                f"{MODULES[importer].relative_to(ROOT)}:{line} imports {target} ({here} -> {there})"
            )
    assert not broken, "not in ALLOWED (and the package's line of docs/architecture.md):\n" + "\n".join(
        broken
    )


def test_every_package_has_a_line_naming_only_packages_below_it() -> None:
    rooms = {room(m) for m in MODULES} - {None, TOP}
    assert sorted(rooms - ALLOWED.keys()) == [], "packages without a line in ALLOWED"
    assert sorted(ALLOWED.keys() - rooms) == [], "lines in ALLOWED for packages that are gone"
    below: set[str] = {HTTP}
    upward = []
    for package, allowed in ALLOWED.items():
        upward += [f"{package} -> {name}" for name in allowed if name not in below]
        below.add(package)
    assert not upward, "a package may name only those on earlier lines of ALLOWED:\n" + "\n".join(upward)


def architecture_rows() -> list[tuple[str, tuple[str, ...]]]:
    """The table "Packages, bottom to top" of docs/architecture.md: (package, what it may import)."""
    text = (ROOT / "docs" / "architecture.md").read_text().split("## Packages, bottom to top", 1)[1]
    rows = []
    for line in text.split("\n## ", 1)[0].splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`"):
            continue
        package = Path(cells[0].strip("`/")).stem
        names = tuple(n.strip(" `") for n in cells[2].split(",") if n.strip(" `") not in ("", "nothing"))
        rows.append((package, names))
    return rows


def test_the_architecture_document_has_the_same_order_and_imports() -> None:
    documented = [(package, sorted(names)) for package, names in architecture_rows()]
    expected = [(package, sorted(names)) for package, names in ALLOWED.items()] + [(TOP, ["everything"])]
    assert documented == expected


# Django's conventional modules; everything else lives in a package named for what it is.
ROOT_MODULES = {"__init__.py", "apps.py"}


def test_the_app_root_holds_only_djangos_conventional_modules() -> None:
    loose = sorted(p.name for p in (ROOT / "mcp_app").glob("*.py") if p.name not in ROOT_MODULES)
    assert not loose, f"modules at the mcp_app/ root that belong in a package: {loose}"


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
