"""Parsing of UI input (query strings and form posts) with precise messages; a form that
does not validate becomes a 400 answer naming the field, never a 500."""

from __future__ import annotations

import json
import re
import shlex
import uuid
from datetime import timedelta
from typing import Any, cast

from django import forms
from django.utils import timezone

from executions.api.parsers import MAX_REPORTED
from executions.core.storable import unstorable
from executions.models import ExecutionStatus
from executions.selectors import children, executions
from workflows import tags as tag_rules
from workflows.errors import Invalid

STATUSES = [s.value for s in ExecutionStatus]
CHILD_STATUSES = STATUSES
RANGES = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
MAX_PAGE = 100_000
MAX_KEYS_TEXT = 100 * 257
MAX_TAG_TEXT = 20 * (64 + 1 + 256 + 3)


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
    # Tag terms, key:value, separated by spaces ("quoted" for a value with spaces; workflows/tags.py).
    tag = forms.CharField(required=False, max_length=MAX_TAG_TEXT, strip=True,
                          error_messages={"max_length": f"at most {MAX_TAG_TEXT} characters of tags"})
    page = forms.IntegerField(required=False, min_value=1, max_value=MAX_PAGE)
    waiting = forms.ChoiceField(required=False, choices=[("", "waiting or not"), ("callback", "waiting for a callback"),
                                                         ("event", "waiting for an event"),
                                                         ("any", "waiting for a callback or an event")],
                                error_messages=_choice_error("a wait", ["callback", "event", "any"]))

    def __init__(self, data: Any, *, workflow_keys: list[str]) -> None:
        super().__init__(data)
        field = cast(forms.ChoiceField, self.fields["workflow"])
        field.choices = [("", "any workflow"), *[(key, key) for key in workflow_keys]]
        field.error_messages["invalid_choice"] = "there is no workflow '%(value)s' in this workspace."

    def clean_tag(self) -> list[dict[str, str]]:
        text = self.cleaned_data.get("tag") or ""
        try:
            return tag_rules.search(shlex.split(text))
        except ValueError as error:  # an unclosed quote
            raise forms.ValidationError(f"tags: {error} (quote a value with spaces: region:\"eu west\")") from error
        except Invalid as error:
            raise forms.ValidationError(error.message) from error

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
            search=data.get("q") or "", page=data.get("page") or 1, waiting=data.get("waiting") or "",
            tags=data.get("tag") or [],
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
    key = forms.CharField(required=False, max_length=MAX_KEYS_TEXT, strip=True,
                          error_messages={"max_length": f"at most {MAX_KEYS_TEXT} characters of item keys"})
    error = forms.CharField(required=False, max_length=500, strip=True,
                            error_messages={"max_length": "at most 500 characters of error text"})

    def values(self) -> tuple[str, str, int]:
        data = self.cleaned_data
        return data.get("status") or "", data.get("sort") or "index", data.get("page") or 1

    def clean_key(self) -> str:
        text = self.cleaned_data.get("key") or ""
        keys = text.replace(",", " ").split()
        if len(keys) > 100 or any(len(k) > 256 for k in keys):
            raise forms.ValidationError("at most 100 item keys, each at most 256 characters")
        return text

    def search_terms(self) -> tuple[str, str]:
        """(item keys, error text) of the table's search box."""
        return self.cleaned_data.get("key") or "", self.cleaned_data.get("error") or ""


_INTEGER = re.compile(r"-?[0-9]+")
_DECIMAL = re.compile(r"-?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")


def as_value(text: str) -> Any:
    """Form text as the JSON value it stands for: empty → None, ASCII digits → a number;
    anything else stays text, which executions/destinations/rules.py refuses for a number field
    with the same message the API gives for a string."""
    text = text.strip()
    if text == "":
        return None
    if _INTEGER.fullmatch(text):
        return int(text)
    if _DECIMAL.fullmatch(text):
        return float(text)
    return text


class DestinationValuesForm(forms.Form):
    """Text inputs only: every rule (and its message) is executions/destinations/rules.py's; the
    view hands ``values()`` to the service and shows the errors it raises per field."""

    numbers: tuple[str, ...] = ()

    def values(self) -> dict[str, Any]:
        """The submitted fields as JSON values; an empty field is None."""
        return {name: as_value(self.data.get(name, "")) if name in self.numbers
                else (str(self.data.get(name, "")).strip() or None) for name in self.fields}


def _text(label: str) -> forms.CharField:
    return forms.CharField(required=False, strip=True, label=label)


class LimitForm(DestinationValuesForm):
    concurrency_limit = _text("Concurrency limit")
    numbers = ("concurrency_limit",)


BREAKER_INPUTS = {"breaker_failure_ratio": "failure_ratio", "breaker_min_calls": "min_calls",
                  "breaker_window_seconds": "window_seconds", "breaker_open_seconds": "open_seconds"}
# What an empty input of the flow-control form stands for (the fields' defaults).
FLOW_DEFAULTS = {"concurrency_min": 1, "max_cooldown_seconds": 300.0, "max_throttled_waits": 100}


class FlowForm(DestinationValuesForm):
    """A destination's flow-control settings (issue 29): the API's fields, typed as text.
    The breaker is a switch and its four numbers, which become the API's ``breaker`` object
    (an empty number takes the rule's default); the service checks everything."""

    concurrency_mode = _text("Mode")
    concurrency_min = _text("Floor")
    max_cooldown_seconds = _text("Longest cooldown (s)")
    max_throttled_waits = _text("Throttled waits")
    # Where the service's "breaker" errors are shown; the inputs are the breaker_* below.
    breaker = _text("Circuit breaker")
    breaker_on = _text("Circuit breaker on")
    breaker_failure_ratio = _text("Failure ratio")
    breaker_min_calls = _text("Min calls")
    breaker_window_seconds = _text("Window (s)")
    breaker_open_seconds = _text("Open (s)")
    numbers = ("concurrency_min", "max_cooldown_seconds", "max_throttled_waits", *BREAKER_INPUTS)

    def values(self) -> dict[str, Any]:
        """The API's fields: ``concurrency_mode``, ``concurrency_min``, ``max_cooldown_seconds``,
        ``max_throttled_waits`` (empty: the default) and ``breaker`` (null when switched off)."""
        typed = super().values()
        values: dict[str, Any] = {"concurrency_mode": typed["concurrency_mode"]}
        for name, default in FLOW_DEFAULTS.items():
            values[name] = default if typed[name] is None else typed[name]
        values["breaker"] = {key: typed[name] for name, key in BREAKER_INPUTS.items() if typed[name] is not None} \
            if typed["breaker_on"] else None
        return values


CREDENTIAL_INPUTS = ("credentials_kind", "credentials_token", "credentials_username", "credentials_password",
                     "credentials_header", "credentials_value")


class DestinationForm(DestinationValuesForm):
    name = _text("Name")
    base_url = _text("Base URL")
    timeout_seconds = _text("Timeout (s)")
    concurrency_limit = _text("Concurrency limit")
    rate_per_second = _text("Rate (requests/s)")
    max_response_bytes = _text("Response cap (bytes)")
    # Where the service's "credentials" errors are shown; the inputs are the credentials_* below.
    credentials = _text("Credentials")
    credentials_kind = _text("Credentials")
    credentials_token = _text("Bearer token")
    credentials_username = _text("User name")
    credentials_password = _text("Password")
    credentials_header = _text("Header name")
    credentials_value = _text("Header value")
    numbers = ("timeout_seconds", "concurrency_limit", "rate_per_second", "max_response_bytes")

    def values(self) -> dict[str, Any]:
        """As submitted; an empty optional field is left out (its default applies), an empty
        name or URL stays in so that the service reports it as required. The credentials
        inputs become the API's ``credentials`` object, and the service checks it."""
        values = {name: value for name, value in super().values().items()
                  if name not in (*CREDENTIAL_INPUTS, "credentials") and (value is not None
                                                                           or name in ("name", "base_url"))}
        credentials = self._credentials()
        if credentials is not None:
            values["credentials"] = credentials
        return values

    def _credentials(self) -> Any:
        # Secrets are taken as typed (not stripped): a space may be part of a password.
        text = {name: str(self.data.get(name, "")) for name in CREDENTIAL_INPUTS}
        kind = text["credentials_kind"].strip()
        if kind == "":
            return None
        if kind == "bearer":
            return {"bearer": text["credentials_token"]}
        if kind == "basic":
            return {"basic": {"username": text["credentials_username"], "password": text["credentials_password"]}}
        if kind == "headers":
            return {"headers": {text["credentials_header"].strip(): text["credentials_value"]}}
        return {kind: None}  # refused by the service, naming the accepted kinds


def show_errors(form: forms.Form, errors: list[dict[str, str]]) -> None:
    """Attach a service's per-field errors to the form that submitted the fields."""
    for item in errors:
        if item.get("field") in form.fields:
            form.add_error(item["field"], item["message"])


def describe(form: forms.Form) -> str:
    """Every error of a form in one line: ``status: 'X' is not a status; …``."""
    parts: list[str] = []
    for field, errors in form.errors.items():
        label = "" if field == "__all__" else f"{field}: "
        parts.extend(f"{label}{error}" for error in errors)
    return " ".join(parts)


def field_errors(form: forms.Form) -> list[dict[str, str]]:
    return [{"field": field, "message": str(error)} for field, errors in form.errors.items() for error in errors]


class JsonInputForm(forms.Form):
    """An execution input typed as JSON: parsed here, and every value ``jsonb`` cannot store
    reported at its JSON path (the API's own check), so the service sees only storable JSON."""

    input = forms.CharField(required=False, strip=True, max_length=8 * 1024 * 1024)
    path_errors: list[dict[str, str]]

    def clean_input(self) -> Any:
        self.path_errors = []
        text = self.cleaned_data.get("input") or "{}"
        try:
            value = json.loads(text, parse_constant=_refuse_constant)
        except RecursionError as error:
            raise forms.ValidationError("Not JSON: nested too deeply.") from error
        except ValueError as error:
            detail = f"{error.msg} at line {error.lineno}, column {error.colno}" \
                if isinstance(error, json.JSONDecodeError) else str(error)
            raise forms.ValidationError(f"Not JSON: {detail}.") from error
        self.path_errors = [{"path": path, "message": message} for path, message in unstorable(value)][:MAX_REPORTED]
        if self.path_errors:
            raise forms.ValidationError("The input has values that cannot be stored.")
        return value

    def problems(self) -> list[dict[str, str]]:
        """Errors at their JSON path where there is one, else at their field."""
        return getattr(self, "path_errors", []) or field_errors(self)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class StartForm(JsonInputForm):
    idempotency_key = forms.CharField(required=False, strip=True, max_length=255)
    # key=value pairs separated by spaces ("quoted" for a value with spaces): workflows/tags.py.
    tags = forms.CharField(required=False, strip=True, max_length=MAX_TAG_TEXT)

    def clean_tags(self) -> dict[str, str]:
        try:
            return tag_rules.from_pairs(shlex.split(self.cleaned_data.get("tags") or ""), field="tags")
        except ValueError as error:  # an unclosed quote
            raise forms.ValidationError(f"{error} (quote a value with spaces: region=\"eu west\")") from error
        except Invalid as error:
            raise forms.ValidationError(error.message) from error
    priority = forms.IntegerField(required=False, min_value=1, max_value=5)


class RetryInputForm(JsonInputForm):
    # Required: an absent input must not read as "{}" and replace the stored one.
    input = forms.CharField(required=True, strip=True, max_length=8 * 1024 * 1024,
                            error_messages={"required": "Give the edited input as JSON."})


class CompleteStepForm(JsonInputForm):
    """An operator's completion of a step waiting for a callback (an approval): SUCCEEDED
    with an optional JSON output (``input``: the text field this form shares with the start
    and retry forms), or FAILED with why."""

    status = forms.ChoiceField(choices=[("SUCCEEDED", "SUCCEEDED"), ("FAILED", "FAILED")])
    error = forms.CharField(required=False, strip=True, max_length=4000)

    def clean_input(self) -> Any:
        return None if not (self.cleaned_data.get("input") or "").strip() else super().clean_input()

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("status") == "FAILED" and not cleaned.get("error"):
            self.add_error("error", "Say why the step fails.")
        return cleaned


class FanOutEditForm(forms.Form):
    """A live edit of a running fan-out (issue 31): blank fields stay as they are;
    ``no_limit`` lifts maxConcurrency, ``no_count`` clears maxFailures."""

    max_concurrency = forms.IntegerField(required=False, min_value=1)
    no_limit = forms.BooleanField(required=False)
    max_failure_ratio = forms.FloatField(required=False, min_value=0.0, max_value=1.0)
    max_failures = forms.IntegerField(required=False, min_value=0)
    no_count = forms.BooleanField(required=False)

    def problems(self) -> list[dict[str, str]]:
        return field_errors(self)

    def fields_to_change(self) -> dict[str, Any]:
        data = self.cleaned_data
        fields: dict[str, Any] = {}
        if data.get("no_limit"):
            fields["max_concurrency"] = None
        elif data.get("max_concurrency") is not None:
            fields["max_concurrency"] = data["max_concurrency"]
        if data.get("max_failure_ratio") is not None:
            fields["max_failure_ratio"] = data["max_failure_ratio"]
        if data.get("no_count"):
            fields["max_failures"] = None
        elif data.get("max_failures") is not None:
            fields["max_failures"] = data["max_failures"]
        return fields
