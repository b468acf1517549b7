"""Helpers shared by vertex modules."""

from __future__ import annotations

from typing import Any

from workflows.dsl.paths import parse_path, placeholder_paths, template_paths


def needs_of(*templates: Any, strings: tuple[str, ...] = ()) -> set[str]:
    """Payload names read by templates (and by ``{$…}`` placeholders in ``strings``)."""
    texts = [text for template in templates for _, text in template_paths(template)]
    texts += [text for string in strings for text in placeholder_paths(string)]
    names = set()
    for text in texts:
        path = parse_path(text)
        if path.root == "input":
            names.add("input")
        elif path.step_reference():
            names.add(str(path.step_reference()))
    return names
