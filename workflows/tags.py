"""Tags of an execution (issue 31 §4): the one home of their rules, for the API, the UI, the
``sb_run`` command and the searches alike.

A start may carry up to ``MAX_TAGS`` string pairs; a key is 1-64 of ``a-z 0-9 _ . -``, a value
a string of at most ``MAX_VALUE`` characters (storable: no NUL). Every descendant — spawned
children and chained executions — inherits them. A search term is ``key:value`` (split at the
first colon); all terms of a search must match.
"""

from __future__ import annotations

import json
import re
from typing import Any

from workflows.errors import Invalid

MAX_TAGS = 20
MAX_VALUE = 256
MAX_TERMS = MAX_TAGS  # a search of more terms than a start may carry matches nothing anyway
KEY = re.compile(r"[a-z0-9_.-]{1,64}")
KEY_RULE = "a tag key is 1-64 of a-z, 0-9, '_', '.' and '-'"


def _value_problem(value: Any) -> str | None:
    if not isinstance(value, str):
        return "a tag value is a string"
    if len(value) > MAX_VALUE:
        return f"a tag value is at most {MAX_VALUE} characters (this one has {len(value)})"
    if "\x00" in value or any(0xD800 <= ord(c) <= 0xDFFF for c in value):
        return "a tag value may not contain a NUL character or a lone surrogate"
    return None


def check(tags: Any, *, field: str = "tags") -> dict[str, str]:
    """``tags`` checked: a dict of string pairs within the limits. Raises ``Invalid`` naming
    each bad field (``tags``, ``tags.<key>``) otherwise; ``None`` is no tags (``{}``)."""
    if tags is None:
        return {}
    if not isinstance(tags, dict):
        raise Invalid(f"{field} must be an object of string pairs", errors=[{"field": field, "message": "an object"}])
    errors = []
    if len(tags) > MAX_TAGS:
        errors.append({"field": field, "message": f"at most {MAX_TAGS} tags (got {len(tags)})"})
    for key, value in tags.items():
        if not isinstance(key, str) or not KEY.fullmatch(key):
            errors.append({"field": f"{field}.{key}", "message": KEY_RULE})
            continue
        problem = _value_problem(value)
        if problem:
            errors.append({"field": f"{field}.{key}", "message": problem})
    if errors:
        raise Invalid(f"invalid {field}: {errors[0]['field']}: {errors[0]['message']}", errors=errors)
    return dict(tags)


def encode(tags: dict[str, str]) -> str | None:
    """Checked tags as the JSON text the execution row stores; None for none."""
    return json.dumps(tags, sort_keys=True, ensure_ascii=False) if tags else None


def parse_term(term: str, *, field: str = "tag") -> tuple[str, str]:
    """``key:value`` (split at the first colon) as a pair; raises ``Invalid`` naming ``field``."""
    key, colon, value = term.partition(":")
    if not colon:
        raise Invalid(f"{field} '{term[:80]}' is not key:value",
                      errors=[{"field": field, "message": "key:value, e.g. customer:acme"}])
    if not KEY.fullmatch(key):
        raise Invalid(f"{field} '{term[:80]}': {KEY_RULE}", errors=[{"field": field, "message": KEY_RULE}])
    problem = _value_problem(value)
    if problem:
        raise Invalid(f"{field} '{term[:80]}': {problem}", errors=[{"field": field, "message": problem}])
    return key, value


def search(terms: list[str], *, field: str = "tag") -> list[dict[str, str]]:
    """Search terms as containments, every one of which must hold: one object of all the
    pairs, or — when a key is given two values, which no execution can have — one per pair
    (so such a search matches nothing, as it should). ``[]``: no tag filter."""
    if len(terms) > MAX_TERMS:
        raise Invalid(f"at most {MAX_TERMS} {field} terms",
                      errors=[{"field": field, "message": f"at most {MAX_TERMS}"}])
    pairs = list(dict.fromkeys(parse_term(term, field=field) for term in terms))
    merged = dict(pairs)
    return [merged] if len(merged) == len(pairs) and merged else [dict([pair]) for pair in pairs]


def from_pairs(pairs: list[str], *, field: str = "tag") -> dict[str, str]:
    """``k=v`` pairs (a command line's ``--tag k=v``) as tags, checked."""
    tags: dict[str, str] = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals:
            raise Invalid(f"{field} '{pair[:80]}' is not key=value", errors=[{"field": field, "message": "key=value"}])
        tags[key] = value
    return check(tags, field="tags")
