"""Tool search at 10,000 tools (issue 36 §1, AMB-376): how long one search takes on one core, and how
long the index of such a catalog takes to build.

    .venv/bin/python bench/tool_search.py [--tools 10000] [--queries 2000]

Prints figures; it is not a test. The catalog is made here: names of two to four words from a vocabulary
of ~600 (as federated catalogs name them: `github_list_pull_requests`), a title, a description of one to
three sentences, tags on one tool in three, an upstream on half of them. The queries are what models send:
one word, two or three words, a shortened word ("calc"), an exact name, a word no tool has; each search
asks for the best 10 among all tools (a caller who may use all) and among half of them (a caller the
decision limits). One process, one thread: the figure is one core's.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
import tracemalloc

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpsite.settings")

import django  # noqa: E402

django.setup()

from mcp_app.catalog import search  # noqa: E402
from mcp_app.core.types import Catalog, ToolDef, UpstreamRef  # noqa: E402

VERBS = [
    "get",
    "list",
    "create",
    "update",
    "delete",
    "search",
    "find",
    "fetch",
    "send",
    "read",
    "write",
    "sync",
    "run",
    "check",
    "start",
    "stop",
]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choice(letters) for _ in range(rng.randint(4, 10))) for _ in range(size)]


def catalog(count: int, seed: int = 7) -> Catalog:
    rng = random.Random(seed)
    nouns = vocabulary(rng, 600)
    prose = vocabulary(rng, 5000)
    tools = []
    names = set()
    while len(tools) < count:
        name = "_".join([rng.choice(VERBS), *rng.sample(nouns, rng.randint(1, 3))])
        if name in names:
            continue
        names.add(name)
        sentence = " ".join(rng.sample(prose, 8) + rng.sample(nouns, 2))
        upstream = None
        if rng.random() < 0.5:
            number = rng.randint(1, 20)
            upstream = UpstreamRef(
                name=f"upstream{number}", upstream_id=number, url="https://u.example/mcp", mode="live",
                transport="streamable-http", timeout_seconds=30, prefix="", remote=name,
            )  # fmt: skip
        tools.append(
            ToolDef(
                id=len(tools) + 1,
                name=name,
                title=name.replace("_", " ").title(),
                description=(sentence.capitalize() + ". ") * rng.randint(1, 3),
                input_schema={"type": "object"},
                output_schema=None,
                annotations={},
                icons=[],
                meta={"tags": rng.sample(nouns[:30], 2)} if rng.random() < 0.33 else {},
                handler="python",
                handler_config={},
                upstream=upstream,
            )
        )
    tools.sort(key=lambda t: t.name)
    return Catalog(tenant_id=1, version=1, tools=tuple(tools), tools_by_name={t.name: t for t in tools})


def queries(cat: Catalog, count: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    made = []
    for n in range(count):
        tool = rng.choice(cat.tools)
        parts = tool.name.split("_")
        kind = n % 5
        if kind == 0:
            made.append(rng.choice(parts[1:]))
        elif kind == 1:
            made.append(" ".join(rng.sample(parts, min(len(parts), rng.randint(2, 3)))))
        elif kind == 2:
            made.append(rng.choice(parts[1:])[:4])
        elif kind == 3:
            made.append(tool.name)
        else:
            made.append("nothingmatchesthis")
    return made


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2_000)
    args = parser.parse_args()
    cat = catalog(args.tools)
    started = time.perf_counter()
    index = search.build(cat)
    built = time.perf_counter() - started
    tracemalloc.start()  # a second build, traced (tracing slows it): what an index holds
    held = (search.build(cat), tracemalloc.get_traced_memory()[0])[1]
    tracemalloc.stop()
    half = frozenset(t.name for t in cat.tools[::2])
    asked = queries(cat, args.queries)
    # The most expensive query a client can send: the 16 words found in the most tools, as beginnings too.
    common = sorted(index.postings, key=lambda word: -len(index.postings[word]))[:16]
    worst = " ".join(word[:3] for word in common)
    print(f"{args.tools} tools, {len(index.vocabulary)} words indexed; index built in {built * 1000:.0f} ms, "
          f"{held / 1e6:.1f} MB")  # fmt: skip
    for label, allowed in (("a caller who may use every tool", None), ("a caller limited to half", half)):
        took = []
        for query in asked:
            started = time.perf_counter()
            index.search(query, allowed, 10)
            took.append((time.perf_counter() - started) * 1000)
        took.sort()
        p99 = took[int(len(took) * 0.99) - 1]
        started = time.perf_counter()
        index.search(worst, allowed, 50)
        slowest = (time.perf_counter() - started) * 1000
        print(
            f"search, {label}: p50 {statistics.median(took):.2f} ms, p99 {p99:.2f} ms, "
            f"max {took[-1]:.2f} ms over {len(took)} queries (goal: p99 <= 20 ms); "
            f"the worst query (16 commonest words' beginnings, 50 results) {slowest:.1f} ms"
        )
    hostile(args.tools)


def hostile(count: int) -> None:
    """A catalog made to be slow to search: 64 words of one beginning, each in 60% of the tools (just
    within a search's budget), and the query is 16 of them and their beginnings."""

    def shared(n: int) -> str:
        return " ".join(f"zzz{k:03d}" for k in range(64) if (n + 17 * k) % 10 < 6)

    tools = tuple(
        ToolDef(
            id=n,
            name=f"zzz_tool_{n:05d}",
            title="",
            description=shared(n),
            input_schema={"type": "object"},
            output_schema=None,
            annotations={},
            icons=[],
            meta={},
            handler="python",
            handler_config={},
        )  # fmt: skip
        for n in range(count)
    )
    index = search.build(Catalog(tenant_id=2, version=1, tools=tools))
    query = " ".join(["zzz", "zzz0", "zzz00", *(f"zzz{n:03d}" for n in range(13))])
    took = []
    for _ in range(20):
        started = time.perf_counter()
        index.search(query, None, 50)
        took.append((time.perf_counter() - started) * 1000)
    print(
        f"a hostile catalog ({count} tools, 64 words of one beginning in 60% of them each): the worst query {max(took):.1f} ms"
    )


if __name__ == "__main__":
    main()
