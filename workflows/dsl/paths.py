"""Paths and templates over the execution context.

A *path* addresses a value in the execution context: ``$.input.order.lines[0]``,
``$.steps.fetch.output.entries``, and inside a SPAWNER's ``itemInput`` also ``$.item``,
``$.items`` (the child's items: a list of one unless ``itemsPerChild`` is set), ``$.index``
(the child's position) and ``$.firstItem`` (its first item's position in the list).
Segments are ``.name`` (letters, digits, ``_``, ``-``) or ``[n]`` (a list index).

A *template* is any JSON value in which every string that is a path (``"$"`` or starts with
``"$."``) is replaced by the value it addresses. A string starting with ``"$$"`` stands for
the literal string with one ``$`` removed.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

ROOTS_ALWAYS = ("input", "steps")
ROOTS_ITEM = ("item", "index", "items", "firstItem")
ROOTS_CALLBACK = ("callback",)  # an HTTP vertex with waitForCallback: $.callback.url, $.callback.token
CALLBACK_FIELDS = ("url", "token")
NUMBER_ROOTS = ("index", "firstItem")

_SEGMENT = re.compile(r"\.([A-Za-z_][A-Za-z0-9_-]*)|\[(\d+)\]")
_PLACEHOLDER = re.compile(r"\{(\$[^{}]*)\}")


class PathSyntaxError(ValueError):
    pass


class PathNotFound(LookupError):
    """The context has no value at this path (a missing key or an index out of range)."""

    def __init__(self, path: str, at: str) -> None:
        super().__init__(f"path {path}: nothing at {at}")
        self.path = path


@dataclass(frozen=True)
class Path:
    text: str
    segments: tuple[str | int, ...]

    @property
    def root(self) -> str | None:
        return self.segments[0] if self.segments and isinstance(self.segments[0], str) else None

    def step_reference(self) -> str | None:
        """The vertex id of ``$.steps.<id>.output…``, or None for other roots."""
        if self.root == "steps" and len(self.segments) >= 2 and isinstance(self.segments[1], str):
            return self.segments[1]
        return None


def parse_path(text: str) -> Path:
    if not isinstance(text, str) or not text.startswith("$"):
        raise PathSyntaxError("a path starts with '$'")
    return _parse(text)


# Paths are few (those of the published documents) and evaluated for every step that reads one
# (an HTTP body, an itemInput, a CHOICE): parse each once. A refusal raises, so it is not kept.
@functools.lru_cache(maxsize=4096)
def _parse(text: str) -> Path:
    position, segments = 1, []
    while position < len(text):
        match = _SEGMENT.match(text, position)
        if not match:
            raise PathSyntaxError(f"unexpected {text[position:]!r} at offset {position}")
        name, index = match.groups()
        segments.append(name if name is not None else int(index))
        position = match.end()
    return Path(text, tuple(segments))


def check_path(text: str, *, allow_item: bool = False, allow_callback: bool = False) -> Path:
    """Parse a path and check its root; raises PathSyntaxError with a readable reason."""
    path = parse_path(text)
    roots = ROOTS_ALWAYS + (ROOTS_ITEM if allow_item else ()) + (ROOTS_CALLBACK if allow_callback else ())
    if path.root == "callback" and allow_callback and (len(path.segments) != 2
                                                        or path.segments[1] not in CALLBACK_FIELDS):
        raise PathSyntaxError("the way back is $.callback.url or $.callback.token")
    if path.root not in roots:
        expected = ", ".join(f"$.{root}" for root in roots)
        raise PathSyntaxError(f"a path must start with one of {expected}")
    if path.root == "steps" and (
        len(path.segments) < 3 or path.segments[2] != "output" or not isinstance(path.segments[1], str)
    ):
        raise PathSyntaxError("a step path has the form $.steps.<vertex>.output…")
    if path.root in NUMBER_ROOTS and len(path.segments) > 1:
        raise PathSyntaxError(f"$.{path.root} is a number and has no parts")
    return path


def is_path_string(value: object) -> bool:
    return isinstance(value, str) and (value == "$" or value.startswith(("$.", "$[")))


def template_paths(template: Any) -> Iterator[tuple[str, str]]:
    """Yield ``(json_path_suffix, path_text)`` for every path inside a template."""
    if is_path_string(template):
        yield "", template
    elif isinstance(template, dict):
        for key, value in template.items():
            for suffix, text in template_paths(value):
                yield f"{json_key(key)}{suffix}", text
    elif isinstance(template, list):
        for index, value in enumerate(template):
            for suffix, text in template_paths(value):
                yield f"[{index}]{suffix}", text


def placeholder_paths(text: str) -> list[str]:
    """Paths in ``{…}`` placeholders of a string such as an HTTP path."""
    return _PLACEHOLDER.findall(text)


def json_key(key: str) -> str:
    """One JSON-path step for an object key: ``.name`` or ``["odd name"]``."""
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f".{key}"
    return f"[{_json_text(key)}]"


# --- evaluation ---------------------------------------------------------------------------

def resolve(path: Path | str, context: dict[str, Any]) -> Any:
    """The value at ``path`` in ``context``; raises PathNotFound when there is none."""
    if isinstance(path, str):
        path = parse_path(path)
    value: Any = context
    walked = "$"
    for segment in path.segments:
        if isinstance(segment, int):
            walked += f"[{segment}]"
            if not isinstance(value, list) or segment >= len(value):
                raise PathNotFound(path.text, walked)
            value = value[segment]
        else:
            walked += f".{segment}"
            if not isinstance(value, dict) or segment not in value:
                raise PathNotFound(path.text, walked)
            value = value[segment]
    return value


def render(template: Any, context: dict[str, Any], lookup: Callable[[str], Any] | None = None) -> Any:
    """Replace every path string in ``template`` by its value in ``context`` (or by
    ``lookup(path_text)`` when given)."""
    if isinstance(template, str):
        if is_path_string(template):
            return lookup(template) if lookup else resolve(template, context)
        if template.startswith("$$"):
            return template[1:]
        return template
    if isinstance(template, dict):
        return {key: render(value, context, lookup) for key, value in template.items()}
    if isinstance(template, list):
        return [render(value, context, lookup) for value in template]
    return template


def render_placeholders(text: str, context: dict[str, Any]) -> str:
    """Substitute ``{$.path}`` placeholders in a string (e.g. an HTTP path)."""
    if "{" not in text:
        return text  # most paths have none (and this runs for every HTTP call)
    from urllib.parse import quote

    def substitute(match: re.Match[str]) -> str:
        value = resolve(match.group(1), context)
        return quote(value if isinstance(value, str) else _json_text(value), safe="")

    return _PLACEHOLDER.sub(substitute, text)


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
