"""Tool search over a tenant's published catalog: words, shortened words and exact names (AMB-376).

One index per catalog version, built from the catalog this process serves, so a publish or a sync is
searchable with the first search after it (the change token that reloads the catalog drops the index).
The caller's view (the one decision, the era, MCP Apps) is applied by the caller of `search`/`browse`
as a set of allowed names: the index is the tenant's, never one caller's.

A big catalog's index is built on one thread of its own, never on the event loop, one build at a time
per process: a tenant that publishes 10,000 tools over and over costs one core's share at most.
"""

from __future__ import annotations

import asyncio
import bisect
import heapq
import math
import re
import threading
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from operator import itemgetter

from cachetools import LRUCache
from django.conf import settings

from mcp_app.core.types import Catalog, ToolDef

# Where each word of a tool counts, and how much: a model names a tool by its name first.
NAME, TITLE, TAG, UPSTREAM, DESCRIPTION = 3.0, 2.0, 2.0, 1.5, 1.0
MATCHED = 1_000_000.0  # a matched word outweighs any sum of weights: more words matched rank first
PREFIX_SHARE = 0.6  # "calc" finds "calculator", a little behind a tool that has the word itself
MIN_PREFIX = 3  # shorter beginnings match too much to rank anything
MAX_PREFIX_WORDS = 200  # the words one beginning may stand for
MAX_QUERY_WORDS = 16
# A search reads at most this many (word, tool) entries, the rarest words asked first, then their
# beginnings: a catalog made so that every word is in every tool holds the event loop ~2 ms, what an
# ordinary call costs. A word in more tools than that tells a tool from another too little to rank by.
BUDGET = 6_000
DESCRIPTION_CHARS = 2_000  # what of a description is read: a hostile one of megabytes costs no more
DESCRIPTION_WORDS = 64  # distinct words of a description indexed, first ones first (memory per tool)
MAX_TAGS = 20
INLINE_BUILD_TOOLS = 300  # smaller catalogs are indexed in the request (well under a millisecond a tool)

_PARTS = re.compile(r"[\W_]+")
_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


def words(text: str) -> list[str]:
    """The words of `text`, folded: split at anything not a letter or digit, and at camelCase humps
    ("getWeather" is "get", "weather" and "getweather")."""
    found: list[str] = []
    for part in _PARTS.split(text):
        if not part:
            continue
        found.append(part.casefold())
        if part.isascii() and not part.islower() and not part.isupper():
            humps = _CAMEL.findall(part)
            if len(humps) > 1:
                found.extend(hump.lower() for hump in humps)
    return found


def tags_of(tool: ToolDef) -> tuple[str, ...]:
    """A tool's tags: `_meta.tags`, or where FastMCP servers put them (`_meta._fastmcp.tags`)."""
    meta = tool.meta if isinstance(tool.meta, dict) else {}
    for holder in (meta, meta.get("_fastmcp"), meta.get("fastmcp")):
        tags = holder.get("tags") if isinstance(holder, dict) else None
        if isinstance(tags, list):
            return tuple(sorted({t for t in tags[:MAX_TAGS] if isinstance(t, str) and 0 < len(t) <= 64}))
    return ()


@dataclass
class Index:
    """The words of one catalog version's tools, each tool by its place in `tools` (name order)."""

    version: int
    tools: tuple[ToolDef, ...]
    postings: dict[str, dict[int, float]] = field(default_factory=dict)
    vocabulary: list[str] = field(default_factory=list)  # sorted, for a beginning's words by bisection
    by_name: dict[str, int] = field(default_factory=dict)  # casefolded name -> place
    upstreams: dict[str, list[int]] = field(default_factory=dict)
    tags: dict[str, list[int]] = field(default_factory=dict)

    def search(self, query: str, allowed: frozenset[str] | None, limit: int) -> list[ToolDef]:
        """The best `limit` tools for `query` among `allowed` (None: all): an exact name first, then
        those that match more of its words, then by weight (ties: in name order where they fall within
        the limit; always the same answer for the same catalog and query)."""
        exact = self.by_name.get(query.strip().casefold())
        asked = list(dict.fromkeys(words(query)))[:MAX_QUERY_WORDS]
        asked.sort(key=lambda word: len(self.postings.get(word, ())))  # the rarest first, within budget
        scores: dict[int, float] = {}
        budget = [BUDGET]
        for word in asked:
            matching = list(self._matching(word, budget))
            if len(matching) == 1 and matching[0][1] == 1.0:
                best = self.postings[word]  # the word alone: its weights as they are
            else:
                best = {}
                for token, share in matching:
                    for place, weight in self.postings[token].items():
                        if weight * share > best.get(place, 0.0):
                            best[place] = weight * share
            get = scores.get
            for place, weight in best.items():
                scores[place] = get(place, 0.0) + MATCHED + weight
        if allowed is not None:
            tools = self.tools
            scores = {place: score for place, score in scores.items() if tools[place].name in allowed}
        first: list[int] = []
        if exact is not None and (allowed is None or self.tools[exact].name in allowed):
            first.append(exact)
            scores.pop(exact, None)
        top = heapq.nlargest(limit, scores.items(), key=itemgetter(1))
        top.sort(key=lambda entry: (-entry[1], entry[0]))
        return [self.tools[place] for place in (first + [place for place, _ in top])[:limit]]

    def _matching(self, word: str, budget: list[int]) -> Iterable[tuple[str, float]]:
        """The indexed words `word` stands for: itself, then those it begins, while `budget` lasts."""
        if word in self.postings:
            budget[0] -= len(self.postings[word])
            if budget[0] < 0:
                return
            yield word, 1.0
        if len(word) < MIN_PREFIX:
            return
        start = bisect.bisect_right(self.vocabulary, word)
        for token in self.vocabulary[start : start + MAX_PREFIX_WORDS]:
            if not token.startswith(word):
                return
            budget[0] -= len(self.postings[token])
            if budget[0] < 0:
                return
            yield token, PREFIX_SHARE

    def group(self, upstream: str | None, tag: str | None) -> list[int]:
        """The places of one upstream's or tag's tools (both: those of both), or of every tool."""
        places: list[int] | None = None
        if upstream is not None:
            places = self.upstreams.get(upstream, [])
        if tag is not None:
            tagged = self.tags.get(tag, [])
            places = tagged if places is None else sorted(set(places) & set(tagged))
        return list(range(len(self.tools))) if places is None else places


def build(catalog: Catalog) -> Index:
    index = Index(version=catalog.version, tools=catalog.tools)
    postings: dict[str, dict[int, float]] = defaultdict(dict)

    def add(place: int, text: str, weight: float, most: int | None = None) -> None:
        for word in dict.fromkeys(words(text)) if most is None else list(dict.fromkeys(words(text)))[:most]:
            if postings[word].get(place, 0.0) < weight:
                postings[word][place] = weight

    upstreams: dict[str, list[int]] = defaultdict(list)
    tags: dict[str, list[int]] = defaultdict(list)
    for place, tool in enumerate(catalog.tools):
        index.by_name.setdefault(tool.name.casefold(), place)
        add(place, tool.description[:DESCRIPTION_CHARS], DESCRIPTION, DESCRIPTION_WORDS)
        if tool.upstream is not None:
            add(place, tool.upstream.name, UPSTREAM)
            upstreams[tool.upstream.name].append(place)
        for tag in tags_of(tool):
            add(place, tag, TAG)
            tags[tag].append(place)
        add(place, tool.title, TITLE)
        add(place, tool.name, NAME)
    # Each weight times its word's rarity (log(1 + N/df)), once here rather than in every search.
    total = len(catalog.tools)
    # One float object per (word, place weight), shared by its entries: 24 bytes less an entry.
    for posting in postings.values():
        rarity = math.log(1 + total / len(posting))
        scaled = {weight: weight * rarity for weight in set(posting.values())}
        for place, weight in posting.items():
            posting[place] = scaled[weight]
    index.postings = dict(postings)
    index.vocabulary = sorted(postings)
    index.upstreams = dict(upstreams)
    index.tags = dict(tags)
    return index


# tenant id -> its index (valid for the catalog version it names); the loop reads, the builder fills.
_indexes: LRUCache[int, Index] = LRUCache(settings.MCP_CATALOG_TENANTS)
_building: dict[tuple[int, int, int], Future[Index]] = {}
_lock = threading.RLock()  # a build done before its callback is added runs that callback under it
_builder = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tool-search")


def _built(key: tuple[int, int, int], future: Future[Index]) -> None:
    with _lock:
        _building.pop(key, None)
        if not future.cancelled() and future.exception() is None:
            _indexes[key[0]] = future.result()


async def index_of(catalog: Catalog) -> Index:
    """The search index of `catalog`, built on first use of its version."""
    with _lock:
        index = _indexes.get(catalog.tenant_id)
        # The very catalog it was built from: a catalog loaded again (evicted, or its tenant's ids reused
        # by a test) is indexed again.
        if index is not None and index.tools is catalog.tools:
            return index
        key = (catalog.tenant_id, catalog.version, id(catalog.tools))
        future = _building.get(key)
        if future is None and len(catalog.tools) <= INLINE_BUILD_TOOLS:
            index = build(catalog)
            _indexes[catalog.tenant_id] = index
            return index
        if future is None:
            future = _building[key] = _builder.submit(build, catalog)
            future.add_done_callback(lambda done: _built(key, done))
    return await asyncio.wrap_future(future)


def forget() -> None:
    """Drop every index (tests)."""
    with _lock:
        _indexes.clear()
