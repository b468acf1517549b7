"""The API parser's walk over a JSON body (issue 15, finding 5): it reports every value
``jsonb`` cannot store with its JSON path, and costs no allocation per element — a path
string is built only for a value it reports."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from executions.core.storable import MAX_DEPTH, unstorable


def test_problems_are_reported_with_their_paths_in_document_order() -> None:
    data = {"a": [1, "ok", "bad\x00"], "b c": {"\ud800": 1.5, "n": float("inf")}, "z": "\udfff"}
    assert list(unstorable(data)) == [
        ("$.a[2]", "strings cannot contain NUL characters or unpaired surrogates"),
        ('$["b c"]["\\ud800"]', "keys cannot contain NUL characters or unpaired surrogates"),
        ('$["b c"].n', "number out of range"),
        ("$.z", "strings cannot contain NUL characters or unpaired surrogates"),
    ]


def test_a_bad_root_and_a_clean_document() -> None:
    assert list(unstorable("\x00")) == [("$", "strings cannot contain NUL characters or unpaired surrogates")]
    assert list(unstorable({"input": [{"a": [1, 2.5, None, True]}]})) == []


def test_nesting_deeper_than_the_limit_is_reported_once_where_it_starts() -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = [deep]
    assert list(unstorable(deep)) == [("$" + "[0]" * (MAX_DEPTH + 1), f"nested more than {MAX_DEPTH} levels deep")]
    exactly: Any = 1
    for _ in range(MAX_DEPTH):
        exactly = {"k": exactly}
    assert list(unstorable(exactly)) == []


def test_walking_a_large_body_allocates_nothing_per_element() -> None:
    data = json.loads(json.dumps({"input": [{"v": index} for index in range(50_000)]}))
    tracemalloc.start()
    try:
        assert list(unstorable(data)) == []
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024, peak  # a per-element path string or list would be tens of megabytes
