"""The content hash (S14): equal logic ⇒ equal hash, whatever the spelling; any change of
logic ⇒ a different hash. Property tests over the golden fixtures and generated workflows."""

from __future__ import annotations

import copy
import itertools
import json
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from workflows.dsl import canonical, content_hash, parse

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "dsl"
FIXTURE_DOCS = {p.name: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))
                if not p.name.endswith(".canonical.json")}

PROPERTY = settings(max_examples=100, deadline=None, database=None)
SAFE_INTEGER = 2**53 - 1

# --- generated workflows ----------------------------------------------------------------------
# Strategies are built once, at import: building them per draw makes generation ~10× slower.
# Step paths are drawn as "$.steps.@…" and "@" becomes an upstream vertex afterwards.

STEP = "@"
VERTEX_IDS = st.builds(str.__add__, st.sampled_from("abcdefgxyz_"), st.text("abcxyz019_-", max_size=7))
LITERAL_TEXT = st.text(max_size=8).filter(lambda s: not s.startswith("$")) | st.text(max_size=4).map("$$".__add__)
SCALARS = (st.none() | st.booleans() | st.integers(-SAFE_INTEGER, SAFE_INTEGER)
           | st.floats(-SAFE_INTEGER, SAFE_INTEGER) | LITERAL_TEXT)
INPUT_PATHS = ["$.input", "$.input.a", "$.input.items[0]", "$.input.order.lines[2].sku"]
STEP_PATHS = [f"$.steps.{STEP}.output", f"$.steps.{STEP}.output.list[1]"]


def _templates(paths: list[str]) -> st.SearchStrategy[Any]:
    return st.recursive(SCALARS | st.sampled_from(paths),
                        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                    max_size=3),
                        max_leaves=6)


TEMPLATES = _templates(INPUT_PATHS + STEP_PATHS)
ITEM_TEMPLATES = _templates([*INPUT_PATHS, *STEP_PATHS, "$.item", "$.item.id", "$.index"])
RETRIES = st.fixed_dictionaries({}, optional={
    "maxAttempts": st.integers(1, 100),
    "backoffSeconds": st.integers(0, 86400) | st.floats(0, 86400),
    "backoffMultiplier": st.integers(1, 10) | st.floats(1, 10),
    "jitter": st.sampled_from([0, 1]) | st.floats(0, 1),
})
TIMEOUTS = st.integers(1, 86400) | st.floats(0, 86400, exclude_min=True)
DESTINATIONS = st.sampled_from(["api", "crm.example", "ledger-1"])
HEADERS = st.dictionaries(st.text("ABCXYZabcxyz-", min_size=1, max_size=6), st.text(max_size=6), max_size=3)
MERGE_CONFIGS = st.fixed_dictionaries({}, optional={
    "tolerateChildFailures": st.lists(st.sampled_from(["FAILED", "CANCELLED"]), max_size=3),
    "failureTolerance": st.fixed_dictionaries({}, optional={"maxFailureRatio": st.floats(0, 1)}),
    "failFast": st.booleans(),
})


def with_upstream(value: Any, upstream: str | None) -> Any:
    """Point the template's step paths at ``upstream`` (or at the input when there is none)."""
    if isinstance(value, str) and value.startswith(f"$.steps.{STEP}."):
        return value.replace(STEP, upstream, 1) if upstream else "$.input"
    if isinstance(value, dict):
        return {key: with_upstream(item, upstream) for key, item in value.items()}
    if isinstance(value, list):
        return [with_upstream(item, upstream) for item in value]
    return value


def optional(draw: Any, vertex: dict[str, Any], key: str, strategy: st.SearchStrategy[Any],
             upstream: str | None = None) -> None:
    if draw(st.booleans()):
        vertex[key] = with_upstream(draw(strategy), upstream)


@st.composite
def work_vertex(draw: Any, kind: str, upstream: list[str]) -> dict[str, Any]:
    reads = draw(st.sampled_from(upstream)) if upstream else None
    vertex: dict[str, Any] = {"type": kind}
    if kind == "TASK":
        vertex["handler"] = draw(st.sampled_from(["demo.echo", "demo.noop", "billing.charge", "a.b_c.d"]))
        optional(draw, vertex, "input", TEMPLATES, reads)
        optional(draw, vertex, "destination", DESTINATIONS)
    elif kind == "HTTP":
        vertex["destination"] = draw(DESTINATIONS)
        optional(draw, vertex, "method", st.sampled_from(["GET", "POST", "PUT", "PATCH", "DELETE"]))
        optional(draw, vertex, "path", st.sampled_from(["/", "/orders", "/orders/{$.input.id}/lines"]))
        optional(draw, vertex, "headers", HEADERS)
        optional(draw, vertex, "body", TEMPLATES, reads)
    elif kind == "SPAWNER":
        vertex["items"] = with_upstream(draw(st.sampled_from(["$.input.items", *STEP_PATHS])), reads)
        target = draw(st.sampled_from(["workflow", "version", "both"]))
        if target in ("workflow", "both"):
            vertex["workflow"] = draw(st.sampled_from(["child", "migrate-entry", "a.b_c-1"]))
        if target in ("version", "both"):
            vertex["version"] = draw(st.binary(min_size=32, max_size=32)).hex()
        optional(draw, vertex, "itemInput", ITEM_TEMPLATES, reads)
        optional(draw, vertex, "maxConcurrency", st.integers(1, 1000))
        optional(draw, vertex, "itemKey", st.sampled_from(["$.item", "$.item.id", "$.item.ids[0]"]))
    elif kind == "CHAIN":
        vertex["workflow"] = draw(st.sampled_from(["self", "next-job", "poller.v2"]))
        optional(draw, vertex, "input", TEMPLATES, reads)
    elif kind == "TIMER":
        if draw(st.booleans()):
            vertex["seconds"] = draw(st.integers(0, 3600) | st.floats(0, 3600))
        else:
            vertex["until"] = with_upstream(draw(st.sampled_from(
                ["2030-01-01T00:00:00Z", "2030-06-01T12:30:00+02:00", "$.input.due", f"$.steps.{STEP}.output.at"])),
                reads)
        return vertex
    optional(draw, vertex, "retry", RETRIES)
    optional(draw, vertex, "timeoutSeconds", TIMEOUTS)
    return vertex


@st.composite
def workflows(draw: Any) -> dict[str, Any]:
    """A valid workflow: a line of work vertices (SPAWNERs maybe joined by a MERGE), ended by
    nothing, SUCCEED, FAIL, or a CHOICE between two ends."""
    ids = draw(st.lists(VERTEX_IDS, min_size=12, max_size=12, unique=True))
    line: list[tuple[str, dict[str, Any]]] = []
    for _ in range(draw(st.integers(1, 4))):
        vid = ids.pop()
        kind = draw(st.sampled_from(["TASK", "HTTP", "SPAWNER", "CHAIN", "TIMER"]))
        line.append((vid, draw(work_vertex(kind, [v for v, _ in line]))))
        if kind == "SPAWNER" and draw(st.booleans()):
            merge: dict[str, Any] = {"type": "MERGE", "spawner": vid}
            optional(draw, merge, "config", MERGE_CONFIGS)
            line.append((ids.pop(), merge))
    reads = draw(st.sampled_from([v for v, _ in line]))
    ending = draw(st.sampled_from(["none", "SUCCEED", "FAIL", "CHOICE"]))
    ends: list[tuple[str, dict[str, Any]]] = []
    if ending == "CHOICE":
        yes, no = ids.pop(), ids.pop()
        path = with_upstream(draw(st.sampled_from([*INPUT_PATHS, *STEP_PATHS])), reads)
        operator = draw(st.sampled_from(["equals", "notEquals", "lessThan", "in", "exists"]))
        operand = {"in": [1, "a"], "exists": True}.get(operator, draw(st.integers(0, 9)))
        rule = {"when": {"path": path, operator: operand}, "next": yes}
        line.append((ids.pop(), {"type": "CHOICE", "choices": [rule], "default": no}))
        ends = [(yes, {"type": "SUCCEED"}), (no, {"type": "FAIL", "error": "no"})]
    elif ending == "SUCCEED":
        end: dict[str, Any] = {"type": "SUCCEED"}
        optional(draw, end, "output", TEMPLATES, reads)
        line.append((ids.pop(), end))
    elif ending == "FAIL":
        end = {"type": "FAIL"}
        optional(draw, end, "error", st.text(min_size=1, max_size=8))
        optional(draw, end, "cause", st.text(max_size=8))
        line.append((ids.pop(), end))
    for (_, vertex), (next_id, _) in itertools.pairwise(line):
        vertex["next"] = next_id
    return {"start": line[0][0], "vertices": dict(line + ends)}


DOCUMENTS = st.sampled_from(list(FIXTURE_DOCS.values())) | workflows()


# --- equivalent respellings -------------------------------------------------------------------

def reordered(value: Any, rnd: random.Random) -> Any:
    """Every object's keys in a random order (lists keep theirs: their order is logic)."""
    if isinstance(value, dict):
        keys = list(value)
        rnd.shuffle(keys)
        return {key: reordered(value[key], rnd) for key in keys}
    if isinstance(value, list):
        return [reordered(item, rnd) for item in value]
    return value


def respelled(value: Any, rnd: random.Random) -> Any:
    """Integral numbers randomly written as 1 or 1.0."""
    if isinstance(value, bool):
        return value
    if isinstance(value, (int, float)) and float(value).is_integer() and abs(value) <= SAFE_INTEGER:
        return float(value) if rnd.random() < 0.5 else int(value)
    if isinstance(value, dict):
        return {key: respelled(item, rnd) for key, item in value.items()}
    if isinstance(value, list):
        return [respelled(item, rnd) for item in value]
    return value


RETRY = {"maxAttempts": 3, "backoffSeconds": 1, "backoffMultiplier": 2, "jitter": 0}
WORK = {"next": None, "retry": RETRY, "timeoutSeconds": 300}
MERGE_CONFIG = {"tolerateChildFailures": [], "failureTolerance": {"maxFailureRatio": 1}, "failFast": False}
DEFAULTS: dict[str, dict[str, Any]] = {
    "TASK": {**WORK, "input": "$.input", "destination": None},
    "HTTP": {**WORK, "method": "POST", "path": "/", "headers": {}, "body": None, "waitForCallback": None},
    "SPAWNER": {**WORK, "itemInput": "$.item", "itemsPerChild": 1, "maxConcurrency": None, "itemKey": None},
    "MERGE": {"next": None, "config": MERGE_CONFIG},
    "TIMER": {"next": None},
    # WAIT's defaults depend on what it waits for (explicit_defaults); timeoutSeconds is required.
    "WAIT": {"next": None, "retry": RETRY},
    "CHOICE": {"default": None},
    "CHAIN": {**WORK, "input": "$.input"},
    "SUCCEED": {"output": None},
    "FAIL": {"error": "failed", "cause": None},
}
# Fields whose explicit null means the default. (A template's null is a value: TASK
# "input": null passes null, not the execution input.)
TEMPLATE_FIELDS = {"input", "itemInput"}


def with_defaults(value: dict[str, Any], defaults: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    """Randomly write absent optional fields explicitly (as the default, null, or a partial
    object of defaults)."""
    result = dict(value)
    for key, default in defaults.items():
        if key in result:
            if isinstance(default, dict) and isinstance(result[key], dict):
                result[key] = with_defaults(result[key], default, rnd)
            continue
        choice = rnd.choice(["omit", "explicit", "null"])
        if choice == "explicit":
            result[key] = with_defaults({}, default, rnd) if isinstance(default, dict) and default else default
        elif choice == "null" and key not in TEMPLATE_FIELDS:
            result[key] = None
    return result


def explicit_defaults(doc: dict[str, Any], rnd: random.Random) -> dict[str, Any]:
    vertices = {}
    for vid, vertex in doc["vertices"].items():
        defaults = dict(DEFAULTS[vertex["type"]])
        if vertex["type"] == "SPAWNER":
            defaults.update({key: None for key in ("workflow", "version") if key not in vertex})
        if vertex["type"] == "TIMER":
            defaults.update({key: None for key in ("seconds", "until") if key not in vertex})
        if vertex["type"] == "WAIT":
            defaults.update({"heartbeatSeconds": None} if vertex["for"] == "callback"
                            else {"lookbackSeconds": 0, "match": {}})
        vertices[vid] = with_defaults(vertex, defaults, rnd)
    return {**doc, "vertices": vertices}


JSON_LAYOUTS = st.fixed_dictionaries({
    "indent": st.sampled_from([None, 0, 1, 2, 4, "\t", " \n "]),
    "separators": st.sampled_from([(",", ":"), (", ", ": "), (" ,\n", " :\t"), (",\r\n", ":  ")]),
    "ensure_ascii": st.booleans(),
    "sort_keys": st.booleans(),
})


# --- invariance -------------------------------------------------------------------------------

@PROPERTY
@given(DOCUMENTS, st.randoms(use_true_random=False))
def test_key_order_does_not_change_the_hash(doc: dict[str, Any], rnd: random.Random) -> None:
    assert content_hash(reordered(doc, rnd)) == content_hash(doc)


@PROPERTY
@given(DOCUMENTS, JSON_LAYOUTS)
def test_whitespace_does_not_change_the_hash(doc: dict[str, Any], layout: dict[str, Any]) -> None:
    assert content_hash(json.loads(json.dumps(doc, **layout))) == content_hash(doc)


@PROPERTY
@given(DOCUMENTS, st.randoms(use_true_random=False))
def test_explicit_defaults_do_not_change_the_hash(doc: dict[str, Any], rnd: random.Random) -> None:
    assert content_hash(explicit_defaults(doc, rnd)) == content_hash(doc)


@PROPERTY
@given(DOCUMENTS, st.randoms(use_true_random=False))
def test_number_spelling_does_not_change_the_hash(doc: dict[str, Any], rnd: random.Random) -> None:
    assert content_hash(respelled(doc, rnd)) == content_hash(doc)


@PROPERTY
@given(DOCUMENTS, st.randoms(use_true_random=False), JSON_LAYOUTS)
def test_all_respellings_at_once(doc: dict[str, Any], rnd: random.Random, layout: dict[str, Any]) -> None:
    text = json.dumps(reordered(respelled(explicit_defaults(doc, rnd), rnd), rnd), **layout)
    assert content_hash(json.loads(text)) == content_hash(doc)


@PROPERTY
@given(DOCUMENTS)
def test_canonical_round_trips_and_is_a_fixed_point(doc: dict[str, Any]) -> None:
    form = canonical(doc)
    again = json.loads(form)
    assert parse(again) == parse(doc)
    assert canonical(again) == form
    assert again == json.loads(json.dumps(parse(doc).to_dict()))


def test_the_listed_defaults_are_the_ast_defaults() -> None:
    minimal = {
        "start": "t",
        "vertices": {
            "t": {"type": "TASK", "handler": "demo.echo", "next": "h"},
            "h": {"type": "HTTP", "destination": "api", "next": "s"},
            "s": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "m"},
            "m": {"type": "MERGE", "spawner": "s", "next": "w"},
            "w": {"type": "TIMER", "seconds": 1, "next": "c"},
            "c": {"type": "CHOICE", "choices": [{"when": {"path": "$.input.x", "exists": True}, "next": "f"}],
                  "default": "ch"},
            "ch": {"type": "CHAIN", "workflow": "self", "next": "ok"},
            "ok": {"type": "SUCCEED"},
            "f": {"type": "FAIL"},
        },
    }
    explicit = copy.deepcopy(minimal)
    for vertex in explicit["vertices"].values():
        for key, default in DEFAULTS[vertex["type"]].items():
            vertex.setdefault(key, copy.deepcopy(default))
    assert explicit != minimal
    assert canonical(explicit) == canonical(minimal)
    written = json.loads(canonical(minimal))["vertices"]
    assert written["t"]["retry"] == RETRY
    assert written["t"]["timeoutSeconds"] == 300
    assert written["h"]["method"] == "POST"
    assert written["h"]["path"] == "/"
    assert written["h"]["headers"] == {}
    assert written["s"]["itemInput"] == "$.item"
    assert written["m"]["config"] == MERGE_CONFIG
    assert written["ch"]["input"] == "$.input"


@pytest.mark.parametrize(("a", "b"), [
    ({"tolerateChildFailures": ["CANCELLED", "FAILED"]}, {"tolerateChildFailures": ["FAILED", "CANCELLED", "FAILED"]}),
    ({}, {"tolerateChildFailures": [], "failureTolerance": {"maxFailureRatio": 0.2}}),  # a ratio of nothing
    ({"tolerateChildFailures": ["FAILED"]}, {"tolerateChildFailures": ["FAILED"],
                                             "failureTolerance": {"maxFailureRatio": 1.0}}),
    ({"failureTolerance": {}}, {"failureTolerance": None, "failFast": None}),
])
def test_equivalent_merge_configs_hash_the_same(a: dict[str, Any], b: dict[str, Any]) -> None:
    def doc(config: dict[str, Any]) -> dict[str, Any]:
        return {"start": "s", "vertices": {
            "s": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child", "next": "m"},
            "m": {"type": "MERGE", "spawner": "s", "config": config},
        }}

    assert content_hash(doc(a)) == content_hash(doc(b))


def test_http_header_order_does_not_change_the_hash() -> None:
    def doc(headers: dict[str, str]) -> dict[str, Any]:
        return {"start": "h", "vertices": {"h": {"type": "HTTP", "destination": "api", "headers": headers}}}

    assert content_hash(doc({"A": "1", "B": "2"})) == content_hash(doc({"B": "2", "A": "1"}))


# --- any change of logic changes the hash -------------------------------------------------------

Mutation = Callable[[dict[str, Any]], None]


def at(*keys: Any, value: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for key in keys[:-1]:
            target = target[key]
        target[keys[-1]] = value

    return mutate


def drop(*keys: Any) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for key in keys[:-1]:
            target = target[key]
        del target[keys[-1]]

    return mutate


def then(*mutations: Mutation) -> Mutation:
    def mutate(doc: dict[str, Any]) -> None:
        for mutation in mutations:
            mutation(doc)

    return mutate


V = "vertices"
MUTATIONS: dict[str, tuple[str, Mutation]] = {
    "handler": ("ledger_migration.json", at(V, "load", "handler", value="ledger.load_entries_v2")),
    "task input": ("ledger_migration.json", at(V, "load", "input", "since", value="$.input.until")),
    "task input: null": ("design_sketch.json", at(V, "fetch", "input", value=None)),
    "task destination": ("ledger_migration.json", drop(V, "report", "destination")),
    "maxAttempts": ("ledger_migration.json", at(V, "load", "retry", "maxAttempts", value=6)),
    "backoffSeconds": ("ledger_migration.json", at(V, "load", "retry", "backoffSeconds", value=2.5)),
    "backoffMultiplier": ("ledger_migration.json", at(V, "load", "retry", "backoffMultiplier", value=2)),
    "jitter": ("ledger_migration.json", at(V, "load", "retry", "jitter", value=0.25)),
    "timeoutSeconds": ("ledger_migration.json", at(V, "load", "timeoutSeconds", value=120.5)),
    "a default made explicit with another value": ("design_sketch.json", at(V, "fetch", "timeoutSeconds", value=301)),
    "itemInput": ("ledger_migration.json", at(V, "fanout", "itemInput", "entryId", value="$.item.key")),
    "itemInput escape": ("ledger_migration.json", at(V, "fanout", "itemInput", "currency", value="$$USD")),
    "itemInput removed": ("ledger_migration.json", drop(V, "fanout", "itemInput")),
    "spawner items": ("design_sketch.json", at(V, "fanout", "items", value="$.input.lines")),
    "spawner workflow": ("design_sketch.json", at(V, "fanout", "workflow", value="migrate-entry-v2")),
    "spawner version": ("nightly_sync.json", at(V, "children", "version", value="f" * 64)),
    "ratio": ("design_sketch.json", at(V, "join", "config", "failureTolerance", "maxFailureRatio", value=0.06)),
    "tolerated statuses": ("ledger_migration.json", at(V, "join", "config", "tolerateChildFailures",
                                                       value=["FAILED"])),
    "nothing tolerated": ("design_sketch.json", at(V, "join", "config", "tolerateChildFailures", value=[])),
    "failFast": ("design_sketch.json", at(V, "join", "config", "failFast", value=False)),
    "next": ("design_sketch.json", then(at(V, "join", "next", value="end"),
                                        drop(V, "done"), at(V, "end", value={"type": "SUCCEED"}))),
    "start": ("design_sketch.json", then(at("start", value="fanout"), drop(V, "fetch"))),
    "a vertex added": ("design_sketch.json", then(at(V, "fetch", "next", value="pause"),
                                                  at(V, "pause", value={"type": "TIMER", "seconds": 1,
                                                                        "next": "fanout"}))),
    "a vertex renamed": ("migrate_entry.json", then(
        at(V, "send", value=copy.deepcopy(FIXTURE_DOCS["migrate_entry.json"][V]["post"])),
        drop(V, "post"), at("start", value="send"),
        at(V, "done", "output", value="$.steps.send.output.body"))),
    "http method": ("status_poller.json", at(V, "check", "method", value="POST")),
    "http path": ("status_poller.json", at(V, "check", "path", value="/exports/{$.input.exportId}")),
    "http header value": ("nightly_sync.json", at(V, "push", "headers", "X-Source", value="other")),
    "http header added": ("nightly_sync.json", at(V, "push", "headers", "X-Trace", value="1")),
    "http header name case": ("nightly_sync.json", then(drop(V, "push", "headers", "Accept"),
                                                        at(V, "push", "headers", "accept", value="application/json"))),
    "http body true vs 1": ("nightly_sync.json", at(V, "push", "body", "full", value=1)),
    "http body list order": ("nightly_sync.json", at(V, "push", "body", "tags", value=["$.input.region", "nightly"])),
    "timer seconds": ("status_poller.json", at(V, "wait", "seconds", value=61)),
    "timer until": ("nightly_sync.json", at(V, "window", "until", value="2030-01-01T03:00:00+01:00")),
    "timer seconds vs until": ("hello.json", then(drop(V, "pause", "seconds"),
                                                  at(V, "pause", "until", value="$.input.at"))),
    "choice operand": ("status_poller.json", at(V, "route", "choices", 0, "when", "equals", value="finished")),
    "choice operator": ("status_poller.json", then(drop(V, "route", "choices", 0, "when", "equals"),
                                                   at(V, "route", "choices", 0, "when", "notEquals", value="done"))),
    "choice order": ("status_poller.json", at(V, "route", "choices", value=list(reversed(
        FIXTURE_DOCS["status_poller.json"][V]["route"]["choices"])))),
    "choice default": ("hello.json", at(V, "check", "default", value="pause")),
    "chain workflow": ("status_poller.json", at(V, "again", "workflow", value="status-poller")),
    "chain input": ("status_poller.json", drop(V, "again", "input", "previous")),
    "succeed output": ("status_poller.json", drop(V, "finished", "output", "url")),
    "succeed output removed": ("hello.json", drop(V, "done", "output")),
    "fail error": ("status_poller.json", at(V, "gaveUp", "error", value="gave up!")),
    "fail cause": ("status_poller.json", drop(V, "broken", "cause")),
}


def test_every_mutation_changes_the_hash_and_no_two_collide() -> None:
    seen = {content_hash(doc): f"fixture {name}" for name, doc in FIXTURE_DOCS.items()}
    for label, (fixture, mutate) in MUTATIONS.items():
        doc = copy.deepcopy(FIXTURE_DOCS[fixture])
        mutate(doc)
        digest = content_hash(doc)  # also proves the mutated document is valid
        assert digest not in seen, f"{label!r} hashes like {seen.get(digest)}"
        seen[digest] = label


@PROPERTY
@given(workflows(), st.data())
def test_changing_a_retry_value_changes_the_hash(doc: dict[str, Any], data: st.DataObject) -> None:
    workers = [vid for vid, v in doc["vertices"].items() if v["type"] in ("TASK", "HTTP", "SPAWNER", "CHAIN")]
    if not workers:
        return
    vid = data.draw(st.sampled_from(workers))
    field, low, high = data.draw(st.sampled_from([("maxAttempts", 1, 100), ("backoffSeconds", 0, 86400),
                                                  ("backoffMultiplier", 1, 10), ("jitter", 0, 1)]))
    current = parse(doc).vertices[vid].to_dict()["retry"][field]
    value = data.draw(st.integers(low, high).filter(lambda v: v != current))
    changed = copy.deepcopy(doc)
    changed["vertices"][vid]["retry"] = {**changed["vertices"][vid].get("retry", {}), field: value}
    assert content_hash(changed) != content_hash(doc)


@PROPERTY
@given(workflows(), workflows())
def test_different_logic_never_shares_a_hash(a: dict[str, Any], b: dict[str, Any]) -> None:
    if parse(a) != parse(b):
        assert content_hash(a) != content_hash(b)


def test_new_spawner_fields_are_in_the_canonical_form_only_when_not_default() -> None:
    base = {"start": "s", "vertices": {"s": {"type": "SPAWNER", "items": "$.input.items", "workflow": "child"}}}
    explicit = copy.deepcopy(base)
    explicit["vertices"]["s"].update({"itemsPerChild": 1, "maxConcurrency": None})
    assert canonical(explicit) == canonical(base)
    assert b"itemsPerChild" not in canonical(base) and b"maxConcurrency" not in canonical(base)
    batched = copy.deepcopy(base)
    batched["vertices"]["s"].update({"itemsPerChild": 25, "maxConcurrency": 4})
    form = json.loads(canonical(batched))["vertices"]["s"]
    assert (form["itemsPerChild"], form["maxConcurrency"], form["itemInput"]) == (25, 4, "$.items")
    assert len({content_hash(base), content_hash(batched),
                content_hash({**batched, "vertices": {"s": {**batched["vertices"]["s"], "maxConcurrency": 5}}})}) == 3
