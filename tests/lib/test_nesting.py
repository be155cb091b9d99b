"""lib.nesting: the one nesting limit's scan, JSON and YAML loaders (AMB-115, AMB-116)."""

from __future__ import annotations

import json
import random
import tracemalloc

import pytest
import yaml

from lib import nesting
from lib.nesting import TooDeep, depth_exceeds, json_depth_exceeds, loads, yaml_loads


def depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(depth, value), default=0)
    return 0


# (id, text, limit, deeper than the limit?)
SCANS: list[tuple[str, str, int, bool]] = [
    ("scalar", "1", 0, False),
    ("empty array at limit 1", "[]", 1, False),
    ("empty array at limit 0", "[]", 0, True),
    ("exactly at the limit", "[" * 64 + "]" * 64, 64, False),
    ("one past the limit", "[" * 65 + "]" * 65, 64, True),
    ("objects and arrays mixed", '{"a":[{"b":[{}]}]}', 4, True),
    ("siblings do not add up", "[" + ",".join(["[[]]"] * 100) + "]", 3, False),
    ("brackets in strings are text", json.dumps(["[[[[{{{{" * 50]), 1, False),
    ("an escaped quote does not end a string", json.dumps(['"[[[' * 40]), 1, False),
    ("an escaped backslash does end it", '["\\\\", ' + "[" * 10 + "]" * 10 + "]", 10, True),
    ("an unterminated string holds the rest", '["' + "[" * 100, 2, False),
    ("unclosed opens count", "[" * 65, 64, True),
    ("closes first, then deep", "]" * 10 + "[" * 70, 64, True),
    ("a megabyte of [", "[" * 1_000_000, 64, True),
]


@pytest.mark.parametrize(("text", "limit", "deeper"), [s[1:] for s in SCANS], ids=[s[0] for s in SCANS])
def test_the_scan_finds_nesting_past_the_limit_and_only_that(text, limit, deeper):
    assert json_depth_exceeds(text, limit) is deeper


def test_the_scan_agrees_with_the_parsed_depth_of_random_json():
    rng = random.Random(115)

    def value(level: int) -> object:
        roll = rng.random()
        if level > 40 or roll < 0.3:
            return rng.choice([1, "a[{", 'q"]}', None, True, "\\"])
        if roll < 0.65:
            return [value(level + 1) for _ in range(rng.randint(0, 3))]
        return {f"k{i}[": value(level + 1) for i in range(rng.randint(0, 3))}

    for _ in range(300):
        document = value(0)
        text = json.dumps(document)
        true_depth = depth(document)
        for limit in (true_depth - 1, true_depth, true_depth + 1):
            assert json_depth_exceeds(text, limit) is (true_depth > limit), text


def test_loads_names_the_limit_refuses_nan_and_bad_bytes():
    with pytest.raises(TooDeep, match="nested deeper than 64 levels"):
        loads("[" * 100_000 + "]" * 100_000)
    assert loads("[" * 64 + "]" * 64, 64) is not None
    with pytest.raises(ValueError, match="NaN"):
        loads('{"a": NaN}')
    with pytest.raises(ValueError):
        loads(b'{"a": "\xff"}')
    assert loads(b'{"a": "\xc3\xa9"}') == {"a": "é"}


def test_a_limit_above_the_interpreters_stack_still_answers_too_deep():
    with pytest.raises(TooDeep):
        loads("[" * 50_000 + "]" * 50_000, max_depth=10**6)


def test_a_megabyte_of_open_brackets_is_refused_in_memory_bounded_by_its_size():
    text = "[" * 1_000_000
    tracemalloc.start()
    try:
        with pytest.raises(TooDeep):
            loads(text)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(text), peak


def test_depth_of_a_parsed_value_is_found_without_recursion():
    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    assert depth_exceeds(deep, 64) and not depth_exceeds({"a": [[1]]}, 3) and depth_exceeds({"a": [[1]]}, 2)
    assert not depth_exceeds("scalar", 0)


# (id, YAML text, what the refusal says; None: it reads)
YAMLS: list[tuple[str, str, str | None]] = [
    ("flow 20,000 deep", "[" * 20_000 + "]" * 20_000, "64 levels"),
    ("flow exactly 64", "[" * 64 + "]" * 64, None),
    ("block mappings 65 deep", "".join(f"{' ' * i}k:\n" for i in range(65)) + " " * 65 + "v\n", "64 levels"),
    ("block mappings 64 deep", "".join(f"{' ' * i}k:\n" for i in range(64)) + " " * 64 + "v\n", None),
    ("an alias counts where it is used", "a: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 24 + "*a" + "]" * 24, "64 levels"),
    ("an alias within the limit", "a: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 22 + "*a" + "]" * 22, None),
    ("an alias inside its own anchor", "a: &a [1, [2, *a]]\n", "inside its own anchor"),
    ("a mapping alias inside itself", "a: &a {b: *a}\n", "inside its own anchor"),
    ("aliases doubling", "a: &a [x, x]\n" + "".join(f"{n}: &{n} [*{p}, *{p}]\n" for p, n in zip("abcdefghijklmnopqrs", "bcdefghijklmnopqrst", strict=True)), "100,000"),
    ("a scalar alias is one value", "a: &a x\nb: [" + ", ".join(["*a"] * 1000) + "]", None),
]  # fmt: skip


@pytest.mark.parametrize(("text", "says"), [y[1:] for y in YAMLS], ids=[y[0] for y in YAMLS])
def test_yaml_reads_within_the_limits_and_is_refused_past_them(text, says):
    if says is None:
        assert yaml_loads(text, 64) is not None
        return
    with pytest.raises(TooDeep) as caught:
        yaml_loads(text, 64)
    assert says in str(caught.value)


def test_yaml_syntax_errors_stay_yaml_errors_and_only_safe_tags_load():
    with pytest.raises(yaml.YAMLError):
        yaml_loads("a: [1, 2\n")
    with pytest.raises(yaml.YAMLError):
        yaml_loads("!!python/object/apply:os.system ['true']\n")


def test_definitions_get_the_frame_less_than_the_limit(settings):
    settings.MCP_MAX_JSON_DEPTH = 40
    assert (nesting.limit(), nesting.definition_limit()) == (40, 40 - nesting.FRAME)
