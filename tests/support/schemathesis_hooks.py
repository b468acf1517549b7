"""Loaded into the schemathesis command line that tests/integration/test_api_schema_live.py
runs (``SCHEMATHESIS_HOOKS``).

``ast.parse`` one thread at a time: the CPython here (3.11.7) keeps the AST constructor's
recursion depth per interpreter, not per thread, so two of schemathesis' workers parsing at
once (Hypothesis does, to describe a filter's lambda) now and then fail with "SystemError: AST
constructor recursion depth mismatch" — an error of the fuzzer, not of the API."""

from __future__ import annotations

import ast
import threading
from typing import Any

_parse = ast.parse
_one_at_a_time = threading.Lock()


def _parse_alone(*args: Any, **kwargs: Any) -> ast.AST:
    with _one_at_a_time:
        return _parse(*args, **kwargs)


ast.parse = _parse_alone  # type: ignore[assignment]  # the same signature, serialised
