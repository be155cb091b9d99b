"""The Daphne monkeypatches (mcp_app/transport/daphne_tuning.py) are pinned to the Daphne they were written
against (AMB-330): its version, and the source of every function they wrap or mirror, hashed.

An upgrade that changes one of those functions fails here, naming it: read the new source, check the patch
still does what it says, then record the new version and hash in daphne_tuning. The source is read from the
installed files with `ast`, not imported: importing daphne.server installs Twisted's reactor in this process.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import inspect
from pathlib import Path

import pytest
from twisted.web import http

from mcp_app.transport import daphne_tuning


def _source(module: str, qualname: str) -> str:
    """The text of `Class.method`'s def in `module`'s installed file."""
    spec = importlib.util.find_spec(module)
    assert spec is not None and spec.origin is not None, module
    text = Path(spec.origin).read_text(encoding="utf-8")
    class_name, name = qualname.split(".")
    for node in ast.parse(text).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name == name:
                    segment = ast.get_source_segment(text, item)
                    assert segment is not None
                    return segment
    raise AssertionError(f"{module}.{qualname} is gone")


def test_daphne_is_the_pinned_version() -> None:
    assert importlib.metadata.version("daphne") == daphne_tuning.DAPHNE_VERSION, (
        "Daphne was upgraded: check each patch in mcp_app/transport/daphne_tuning.py against the new source, "
        "then update DAPHNE_VERSION and PATCHED_SOURCES (and pyproject.toml's pin)."
    )


@pytest.mark.parametrize("target", sorted(daphne_tuning.PATCHED_SOURCES))
def test_patched_function_is_unchanged(target: str) -> None:
    module, qualname = target.split(":")
    digest = hashlib.sha256(_source(module, qualname).encode()).hexdigest()
    assert digest == daphne_tuning.PATCHED_SOURCES[target], (
        f"{module}.{qualname} changed: check the patch in daphne_tuning.py that relies on it, then record "
        f"its new hash {digest}."
    )


def test_what_the_patches_rely_on_is_there() -> None:
    # disable_form_parsing passes Twisted's own switch through Daphne's WebRequest.
    assert "parsePOSTFormSubmission" in inspect.signature(http.Request.__init__).parameters
    # watch_upstreams_when_serving schedules on the loop daphne.server makes at import.
    spec = importlib.util.find_spec("daphne.server")
    assert spec is not None and spec.origin is not None
    tree = ast.parse(Path(spec.origin).read_text(encoding="utf-8"))
    assigned = {
        t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
    }
    assert "twisted_loop" in assigned
