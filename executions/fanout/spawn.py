"""Fan-out (S1–S8): the SPAWNER, spawning children in batches (the MERGE: merge.py).

A SPAWNER step first — in one fenced transaction — counts the items and checks
payload pressure (S7: a fan-out whose children's inputs could never fit in the store fails
with the numbers; above the high-water mark, or without room for its expected bytes, it
defers the whole fan-out), resolves and pins the target version, reserves the quota for all
of them (S6: refusal creates nothing), and records the plan, with its expected bytes, as a
FanOut row. Between batches it defers only for bytes other than its own. Then it walks the
list in batches: each batch is one
``INSERT … ON CONFLICT DO NOTHING`` of children on their per-item key (parent, vertex,
index), their input payloads and first steps, committed together with the cursor (S2, S3).
The list itself is never loaded into the worker: at plan time PostgreSQL explodes the
stored JSON array once into one row per item (FanOutItem), and each batch reads and drops
its own rows by key — O(batch), whatever N — so a worker's memory is bounded by the batch.
A redelivered spawner resumes at the committed cursor; children that exist already — failed
ones included — are left alone.
"""

from __future__ import annotations

import time
from typing import Any, cast

from django.conf import settings
from django.db import connection

from executions.core import cancel, pauses, payloads, quotas, records, retry, state, versions
from executions.core.merge_rule import REACHED_MESSAGE, VERDICTS, allowed_failures, quorum_of, sweep_of
from executions.core.outcomes import Outcome, committed, succeeded, wait
from executions.core.runs import StepRun
from executions.fanout import keys
from executions.handlers import NonRetryable
from executions.platform import crowding, metrics
from workflows import sudo
from workflows.dsl import ast
from workflows.dsl.paths import Path, PathNotFound, parse_path, render, resolve

ITEMS_INFO = """
    SELECT jsonb_typeof(p.data #> %(path)s) AS kind,
           CASE WHEN jsonb_typeof(p.data #> %(path)s) = 'array' THEN jsonb_array_length(p.data #> %(path)s) END,
           CASE WHEN jsonb_typeof(p.data #> %(path)s) = 'array' THEN octet_length((p.data #> %(path)s)::text) END
    FROM executions_payload p WHERE p.execution_id = %(execution)s AND p.name = %(source)s
"""

ITEM_VALUE = """
    SELECT p.data #> %(path)s FROM executions_payload p WHERE p.execution_id = %(execution)s AND p.name = %(source)s
"""

TARGET_BY_KEY = """
    SELECT d.current_version_id FROM workflows_workflowdefinition d
    WHERE d.workspace_id = %(workspace)s AND d.key = %(key)s
"""


TARGET_BY_HASH = """
    SELECT v.id, d.key FROM workflows_workflowversion v JOIN workflows_workflowdefinition d ON d.id = v.definition_id
    WHERE d.workspace_id = %(workspace)s AND v.hash = %(hash)s ORDER BY v.id
"""

# A fan-out row with the merge rule's verdicts (merge_rule.py).
FANOUT = f"""
    SELECT f.*, {VERDICTS}
    FROM executions_fanout f WHERE f.step_id = %(step)s
"""  # noqa: S608 - constant SQL fragments and fixed column names only

CREATE_FANOUT = """
    INSERT INTO executions_fanout (step_id, execution_id, spawner_vertex, merge_vertex, target_version_id, total,
        cursor, created, spawn_complete, succeeded, failed, cancelled, tolerates_failed, tolerates_cancelled,
        max_failure_ratio, allowed_failures, fail_fast, items_per_child, max_concurrency, free_slots,
        expected_bytes, min_successful, max_failures, created_at)
    VALUES (%(step)s, %(execution)s, %(vertex)s, %(merge)s, %(target)s, %(total)s, 0, 0, %(empty)s, 0, 0, 0,
            %(tol_failed)s, %(tol_cancelled)s, %(ratio)s, %(allowed)s, %(fail_fast)s, %(per_child)s,
            %(max_concurrency)s, coalesce(%(max_concurrency)s, 0), %(expected)s, %(min_successful)s,
            %(max_failures)s, now())
"""

# The list exploded once, at plan time, into one row per item (models.FanOutItem): PostgreSQL
# reads the stored list a single time here, never again per batch (issue 14 §7).
EXPLODE = """
    INSERT INTO executions_fanoutitem (step_id, item_index, item)
    SELECT %(step)s, (e.ord - 1)::int, e.value
    FROM executions_payload p, jsonb_array_elements(p.data #> %(path)s) WITH ORDINALITY AS e(value, ord)
    WHERE p.execution_id = %(parent)s AND p.name = %(source)s AND e.ord > %(cursor)s
    ON CONFLICT DO NOTHING
"""

# Whether the item at the cursor is exploded (a fan-out planned before the item rows existed
# is exploded when its spawner next runs). Item rows are keyed by item, not child: with
# itemsPerChild, child i has items [i * per, (i + 1) * per).
HAS_ITEM = "SELECT EXISTS (SELECT 1 FROM executions_fanoutitem WHERE step_id = %(step)s AND item_index = %(cursor)s)"

# One batch, by key: as JSON text (the default itemInput: the item), or decoded (a template);
# with each item's itemKey (its JSON type and text: keys.py; NULL when the vertex has none).
BATCH_ITEMS = """
    SELECT item_index, item::text, jsonb_typeof(item #> %(key)s::text[]), item #>> %(key)s::text[]
    FROM executions_fanoutitem
    WHERE step_id = %(step)s AND item_index >= %(lo)s AND item_index < %(hi)s ORDER BY item_index
"""
BATCH_VALUES = """
    SELECT item_index, item, jsonb_typeof(item #> %(key)s::text[]), item #>> %(key)s::text[]
    FROM executions_fanoutitem
    WHERE step_id = %(step)s AND item_index >= %(lo)s AND item_index < %(hi)s ORDER BY item_index
"""

# Items spawned leave the store in the transaction that advances the cursor past them; a
# failFast stop drops the rest.
DROP_ITEMS = """
    DELETE FROM executions_fanoutitem WHERE step_id = %(step)s AND item_index >= %(lo)s AND item_index < %(hi)s
"""

# maxConcurrency: the slots left after a batch, and where a release starts looking.
SLOTS = """
    UPDATE executions_fanout SET free_slots = %(free)s, release_cursor = %(release_cursor)s WHERE step_id = %(step)s
"""

# The spawner's batch transaction locks its fan-out row first (lock order: a child's rows, then
# the fan-out, then the parent's steps), so a child finishing meanwhile waits, then sees the
# children of the batch and their held steps.
LOCK_OWN_FANOUT = "SELECT step_id FROM executions_fanout WHERE step_id = %(step)s FOR UPDATE"

ADVANCE = """
    UPDATE executions_fanout SET cursor = %(cursor)s, created = created + %(created)s,
                                 spawn_complete = %(cursor)s >= total
    WHERE step_id = %(step)s
"""

# The spawner step of a merge's execution.

def items_source(items: str) -> tuple[str, list[str]]:
    """(payload name, JSON path inside it) for a SPAWNER ``items`` path."""
    return payload_path(parse_path(items))


def payload_path(path: Path) -> tuple[str, list[str]]:
    """Where a context path lives: the payload (``input`` or a vertex's output) and the JSON
    path inside it, as ``#>`` takes it."""
    if path.root == "input":
        return payloads.INPUT, [str(s) for s in path.segments[1:]]
    return str(path.step_reference()), [str(s) for s in path.segments[3:]]


def _fetch_one(cursor: Any, sql: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
    cursor.execute(sql, params)
    row: tuple[Any, ...] | None = cursor.fetchone()
    return row


# --- spawning ---------------------------------------------------------------------------------

def spawn(step: StepRun) -> Outcome:
    vertex = cast(ast.Spawner, step.vertex)
    with step.transaction() as tx:
        fan = fanout_row(tx.cursor, step.step_id)
    if fan is None:
        try:
            with step.transaction() as tx:
                fan = _plan(tx.cursor, step, vertex)
        except _NoRoom as full:
            return _wait_for_room(full.reason)
    elif fan["cursor"] < fan["total"]:
        with step.transaction() as tx:
            _explode(tx.cursor, step, vertex, fan)
    target = versions.get(fan["target_version_id"])
    start = target.workflow.vertices[target.workflow.start]
    cursor_at = slice_from = fan["cursor"]
    walked_from, created = cursor_at, 0
    handed = step.state.get(SLICE)
    if isinstance(handed, dict) and handed.get("attempt") == step.attempt:
        # A slice of the same run (a hand-over, below): its output counts the whole run.
        walked_from, created = int(handed["from"]), int(handed["created"])
    # A batch reads about SPAWN_BATCH items, however many go to one child.
    batch_size = max(1, int(settings.SB["SPAWN_BATCH"]) // vertex.items_per_child)
    handover_at = time.monotonic() + float(settings.SB["SPAWN_SLICE_SECONDS"])
    root = step.execution.root_id or step.execution.id
    while cursor_at < fan["total"]:
        deferral = _pressure_deferral(fan)
        if deferral:
            return deferral
        crowded = cursor_at > slice_from and crowding.others_waiting(root)
        if cursor_at > slice_from and (time.monotonic() >= handover_at or crowded):
            # A spawn longer than a drain task may run: hand the step back (READY, due now,
            # no attempt used) so a drain can end; it resumes at the committed cursor. Also
            # after a batch while another root's steps wait for a thread of this drain: the
            # spawner's thread is theirs now, and the fair claim serves it again with every
            # other flow (platform/crowding.py; issue 30).
            why = " (other work waited for a thread)" if crowded else ""
            return wait(seconds=0, reason=f"spawning: handed over at {cursor_at:,} of {fan['total']:,} items{why}",
                        state={SLICE: {"attempt": step.attempt, "from": walked_from, "created": created}})
        hi = min(cursor_at + batch_size, fan["total"])
        # maxConcurrency as the fan-out row has it (an operator's edit overrides the version's, issue 31)
        prelock = (LOCK_OWN_FANOUT, {"step": step.step_id}) if fan["max_concurrency"] is not None else None
        with step.transaction(prelock=prelock) as tx:
            fan = cast(dict[str, Any], fanout_row(tx.cursor, step.step_id))
            stopping = fan["stops"]  # failFast's merge failed, or a quorum was reached (merge_rule.py)
            paused = not stopping and pauses.tree_paused(tx.cursor, step.execution.id)
            if not (stopping or paused):
                inserted = _insert_batch(tx.cursor, step, vertex, target, start, cursor_at, hi)
                tx.cursor.execute(DROP_ITEMS, {"step": step.step_id, "lo": cursor_at * vertex.items_per_child,
                                               "hi": hi * vertex.items_per_child})
                tx.cursor.execute(ADVANCE, {"cursor": hi, "created": inserted, "step": step.step_id})
                metrics.children_created(inserted)
        if paused:  # issue 31: a paused tree spawns nothing more; the resume goes on at the cursor
            return wait(seconds=0, reason=f"paused: spawned {cursor_at:,} of {fan['total']:,} items",
                        state={SLICE: {"attempt": step.attempt, "from": walked_from, "created": created}})
        if stopping:
            if _stop_for_fail_fast(step, vertex, cursor_at):
                # A merge that failed while this spawner ran (a re-opened one, S28) swept the
                # children before this spawner's last batch: those are cancelled here (S18).
                cause, message = sweep_of(fan, f"cancelled: failFast stopped spawner '{vertex.id}'")
                cancel.cancel_descendants(step.execution.id, spawner=vertex.id, cause=cause, message=message)
                return committed()
            continue  # a retry of the failed children re-opened the fan-out meanwhile (S28)
        created += inserted
        cursor_at = hi
    # Items walked this run that already had a child (a redelivery) were re-linked, not re-created.
    return succeeded({"children": fan["total"], "created": created, "relinked": fan["total"] - walked_from - created})


def _stop_for_fail_fast(step: StepRun, vertex: ast.Spawner, cursor_at: int) -> bool:
    """S18: the failFast merge has failed, so the children not yet created never will be —
    unless a retry of the failed children re-opens the fan-out (S28). Decided under the
    fan-out row's lock (taken before the step's, as the lock order wants), and the step ends
    SUCCEEDED in the same transaction: a retry, which holds that lock while it re-runs the
    children, either finds the spawner stopped (and re-opens it) or has re-opened the
    fan-out before the spawner looks (which then spawns on). Returns whether it stopped.

    The step stores no output here, and the stop is said in its events instead: an output
    payload would take a payload-usage shard row after the fan-out row, where children's
    commits take them in the other order (seen: a deadlock)."""
    with step.transaction(prelock=(LOCK_OWN_FANOUT, {"step": step.step_id})) as tx:
        fan = cast(dict[str, Any], fanout_row(tx.cursor, step.step_id))
        if not fan["stops"]:
            return False
        # The items left go; a re-opened spawner explodes them again from the stored list.
        tx.cursor.execute(DROP_ITEMS, {"step": step.step_id, "lo": cursor_at * vertex.items_per_child,
                                       "hi": fan["total"] * vertex.items_per_child})
        state.note(tx.cursor, [(step.execution.id, step.step_id, vertex.id, step.attempt,
                                f"{REACHED_MESSAGE}: stopped spawning after {cursor_at:,} of {fan['total']:,} items"
                                if fan["reached"] else
                                f"{STOPPED}: the merge failed after {cursor_at:,} of {fan['total']:,} items")])
        tx.finish(succeeded())
    return True


STOPPED = "failFast stopped spawning"


SLICE = "spawn_slice"  # step state: where this run began and what it created, across hand-overs


def _explode(cursor: Any, step: StepRun, vertex: ast.Spawner, fan: dict[str, Any]) -> None:
    """Store the items from the cursor on as rows, unless they are stored already."""
    if fan["cursor"] >= fan["total"]:
        return
    first_item = fan["cursor"] * vertex.items_per_child
    row = _fetch_one(cursor, HAS_ITEM, {"step": step.step_id, "cursor": first_item})
    if row and row[0]:
        return
    source, path = items_source(vertex.items)
    cursor.execute(EXPLODE, {"step": step.step_id, "path": path, "parent": step.execution.id, "source": source,
                             "cursor": first_item})


def _pressure_deferral(fan: dict[str, Any]) -> Outcome | None:
    """S7, between batches: above the high-water mark a started fan-out waits (a durable
    timer, no attempt used) — but leaving out the bytes it wrote itself (its expected bytes
    in the share of items spawned), so it never waits on its own children's inputs."""
    with connection.cursor() as cursor:
        pressure = payloads.pressure(cursor)
    own = fan["expected_bytes"] * fan["cursor"] // fan["total"] if fan["total"] else 0
    others = payloads.Pressure(max(0, pressure.used_bytes - own), pressure.capacity_bytes, pressure.high_water)
    if not others.above_high_water:
        return None
    return _wait_for_room(pressure.describe())


class _NoRoom(Exception):
    """The plan found that the fan-out's expected bytes do not fit now (nothing written)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def _wait_for_room(reason: str) -> Outcome:
    seconds = float(settings.SB["PAYLOAD_DEFER_SECONDS"])
    return wait(seconds=seconds, reason=f"payload pressure: {reason}; fan-out deferred, re-checked every {seconds:g}s")


def fanout_row(cursor: Any, step_id: int) -> dict[str, Any] | None:
    cursor.execute(FANOUT, {"step": step_id})
    row = cursor.fetchone()
    if row is None:
        return None
    return dict(zip([c.name for c in cursor.description], row, strict=True))


def _plan(cursor: Any, step: StepRun, vertex: ast.Spawner) -> dict[str, Any]:
    """First run: count, resolve, reserve, record (the plan and the items, one row each).
    Raises NonRetryable (nothing written)."""
    source, path = items_source(vertex.items)
    info = _fetch_one(cursor, ITEMS_INFO, {"path": path, "execution": step.execution.id, "source": source})
    where = "the execution input" if source == payloads.INPUT else f"the output of step '{source}'"
    if info is None:
        raise NonRetryable(f"items {vertex.items}: {where} is empty (no payload stored)")
    kind, total, expected = info
    if kind is None:
        raise NonRetryable(f"items {vertex.items}: nothing there in {where}")
    if kind != "array":
        raise NonRetryable(f"items {vertex.items}: is a JSON {kind}, not a list")
    total = -(-total // vertex.items_per_child)  # children, not items: one per batch of itemsPerChild
    _must_fit(cursor, total, expected)
    target_id = _target_version(cursor, step, vertex)
    try:
        quotas.reserve(cursor, step.execution.workspace_id, total)
    except quotas.QuotaExceeded as error:
        raise NonRetryable(str(error)) from error
    merge = step.version.workflow.merge_for(vertex.id)
    params = {
        "step": step.step_id, "execution": step.execution.id, "vertex": vertex.id,
        "merge": merge.id if merge else None, "target": target_id, "total": total, "empty": total == 0,
        "tol_failed": bool(merge and "FAILED" in merge.tolerate_child_failures),
        "tol_cancelled": bool(merge and "CANCELLED" in merge.tolerate_child_failures),
        "ratio": merge.max_failure_ratio if merge else 1.0,
        "allowed": allowed_failures(merge.max_failure_ratio if merge else 1.0, total,
                                    merge.max_failures if merge else None),
        "max_failures": merge.max_failures if merge else None,
        "fail_fast": bool(merge and merge.fail_fast), "expected": expected,
        "per_child": vertex.items_per_child, "max_concurrency": vertex.max_concurrency, "min_successful": None,
    }
    if merge is not None and merge.quorum:  # the quorum as the tolerance (merge_rule.py)
        needed = cast(int, quorum_of(merge.min_successful, merge.min_successful_ratio, total))
        params.update(tol_failed=True, tol_cancelled=True, allowed=max(total - needed, 0), fail_fast=True,
                      min_successful=needed)
    cursor.execute(CREATE_FANOUT, params)
    fan = cast(dict[str, Any], fanout_row(cursor, step.step_id))
    _explode(cursor, step, vertex, fan)
    return fan


def _must_fit(cursor: Any, total: int, expected: int) -> None:
    """S7, at plan time: a fan-out whose children's inputs (about the stored list's size)
    could not fit in the payload store even if it held nothing else fails now, with the
    numbers, instead of deferring for ever; one that does not fit beside what is stored now
    waits for retention (``_NoRoom``)."""
    pressure = payloads.pressure(cursor)
    if not total:
        return
    if expected > pressure.capacity_bytes:
        raise NonRetryable(f"payload store too small: needs {expected:,} bytes for {total:,} children's inputs, "
                           f"capacity {pressure.capacity_bytes:,} ({pressure.used_bytes:,} in use)")
    if pressure.above_high_water:
        raise _NoRoom(pressure.describe())
    if pressure.used_bytes + expected > pressure.capacity_bytes:
        raise _NoRoom(f"{pressure.describe()}; this fan-out needs {expected:,} more bytes")


def _target_version(cursor: Any, step: StepRun, vertex: ast.Spawner) -> int:
    workspace = step.execution.workspace_id
    if vertex.version:
        rows = _fetch_all(cursor, TARGET_BY_HASH, {"workspace": workspace, "hash": vertex.version})
        rows = [r for r in rows if vertex.workflow is None or r[1] == vertex.workflow]
        if not rows:
            owner = f" of workflow '{vertex.workflow}'" if vertex.workflow else ""
            raise NonRetryable(f"no version {vertex.version[:12]}{owner} in this workspace")
        if len(rows) > 1:  # as starts.resolve_version: the key must not depend on publishing order
            keys = ", ".join(sorted(f"'{row[1]}'" for row in rows))
            raise NonRetryable(f"version {vertex.version[:12]} belongs to several workflows ({keys}); "
                               "name the workflow too")
        _may_spawn(cursor, step, rows[0][1], pinned=True)
        return int(rows[0][0])
    row = _fetch_one(cursor, TARGET_BY_KEY, {"workspace": workspace, "key": vertex.workflow})
    if row is None:
        raise NonRetryable(f"no workflow '{vertex.workflow}' in this workspace")
    if row[0] is None:
        raise NonRetryable(f"workflow '{vertex.workflow}' has no published version")
    _may_spawn(cursor, step, str(vertex.workflow), pinned=False)
    return int(row[0])


def _may_spawn(cursor: Any, step: StepRun, target: str, *, pinned: bool) -> None:
    """S15: only a reserved (system) workflow may spawn children of a reserved workflow, and a
    reserved workflow spawns only reserved workflows or versions pinned by hash."""
    try:
        sudo.check_reserved_dependency(step.version.key, target=target, pinned=pinned)
        if sudo.is_reserved(target):
            sudo.require_engine_start(target, step.version.key, "a SPAWNER")
    except sudo.ReservedKeyDenied as error:
        raise NonRetryable(error.message) from error


def _fetch_all(cursor: Any, sql: str, params: dict[str, Any]) -> list[tuple[Any, ...]]:
    cursor.execute(sql, params)
    return list(cursor.fetchall())


def _insert_batch(cursor: Any, step: StepRun, vertex: ast.Spawner, target: versions.LoadedVersion,
                  start: ast.Vertex, lo: int, hi: int) -> int:
    """Create the children [lo, hi) that have none yet: the executions on their per-child key
    (S2), then the inputs and first steps of the ones just created (held beyond the fan-out's
    free slots: maxConcurrency). A child whose input cannot be rendered becomes a FAILED child
    with the reason (S17). A child is one item, or with itemsPerChild a batch of items."""
    bad: dict[int, str] = {}
    key = keys.key_path(vertex)
    if vertex.item_input == "$.item" and vertex.items_per_child == 1:
        cursor.execute(BATCH_ITEMS, {"step": step.step_id, "lo": lo, "hi": hi, "key": key})
        rows = cursor.fetchall()
        inputs: dict[int, str] = {row[0]: row[1] for row in rows}
    else:
        rows = _child_contexts(cursor, step, vertex, lo, hi, key)
        inputs, bad = _render_batch(cursor, step, vertex, [(row[0], row[1]) for row in rows])
    item_keys: dict[int, str] = {}
    if key is not None:
        item_keys, bad_keys = keys.split(vertex, [(row[0], row[2], row[3]) for row in rows])
        for index, why in bad_keys.items():  # a child without a usable key is a bad item (S17)
            inputs.pop(index, None)
            bad.setdefault(index, why)
    parent = step.execution
    created = records.insert_executions(cursor, [
        records.NewExecution(parent.workspace_id, target.definition_id, target.id, parent_id=parent.id,
                             root_id=parent.root_id or parent.id, spawned_by_id=step.step_id,
                             spawn_vertex=vertex.id, item_index=index, depth=parent.depth + 1,
                             item_key=item_keys.get(index), tags=parent.tags)
        for index in sorted([*inputs, *bad])
    ])
    good = [(child, cast(int, index)) for child, index in sorted(created, key=lambda c: c[1] or 0)
            if index in inputs]
    payloads.put_many(cursor, [(child, payloads.INPUT, inputs[index]) for child, index in good])
    held = _hold(cursor, step, [index for _, index in good], hi)
    records.insert_steps(cursor, [
        records.NewStep(child, parent.workspace_id, start.id, retry.max_attempts(start),
                        destination=getattr(start, "destination_name", None), held=index in held)
        for child, index in good
    ])
    failing = [(child, bad[cast(int, index)]) for child, index in created if index in bad]
    state.fail_executions(cursor, [child for child, _ in failing], errors=[error for _, error in failing],
                          started=[None] * len(failing))
    return len(created)


def _hold(cursor: Any, step: StepRun, indexes: list[int], hi: int) -> set[int]:
    """maxConcurrency: the new children (in item order) that must wait for a slot. The free
    slots go to the first ones; the rest are held, and the fan-out row (locked by this
    transaction) records what is left. No held child exists while a slot is free (a finishing
    child releases at once), so the release cursor may move past this batch. The fan-out row
    is locked by this transaction (the spawner's prelock), so its slots are current."""
    fan = cast(dict[str, Any], fanout_row(cursor, step.step_id))
    if fan["max_concurrency"] is None:  # none, or an operator's edit lifted it (issue 31)
        return set()
    # Locked already by the batch's prelock — unless an edit set a limit on a fan-out that had
    # none since the batch began (issue 31): then it is locked here, a rare exception to the
    # lock order (docs/architecture.md) that PostgreSQL's deadlock detection would settle.
    cursor.execute(LOCK_OWN_FANOUT, {"step": step.step_id})
    fan = cast(dict[str, Any], fanout_row(cursor, step.step_id))
    free = int(fan["free_slots"])
    runnable, held = indexes[:max(free, 0)], set(indexes[max(free, 0):])
    release_cursor = fan["release_cursor"]
    if runnable:
        release_cursor = min(held) if held else hi
    cursor.execute(SLOTS, {"free": free - len(runnable), "release_cursor": release_cursor, "step": step.step_id})
    return held


def _child_contexts(cursor: Any, step: StepRun, vertex: ast.Spawner, lo: int, hi: int,
                    key: list[str] | None) -> list[tuple[int, dict[str, Any], str | None, str | None]]:
    """Each child's own values for its itemInput: ``$.items``, ``$.index`` and
    ``$.firstItem`` (with one item per child also ``$.item``), read from the spawner's item
    rows by key: O(batch), however long the list; with its item key's type and text (one
    item per child only: the parser refuses itemKey with itemsPerChild)."""
    per = vertex.items_per_child
    cursor.execute(BATCH_VALUES, {"step": step.step_id, "lo": lo * per, "hi": hi * per, "key": key})
    rows = [(i, payloads.decode(value), kind, text) for i, value, kind, text in cursor.fetchall()]
    if per == 1:
        return [(index, {"item": item, "items": [item], "index": index, "firstItem": index}, kind, text)
                for index, item, kind, text in rows]
    groups: dict[int, list[Any]] = {}
    for item_index, item, _, _ in rows:  # in item order (BATCH_VALUES)
        groups.setdefault(item_index // per, []).append(item)
    return [(index, {"items": items, "index": index, "firstItem": index * per}, None, None)
            for index, items in sorted(groups.items())]


def _render_batch(cursor: Any, step: StepRun, vertex: ast.Spawner,
                  batch: list[tuple[int, dict[str, Any]]]) -> tuple[dict[int, str], dict[int, str]]:
    """Each child's input (JSON text), rendered from the itemInput template over its own
    values (``batch``: index → context), and the children whose input could not be
    rendered, with the reason. A context value (outside the child's) that is missing is the
    spawner's error, not a child's: it raises NonRetryable."""
    resolved: dict[str, Any] = {}

    def context_value(text: str) -> Any:
        # Paths outside the item are read once per batch, each as its own small value, so
        # a parent's large input is never loaded whole.
        if text not in resolved:
            parsed = parse_path(text)
            name, inner = payload_path(parsed)
            row = _fetch_one(cursor, ITEM_VALUE, {"path": inner, "execution": step.execution.id, "source": name})
            if row is None or row[0] is None:
                raise NonRetryable(f"itemInput: nothing at {text}")
            resolved[text] = payloads.decode(row[0])
        return resolved[text]

    inputs: dict[int, str] = {}
    bad: dict[int, str] = {}
    for index, local in batch:

        def lookup(text: str, local: dict[str, Any] = local) -> Any:
            path = parse_path(text)  # parsed once (paths.parse_path keeps them)
            return resolve(path, local) if path.root in local else context_value(text)

        try:
            inputs[index] = payloads.encode(render(vertex.item_input, {}, lookup))
        except (PathNotFound, payloads.PayloadError) as error:
            bad[index] = f"input could not be made from its {_what(vertex, index)}: {error}"
    return inputs, bad


def _what(vertex: ast.Spawner, index: int) -> str:
    if vertex.items_per_child == 1:
        return f"item (item {index})"
    first = index * vertex.items_per_child
    return f"items (child {index}: items {first} to {first + vertex.items_per_child - 1})"
