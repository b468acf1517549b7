"""Parsing of UI input (query strings and form posts) with precise messages; a form that
does not validate becomes a 400 answer naming the field, never a 500."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any, cast

from django import forms
from django.utils import timezone

from executions.models import ExecutionStatus
from executions.selectors import children, executions

STATUSES = [s.value for s in ExecutionStatus]
CHILD_STATUSES = STATUSES
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_PAGE = 100_000
# PostgreSQL's integer column; a larger limit would fail in the database instead of here.
MAX_LIMIT = 2_147_483_647


def _choice_error(what: str, values: list[str]) -> dict[str, str]:
    return {"invalid_choice": f"'%(value)s' is not {what}; use one of: {', '.join(values)}."}


class ExecutionFilters(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "any status"), *[(s, s) for s in STATUSES]],
                               error_messages=_choice_error("a status", STATUSES))
    workflow = forms.ChoiceField(required=False)
    scope = forms.ChoiceField(required=False, choices=[("top", "top-level only"), ("all", "all, children too")],
                              error_messages=_choice_error("a scope", ["top", "all"]))
    range = forms.ChoiceField(required=False, choices=[("", "any time"), *[(r, f"last {r}") for r in RANGES]],
                              error_messages=_choice_error("a time range", list(RANGES)))
    since = forms.DateTimeField(required=False, error_messages={"invalid": "'since' must be a date and time, "
                                                                           "e.g. 2026-01-31T09:30."})
    until = forms.DateTimeField(required=False, error_messages={"invalid": "'until' must be a date and time, "
                                                                           "e.g. 2026-01-31T18:00."})
    q = forms.CharField(required=False, max_length=255, strip=True)
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def __init__(self, data: Any, *, workflow_keys: list[str]) -> None:
        super().__init__(data)
        field = cast(forms.ChoiceField, self.fields["workflow"])
        field.choices = [("", "any workflow"), *[(key, key) for key in workflow_keys]]
        field.error_messages["invalid_choice"] = "there is no workflow '%(value)s' in this workspace."

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since = data.get("since")
        if data.get("range") and not since:
            data["since"] = timezone.now() - RANGES[data["range"]]
        if data.get("since") and data.get("until") and data["since"] >= data["until"]:
            raise forms.ValidationError("'since' must be before 'until'.")
        return data

    def filters(self) -> executions.ListFilters:
        data = self.cleaned_data
        return executions.ListFilters(
            status=data.get("status") or "", workflow=data.get("workflow") or "",
            top_level_only=(data.get("scope") or "top") == "top", since=data.get("since"), until=data.get("until"),
            search=data.get("q") or "", page=data.get("page") or 1,
        )

    def search_id(self) -> uuid.UUID | None:
        """The search text as an execution id, when it is one."""
        try:
            return uuid.UUID(self.cleaned_data.get("q") or "")
        except ValueError:
            return None


class ChildrenFilters(forms.Form):
    status = forms.ChoiceField(required=False, choices=[("", "all"), *[(s, s) for s in CHILD_STATUSES]],
                               error_messages=_choice_error("a child status", CHILD_STATUSES))
    sort = forms.ChoiceField(required=False, choices=[(s, s) for s in children.SORTS],
                             error_messages=_choice_error("a sort order", list(children.SORTS)))
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)

    def values(self) -> tuple[str, str, int]:
        data = self.cleaned_data
        return data.get("status") or "", data.get("sort") or "index", data.get("page") or 1


class LimitField(forms.Field):
    """A concurrency limit: a non-negative whole number, or empty for unlimited."""

    default_error_messages = {
        "invalid_limit": "Enter a whole number of concurrent calls (0 or more), or leave it empty for unlimited.",
        "too_large": f"A limit is at most {MAX_LIMIT:,}; leave it empty for unlimited.",
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(required=False, **kwargs)

    def to_python(self, value: Any) -> int | None:
        text = str(value if value is not None else "").strip()
        if text == "":
            return None
        if len(text) > 20 or not text.isascii() or not text.isdigit():
            raise forms.ValidationError(self.error_messages["invalid_limit"], code="invalid_limit")
        number = int(text)
        if number > MAX_LIMIT:
            raise forms.ValidationError(self.error_messages["too_large"], code="too_large")
        return number


class LimitForm(forms.Form):
    concurrency_limit = LimitField()


class DestinationForm(forms.Form):
    name = forms.CharField(max_length=100, strip=True)
    base_url = forms.CharField(max_length=500, strip=True, label="Base URL")
    timeout_seconds = forms.FloatField(initial=10.0, label="Timeout (s)",
                                       error_messages={"invalid": "Enter a number of seconds, e.g. 10."})
    concurrency_limit = LimitField(label="Concurrency limit")


def describe(form: forms.Form) -> str:
    """Every error of a form in one line: ``status: 'X' is not a status; …``."""
    parts: list[str] = []
    for field, errors in form.errors.items():
        label = "" if field == "__all__" else f"{field}: "
        parts.extend(f"{label}{error}" for error in errors)
    return " ".join(parts)


def field_errors(form: forms.Form) -> list[dict[str, str]]:
    return [{"field": field, "message": str(error)} for field, errors in form.errors.items() for error in errors]
