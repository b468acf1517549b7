"""The one error type of the DSL package."""

from __future__ import annotations


class DslError(ValueError):
    """A document is not a valid workflow. ``errors`` lists every problem found as
    ``(json_path, message)`` pairs, in document order."""

    def __init__(self, errors: list[tuple[str, str]]) -> None:
        self.errors = list(errors)
        super().__init__("; ".join(f"{path}: {message}" for path, message in self.errors))

    def as_list(self) -> list[dict[str, str]]:
        return [{"path": path, "message": message} for path, message in self.errors]
