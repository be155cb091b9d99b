"""The docs a newcomer reads: a short README, links that resolve, and every cited requirement id defined."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ID = re.compile(r"\b[A-Z]{2,4}-\d{1,3}\b")
# Words of the same shape that are not requirement ids.
NOT_IDS = {"SHA-256", "UTF-8", "ISO-8601"}
CITING = ("mcp_app", "tenants", "mcpsite", "lib", "tests", "bench", "templates", "docs")


def cited_ids() -> dict[str, list[str]]:
    """Every id cited in code, tests, templates and docs (the checklist itself aside), with where."""
    files = [p for top in CITING for p in (ROOT / top).rglob("*") if p.suffix in {".py", ".html", ".md"}]
    found: dict[str, list[str]] = {}
    for path in [*files, ROOT / "README.md"]:
        if path.name == "spec-checklist.md":
            continue
        for number, line in enumerate(path.read_text().splitlines(), 1):
            for match in ID.finditer(line):
                if match.group(0) not in NOT_IDS:
                    found.setdefault(match.group(0), []).append(f"{path.relative_to(ROOT)}:{number}")
    return found


def defined(text: str, requirement: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(requirement)}(?![\w-])", text) is not None


def test_the_readme_is_at_most_10_kb():
    assert len((ROOT / "README.md").read_bytes()) <= 10 * 1024


def test_the_architecture_is_at_most_12_kb():
    # One line per package; the detail is in docs/decisions/packages.md (AMB-324).
    assert len((ROOT / "docs" / "architecture.md").read_bytes()) <= 12 * 1024


def test_every_docs_link_of_the_readme_and_the_docs_resolves():
    broken = []
    for page in [ROOT / "README.md", *(ROOT / "docs").rglob("*.md")]:
        for target in re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", page.read_text()):
            if "://" in target:
                continue
            if not (page.parent / target).exists():
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert not broken, "\n".join(broken)


def test_every_cited_requirement_id_is_in_the_checklist_or_a_decision():
    checklist = (ROOT / "docs" / "spec-checklist.md").read_text()
    decisions = "\n".join(p.read_text() for p in (ROOT / "docs" / "decisions").glob("*.md"))
    unresolved = {
        requirement: places
        for requirement, places in cited_ids().items()
        if not defined(decisions if requirement.startswith("AMB-") else checklist, requirement)
    }
    assert not unresolved, "\n".join(f"{k}: {', '.join(v[:3])}" for k, v in sorted(unresolved.items()))
