"""What the one nesting check (AMB-115) costs before a parse: its scan against json.loads of the same text.

    .venv/bin/python bench/nesting.py [--rounds 5]

Prints figures; it is not a test. For each shape of body, the median time of `json_depth_exceeds`
(lib/nesting.py), of `json.loads` (the baseline: what every body costs anyway), and of the
token-by-token scan the transport used before (kept here, verbatim, only to be measured), as ratios
to the baseline measured in the same run. A body whose brackets are at most the limit is not
scanned at all (one `str.count` each).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.nesting import json_depth_exceeds  # noqa: E402 - after the path above

LIMIT = 64
_OLD_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]', re.DOTALL)


def old_scan(text: str, limit: int) -> bool:
    """The transport's scan before AMB-115 (mcp_app/transport/wire.py), for comparison only."""
    if text.count("[") + text.count("{") <= limit:
        return False
    depth = 0
    for match in _OLD_TOKENS.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
            if depth > limit:
                return True
        elif token in "]}":
            depth -= 1
    return False


def loads_or_none(text: str, _limit: int) -> object:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


SHAPES: dict[str, str] = {
    "a tools/call (no scan)": json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "echo", "arguments": {"m": "hi"}}}
    ),
    "2.5 MB of small objects": json.dumps([{"a": "x" * 100, "b": [1, 2, 3]}] * 20_000),
    "4 MB string of [{": json.dumps({"m": "[{" * 2_000_000}),
    "1 MB of [": "[" * 1_000_000,
    '20 KB of \\" then [': '"' + '\\"' * 10_000 + "[" * 100,
}


def median_seconds(fn: Callable[[str, int], object], text: str, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn(text, LIMIT)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    print(f"{'body':28} {'json.loads':>12} {'scan':>12} {'scan/loads':>11} {'old scan':>12} {'old/loads':>10}")
    for name, text in SHAPES.items():
        base = median_seconds(loads_or_none, text, args.rounds)
        new = median_seconds(json_depth_exceeds, text, args.rounds)
        old = median_seconds(old_scan, text, max(1, args.rounds // 5) if "\\" in name else args.rounds)
        print(
            f"{name:28} {base * 1e3:10.2f}ms {new * 1e3:10.2f}ms {new / base:10.2f}x "
            f"{old * 1e3:10.1f}ms {old / base:9.1f}x"
        )


if __name__ == "__main__":
    main()
