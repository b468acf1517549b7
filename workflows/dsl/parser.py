"""Parse and validate a DSL document into the typed AST, collecting *every* problem with its
JSON path (``$.vertices.fanout.items``) instead of stopping at the first."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any

from workflows.dsl import ast, conditions, quorum, waits
from workflows.dsl.errors import DslError
from workflows.dsl.paths import (
    PathSyntaxError,
    check_path,
    is_path_string,
    json_key,
    placeholder_paths,
    template_paths,
)

VERTEX_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")
WORKFLOW_KEY = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
HANDLER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)+")
DESTINATION_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")
VERSION_HASH = re.compile(r"[0-9a-f]{64}")
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
MAX_ATTEMPTS_LIMIT = 100
MAX_BACKOFF_LIMIT = 30 * 86400  # a retry wait of more than 30 days is a mistake
MAX_ITEMS_PER_CHILD = 100_000  # a child's input holds its items: beyond this, pass a path instead
MAX_CONCURRENCY_LIMIT = 1_000_000
SAFE_NUMBER = 2**53 - 1  # I-JSON (RFC 7493): beyond this, integers are not exact in JSON

COMMON = {"type", "next"}
WORK = COMMON | {"retry", "timeoutSeconds"}
ALLOWED_FIELDS = {
    "TASK": WORK | {"handler", "input", "destination"},
    "HTTP": WORK | {"destination", "method", "path", "body", "headers", "waitForCallback"},
    "SPAWNER": WORK | {"items", "workflow", "version", "itemInput", "itemsPerChild", "maxConcurrency", "itemKey"},
    "MERGE": COMMON | {"spawner", "config"},
    "TIMER": COMMON | {"seconds", "until"},
    "WAIT": COMMON | {"retry", "timeoutSeconds", "for", "heartbeatSeconds", "event", "match", "lookbackSeconds"},
    "CHOICE": {"type", "choices", "default"},
    "CHAIN": WORK | {"workflow", "input"},
    "SUCCEED": {"type", "output"},
    "FAIL": {"type", "error", "cause"},
}


class _Reader:
    """Collects errors while reading one document."""

    def __init__(self) -> None:
        self.errors: list[tuple[str, str]] = []
        # (json path, path text, vertex that reads it) for the upstream check at the end.
        self.step_refs: list[tuple[str, str, str]] = []

    def report(self, where: str, message: str) -> None:
        self.errors.append((where, message))

    # -- scalar readers; each returns the default after reporting a problem ---------------
    def string(self, obj: dict[str, Any], key: str, where: str, *, pattern: re.Pattern[str] | None = None,
               required: bool = False, default: str | None = None, what: str = "a string") -> str | None:
        if key not in obj or obj[key] is None:
            if required:
                self.report(where, f"'{key}' is required")
            return default
        value = obj[key]
        if not isinstance(value, str) or (pattern is not None and not pattern.fullmatch(value)):
            self.report(f"{where}.{key}", f"must be {what}")
            return default
        return value

    def number(self, obj: dict[str, Any], key: str, where: str, default: float | None, *,
               low: float, high: float = math.inf, low_open: bool = False) -> float | None:
        if key not in obj or obj[key] is None:
            return default
        value = obj[key]
        ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if ok and (value < low or value > high or (low_open and value == low)):
            ok = False
        if not ok:
            bound = f"greater than {_plain(low)}" if low_open else f"at least {_plain(low)}"
            limit = "" if high == math.inf else f" and at most {_plain(high)}"
            self.report(f"{where}.{key}", f"must be a number {bound}{limit}")
            return default
        return float(value)

    def integer(self, obj: dict[str, Any], key: str, where: str, default: int, *, low: int, high: int) -> int:
        if key not in obj or obj[key] is None:
            return default
        value = obj[key]
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON has one number type: 3.0 is the integer 3
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.report(f"{where}.{key}", f"must be an integer from {low} to {high}")
            return default
        return value

    def boolean(self, obj: dict[str, Any], key: str, where: str, default: bool) -> bool:
        if key not in obj or obj[key] is None:
            return default
        if not isinstance(obj[key], bool):
            self.report(f"{where}.{key}", "must be true or false")
            return default
        return bool(obj[key])

    # -- paths and templates ----------------------------------------------------------------
    def path(self, text: str, where: str, vertex_id: str, *, allow_item: bool = False,
             allow_callback: bool = False) -> None:
        try:
            parsed = check_path(text, allow_item=allow_item, allow_callback=allow_callback)
        except PathSyntaxError as error:
            self.report(where, f"invalid path {text!r}: {error}")
            return
        if parsed.step_reference():
            self.step_refs.append((where, text, vertex_id))

    def template(self, value: Any, where: str, vertex_id: str, *, allow_item: bool = False,
                 allow_callback: bool = False) -> Any:
        for suffix, text in template_paths(value):
            self.path(text, f"{where}{suffix}", vertex_id, allow_item=allow_item, allow_callback=allow_callback)
        return value


def _plain(number: float) -> str:
    """A bound as people write it: 31622400, not 3.16224e+07."""
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def parse(doc: Any) -> ast.Workflow:
    """Validate ``doc`` and return its AST; raise DslError listing every problem found."""
    reader = _Reader()
    if not isinstance(doc, dict):
        raise DslError([("$", "a workflow must be a JSON object")])
    # Checked first, and alone: later messages may quote the document's strings.
    not_canonicalisable = list(_json_problems(doc, "$"))
    if not_canonicalisable:
        raise DslError(not_canonicalisable)
    for key in doc:
        if key not in ("start", "vertices"):
            reader.report(f"${json_key(str(key))}", f"unknown field '{key}'; a workflow has 'start' and 'vertices'")
    raw_vertices = doc.get("vertices")
    vertices: dict[str, ast.Vertex] = {}
    if not isinstance(raw_vertices, dict) or not raw_vertices:
        reader.report("$.vertices", "must be a non-empty object of vertices")
    else:
        for vertex_id, raw in raw_vertices.items():
            vertex = _vertex(reader, vertex_id, raw)
            if vertex is not None:
                vertices[vertex_id] = vertex
    start = doc.get("start")
    if start is None:
        reader.report("$.start", "'start' is required")
    elif not isinstance(start, str):
        reader.report("$.start", "must be a vertex id")
    elif isinstance(raw_vertices, dict) and start not in raw_vertices:
        reader.report("$.start", f"names no vertex: '{start}'")
    if isinstance(raw_vertices, dict):
        _check_graph(reader, start if isinstance(start, str) else None, raw_vertices, vertices)
    if reader.errors or not isinstance(start, str):
        raise DslError(reader.errors)
    return ast.Workflow(start=start, vertices=vertices)


def _json_problems(value: Any, where: str) -> Iterator[tuple[str, str]]:
    """Values without a stable canonical form (I-JSON, RFC 7493): non-finite numbers, numbers
    beyond ±(2^53 - 1) (RFC 8785 refuses such integers, and writes such floats as integers),
    and text that is not valid Unicode (lone surrogates)."""
    if isinstance(value, bool):
        return
    if isinstance(value, float) and not math.isfinite(value):
        yield where, "must be a finite number"
    elif isinstance(value, (int, float)) and abs(value) > SAFE_NUMBER:
        yield where, "number outside the exact JSON range ±(2^53 - 1)"
    elif isinstance(value, str) and not _is_unicode(value):
        yield where, "text is not valid Unicode (lone surrogate)"
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not _is_unicode(key):
                yield where, "an object key is not valid Unicode (lone surrogate)"
            else:
                yield from _json_problems(item, f"{where}{json_key(str(key))}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _json_problems(item, f"{where}[{index}]")


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _vertex(reader: _Reader, vertex_id: Any, raw: Any) -> ast.Vertex | None:
    where = f"$.vertices{json_key(str(vertex_id))}"
    if not isinstance(vertex_id, str) or not VERTEX_ID.fullmatch(vertex_id):
        reader.report(where, "a vertex id is 1-64 letters, digits, '_' or '-', starting with a letter or '_'")
        return None
    if not isinstance(raw, dict):
        reader.report(where, "a vertex must be a JSON object")
        return None
    kind = raw.get("type")
    if not isinstance(kind, str) or kind not in ast.VERTEX_TYPES:  # a list or an object is not hashable
        expected = ", ".join(ast.VERTEX_TYPES)
        reader.report(f"{where}.type", f"unknown vertex type {kind!r}; expected one of {expected}")
        return None
    for key in raw:
        if key not in ALLOWED_FIELDS[kind]:
            reader.report(f"{where}{json_key(str(key))}", f"unknown field '{key}' for a {kind} vertex")
    return _BUILDERS[kind](reader, vertex_id, raw, where)


def _next(reader: _Reader, raw: dict[str, Any], where: str) -> str | None:
    return reader.string(raw, "next", where, pattern=VERTEX_ID, what="a vertex id")


def _work(reader: _Reader, raw: dict[str, Any], where: str) -> dict[str, Any]:
    return {
        "next": _next(reader, raw, where),
        "retry": _retry(reader, raw.get("retry"), f"{where}.retry"),
        "timeout_seconds": reader.number(raw, "timeoutSeconds", where, ast.DEFAULT_TIMEOUT_SECONDS,
                                         low=0, high=86400, low_open=True),
    }


def _retry(reader: _Reader, raw: Any, where: str) -> ast.Retry:
    if raw is None:
        return ast.Retry()
    if not isinstance(raw, dict):
        reader.report(where, "must be an object with maxAttempts, backoffSeconds, backoffMultiplier, jitter, "
                             "maxBackoffSeconds")
        return ast.Retry()
    known = ("maxAttempts", "backoffSeconds", "backoffMultiplier", "jitter", "maxBackoffSeconds")
    for key in raw:
        if key not in known:
            reader.report(f"{where}{json_key(str(key))}", f"unknown field '{key}' in retry")
    default = ast.Retry()
    return ast.Retry(
        max_attempts=reader.integer(raw, "maxAttempts", where, default.max_attempts, low=1, high=MAX_ATTEMPTS_LIMIT),
        backoff_seconds=reader.number(raw, "backoffSeconds", where, default.backoff_seconds, low=0, high=86400)
        or 0.0,
        backoff_multiplier=reader.number(raw, "backoffMultiplier", where, default.backoff_multiplier,
                                         low=1, high=10) or 1.0,
        jitter=reader.number(raw, "jitter", where, default.jitter, low=0, high=1) or 0.0,
        max_backoff_seconds=reader.number(raw, "maxBackoffSeconds", where, default.max_backoff_seconds,
                                          low=0, high=MAX_BACKOFF_LIMIT) or 0.0,
    )


def _task(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    return ast.Task(
        id=vid,
        **_work(reader, raw, where),
        handler=reader.string(raw, "handler", where, pattern=HANDLER_NAME, required=True, default="",
                              what="a dotted handler name such as 'demo.echo'") or "",
        input=reader.template(raw.get("input", "$.input"), f"{where}.input", vid),
        destination=reader.string(raw, "destination", where, pattern=DESTINATION_NAME, what="a destination name"),
    )


def _http(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    method = reader.string(raw, "method", where, default="POST", what=f"one of {', '.join(HTTP_METHODS)}")
    if method not in HTTP_METHODS:
        reader.report(f"{where}.method", f"must be one of {', '.join(HTTP_METHODS)}")
    path = reader.string(raw, "path", where, default="/", what="a string starting with '/'")
    path = "/" if path is None else path  # "" is checked below, not silently replaced
    if not path.startswith("/"):
        reader.report(f"{where}.path", "must start with '/'")
    for text in placeholder_paths(path):
        reader.path(text, f"{where}.path", vid)
    headers = _or_default(raw.get("headers"), {})
    if not isinstance(headers, dict) or not all(isinstance(v, str) for v in headers.values()):
        reader.report(f"{where}.headers", "must be an object of header names to string values")
        headers = {}
    callback = waits.wait_for_callback(reader, raw.get("waitForCallback"), f"{where}.waitForCallback")
    for name, value in headers.items():
        # With waitForCallback a header may carry the way back (and nothing else of the context);
        # without it a header value is literal text, as it always was.
        if callback is not None and is_path_string(value):
            if not value.startswith("$.callback."):
                reader.report(f"{where}.headers{json_key(name)}", "a header value may be a path only to "
                                                                  "$.callback.url or $.callback.token")
            else:
                reader.path(value, f"{where}.headers{json_key(name)}", vid, allow_callback=True)
    return ast.Http(
        id=vid,
        **_work(reader, raw, where),
        destination=reader.string(raw, "destination", where, pattern=DESTINATION_NAME, required=True,
                                  default="", what="a destination name") or "",
        method=method or "POST",
        path=path,
        body=reader.template(raw.get("body"), f"{where}.body", vid, allow_callback=callback is not None),
        headers=tuple(sorted(headers.items())),
        wait_for_callback=callback,
    )


def _spawner(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    items = raw.get("items")
    if items is None:
        reader.report(where, "'items' is required")
    elif not is_path_string(items):
        reader.report(f"{where}.items", "must be a path such as '$.input.entries'")
    else:
        reader.path(items, f"{where}.items", vid)
    workflow = reader.string(raw, "workflow", where, pattern=WORKFLOW_KEY, what="a workflow key")
    version = reader.string(raw, "version", where, pattern=VERSION_HASH, what="a 64-character hex version hash")
    if workflow is None and version is None:
        reader.report(where, "a SPAWNER needs 'workflow' (a key) or 'version' (a hash)")
    per_child = reader.integer(raw, "itemsPerChild", where, 1, low=1, high=MAX_ITEMS_PER_CHILD)
    concurrency = None
    if raw.get("maxConcurrency") is not None:
        concurrency = reader.integer(raw, "maxConcurrency", where, 1, low=1, high=MAX_CONCURRENCY_LIMIT)
    # A child of a batch receives $.items; by default its input is that list.
    item_input = reader.template(raw.get("itemInput", "$.item" if per_child == 1 else "$.items"),
                                 f"{where}.itemInput", vid, allow_item=True)
    if per_child > 1:
        for suffix, text in template_paths(item_input):
            if text == "$.item" or text.startswith(("$.item.", "$.item[")):
                reader.report(f"{where}.itemInput{suffix}",
                              f"{text}: with itemsPerChild {per_child} a child receives a list of items; "
                              "use $.items (and $.firstItem for the first one's position)")
    return ast.Spawner(
        id=vid,
        **_work(reader, raw, where),
        items=items if isinstance(items, str) else "",
        workflow=workflow,
        version=version,
        item_input=item_input,
        items_per_child=per_child,
        max_concurrency=concurrency,
        item_key=_item_key(reader, raw, where, per_child),
    )


def _item_key(reader: _Reader, raw: dict[str, Any], where: str, per_child: int) -> str | None:
    """``itemKey``: a path into the item (``$.item`` or below), each child's business key."""
    text = raw.get("itemKey")
    if text is None:
        return None
    where = f"{where}.itemKey"
    if not is_path_string(text):
        reader.report(where, "must be a path into the item, such as '$.item.id'")
        return None
    try:
        parsed = check_path(text, allow_item=True)
    except PathSyntaxError as error:
        reader.report(where, f"invalid path {text!r}: {error}")
        return None
    if parsed.root != "item":
        reader.report(where, f"{text}: an item key is read from the item; use a path starting with $.item")
        return None
    if per_child > 1:
        reader.report(where, f"with itemsPerChild {per_child} a child has several items and no one key; "
                             "drop itemKey or itemsPerChild")
        return None
    return text


def _merge(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    spawner = reader.string(raw, "spawner", where, pattern=VERTEX_ID, required=True, default="",
                            what="a SPAWNER vertex id") or ""
    config = _or_default(raw.get("config"), {})
    cwhere = f"{where}.config"
    if not isinstance(config, dict):
        reader.report(cwhere, "must be an object")
        config = {}
    for key in config:
        if key not in ("tolerateChildFailures", "failureTolerance", "failFast", *quorum.QUORUM_FIELDS):
            reader.report(f"{cwhere}{json_key(str(key))}", f"unknown field '{key}' in MERGE config")
    tolerated = _or_default(config.get("tolerateChildFailures"), [])
    statuses: set[str] = set()
    if not isinstance(tolerated, list):
        reader.report(f"{cwhere}.tolerateChildFailures", "must be a list of statuses")
    else:
        for index, status in enumerate(tolerated):
            if status not in ast.TERMINAL_FAILURE_STATUSES:
                expected = " or ".join(ast.TERMINAL_FAILURE_STATUSES)
                reader.report(f"{cwhere}.tolerateChildFailures[{index}]",
                              f"unknown status {status!r}; expected {expected}")
            else:
                statuses.add(status)
    tolerance = _or_default(config.get("failureTolerance"), {})
    if not isinstance(tolerance, dict):
        reader.report(f"{cwhere}.failureTolerance", "must be an object with maxFailureRatio and/or maxFailures")
        tolerance = {}
    for key in tolerance:
        if key not in ("maxFailureRatio", "maxFailures"):
            reader.report(f"{cwhere}.failureTolerance{json_key(str(key))}",
                          f"unknown field '{key}' in failureTolerance")
    ratio = reader.number(tolerance, "maxFailureRatio", f"{cwhere}.failureTolerance", 1.0, low=0, high=1)
    max_failures = None  # issue 31: a count beside the ratio (both hold); absent: no count
    if tolerance.get("maxFailures") is not None:
        max_failures = reader.integer(tolerance, "maxFailures", f"{cwhere}.failureTolerance", 0,
                                      low=0, high=2**31 - 1)
    if not statuses:
        ratio, max_failures = 1.0, None  # nothing is tolerated, so they have no effect: same logic, same hash
    min_successful, min_successful_ratio = quorum.quorum(reader, config, cwhere, tolerated=bool(statuses))
    return ast.Merge(
        id=vid,
        next=_next(reader, raw, where),
        spawner=spawner,
        tolerate_child_failures=tuple(sorted(statuses)),
        max_failure_ratio=ratio if ratio is not None else 1.0,
        max_failures=max_failures,
        # A quorum merge fails fast whatever it says: same logic, same hash.
        fail_fast=reader.boolean(config, "failFast", cwhere, False) or bool(min_successful or min_successful_ratio),
        min_successful=min_successful,
        min_successful_ratio=min_successful_ratio,
    )


def _or_default(value: Any, default: Any) -> Any:
    """``null`` means the default; any other value (even ``[]`` or ``0``) is checked as given."""
    return default if value is None else value


def _timer(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    seconds = reader.number(raw, "seconds", where, None, low=0, high=366 * 86400)
    until = raw.get("until")
    if until is not None:
        if is_path_string(until):
            reader.path(until, f"{where}.until", vid)
        elif not _is_timestamp(until):
            reader.report(f"{where}.until", "must be an ISO-8601 timestamp with a UTC offset, or a path")
            until = None
    if (raw.get("seconds") is None) == (raw.get("until") is None):
        reader.report(where, "a TIMER needs exactly one of 'seconds' or 'until'")
    return ast.Timer(id=vid, next=_next(reader, raw, where), seconds=seconds, until=until)


def _wait(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    return waits.wait_vertex(reader, vid, raw, where, {
        "next": _next(reader, raw, where), "retry": _retry(reader, raw.get("retry"), f"{where}.retry")})


def _is_timestamp(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).tzinfo is not None
    except ValueError:
        return False


def _choice(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    rules = []
    raw_choices = raw.get("choices")
    if not isinstance(raw_choices, list) or not raw_choices:
        reader.report(f"{where}.choices", "must be a non-empty list of {when, next}")
        raw_choices = []
    for index, rule in enumerate(raw_choices):
        rwhere = f"{where}.choices[{index}]"
        if not isinstance(rule, dict):
            reader.report(rwhere, "must be an object with 'when' and 'next'")
            continue
        for key in rule:
            if key not in ("when", "next"):
                reader.report(f"{rwhere}{json_key(str(key))}", f"unknown field '{key}' in a choice")
        for path_where, text in conditions.check(rule.get("when"), f"{rwhere}.when", reader.report):
            reader.path(text, path_where, vid)
        target = reader.string(rule, "next", rwhere, pattern=VERTEX_ID, required=True, what="a vertex id")
        if isinstance(rule.get("when"), dict) and target:
            rules.append(ast.ChoiceRule(when=rule["when"], next=target))
    default = reader.string(raw, "default", where, pattern=VERTEX_ID, what="a vertex id")
    return ast.Choice(id=vid, choices=tuple(rules), default=default)


def _chain(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    workflow = reader.string(raw, "workflow", where, required=True, default="self", pattern=WORKFLOW_KEY,
                             what="a workflow key or \"self\"")
    return ast.Chain(
        id=vid,
        **_work(reader, raw, where),
        workflow=workflow or "self",
        input=reader.template(raw.get("input", "$.input"), f"{where}.input", vid),
    )


def _succeed(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    return ast.Succeed(id=vid, output=reader.template(raw.get("output"), f"{where}.output", vid))


def _fail(reader: _Reader, vid: str, raw: dict[str, Any], where: str) -> ast.Vertex:
    return ast.Fail(
        id=vid,
        error=reader.string(raw, "error", where, default="failed", what="a string") or "failed",
        cause=reader.string(raw, "cause", where, what="a string"),
    )


_BUILDERS: dict[str, Callable[[_Reader, str, dict[str, Any], str], ast.Vertex]] = {
    "TASK": _task,
    "HTTP": _http,
    "SPAWNER": _spawner,
    "MERGE": _merge,
    "TIMER": _timer,
    "WAIT": _wait,
    "CHOICE": _choice,
    "CHAIN": _chain,
    "SUCCEED": _succeed,
    "FAIL": _fail,
}


# --- graph checks ----------------------------------------------------------------------------

def _edges(vertex: ast.Vertex) -> list[tuple[str, str]]:
    """(json path suffix, target) for every outgoing edge."""
    if isinstance(vertex, ast.Choice):
        edges = [(f".choices[{i}].next", rule.next) for i, rule in enumerate(vertex.choices)]
        return edges + ([(".default", vertex.default)] if vertex.default else [])
    return [(".next", vertex.next)] if vertex.next else []


def _check_graph(reader: _Reader, start: str | None, raw: dict[str, Any], vertices: dict[str, ast.Vertex]) -> None:
    for vid, vertex in vertices.items():
        for suffix, target in _edges(vertex):
            if target not in raw:
                reader.report(f"$.vertices{json_key(vid)}{suffix}", f"names no vertex: '{target}'")
    graph = {vid: [t for _, t in _edges(v) if t in vertices] for vid, v in vertices.items()}
    _check_cycles(reader, graph, vertices)
    if start in vertices:
        reached = _reachable(graph, start)
        for vid in raw:
            if vid not in reached and vid in vertices:
                reader.report(f"$.vertices{json_key(vid)}", f"unreachable from start '{start}'")
    _check_merges(reader, graph, vertices)
    for where, text, reader_vertex in reader.step_refs:
        target = text.split(".")[2]
        if target not in vertices:
            reader.report(where, f"path {text} names no vertex: '{target}'")
        elif target == reader_vertex or reader_vertex not in _reachable(graph, target) - {target}:
            reader.report(where, f"path {text} reads '{target}', which does not run before '{reader_vertex}'")


def _reachable(graph: dict[str, list[str]], start: str) -> set[str]:
    seen, stack = {start}, [start]
    while stack:
        for target in graph.get(stack.pop(), []):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _check_cycles(reader: _Reader, graph: dict[str, list[str]], vertices: dict[str, ast.Vertex]) -> None:
    white, grey, black = 0, 1, 2
    color = dict.fromkeys(graph, white)
    trail: list[str] = []

    def visit(vid: str) -> None:
        color[vid] = grey
        trail.append(vid)
        for suffix, target in _edges(vertices[vid]):
            if target not in color:
                continue
            if color[target] == grey:
                loop = [*trail[trail.index(target):], target]
                reader.report(
                    f"$.vertices{json_key(vid)}{suffix}",
                    f"creates a cycle {' -> '.join(loop)}; loops must be expressed with CHAIN",
                )
            elif color[target] == white:
                visit(target)
        trail.pop()
        color[vid] = black

    for vid in graph:
        if color[vid] == white:
            visit(vid)


def _check_merges(reader: _Reader, graph: dict[str, list[str]], vertices: dict[str, ast.Vertex]) -> None:
    merged: dict[str, str] = {}
    for vid, vertex in vertices.items():
        if not isinstance(vertex, ast.Merge) or not vertex.spawner:
            continue
        where = f"$.vertices{json_key(vid)}.spawner"
        spawner = vertices.get(vertex.spawner)
        if spawner is None:
            reader.report(where, f"names no vertex: '{vertex.spawner}'")
        elif not isinstance(spawner, ast.Spawner):
            reader.report(where, f"'{vertex.spawner}' is a {spawner.type}, not a SPAWNER")
        elif vid not in _reachable(graph, vertex.spawner):
            reader.report(where, f"SPAWNER '{vertex.spawner}' is not upstream of this MERGE")
        elif vertex.spawner in merged:
            reader.report(where, f"SPAWNER '{vertex.spawner}' is already joined by MERGE '{merged[vertex.spawner]}'")
        else:
            merged[vertex.spawner] = vid
