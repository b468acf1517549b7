"""The fair claim of plain steps (issue 30; docs/architecture.md, "Scheduling").

Deficit round-robin at claim time, in three levels, over the ready *due* steps only:

1. **Workspaces, by plan weight.** The workspaces with due work are found by a loose index
   scan of ``step_claim_fair`` (one descent per workspace, never a read of its steps), at most
   as many as the claim has room for (at least ``WINDOW``), from a cursor past the last
   workspace the previous window reached. The room is
   divided in proportion to their weights plus the credit each is owed (``FairShare.deficit``,
   below one step: what rounding kept from it last time); a workspace left with nothing due
   loses its credit (DRR), and what it could not use goes to the others (work-conserving: a
   workspace alone takes everything).
2. **Priorities, strictly within a workspace, with aging.** Per priority class (1-5), the roots
   with due work are found the same way; a class counts one level higher per
   ``SB_PRIORITY_AGING_SECONDS`` its longest-waiting root head has waited (database time) —
   the head of a root being its oldest due step. The best level is served first (a tie: the
   higher priority), the next class only with what the first could not use.
3. **Roots, equally, within a class.** The class's share is split evenly over its roots with
   due work (at most the share of them per claim, from the workspace's ``root_cursor``), so
   one execution's million children and a small execution started after them advance side by
   side; splitting work over many roots does not enlarge a workspace's share (level 1 is
   counted first). Within a root, oldest due first.

Candidates are locked ``FOR UPDATE SKIP LOCKED`` as in every claim (another claimer's rows are
its work). The state (cursors, credits) is written only by the claimer holding the
``FairClock`` row (``SKIP LOCKED``: one that finds it held claims from the state as it is,
rather than wait), and only when there was a choice to make — a claim with one workspace and
one root due writes nothing, so a lone fan-out pays a few index descents and no writes.
"""

from __future__ import annotations

import heapq
import math
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from executions.core import pauses
from executions.core.records import HELD_UNTIL, PRIORITIES

NIL = uuid.UUID(int=0)
TOP = uuid.UUID(int=(1 << 128) - 1)
# The fewest workspaces a claim looks at: a claim of one step still divides it by the credits
# of several, so small claims keep the weights too (a loose-scan descent each).
WINDOW = 16
PASSES = 6  # rounds of takes per claim: each offers what earlier rounds left to flows that still have work

# A due, ready plain step: the predicate of step_claim_fair (plain steps alone carry a
# ``workspace_id``, implied by every statement's condition on it), and due now. No statement
# says ``destination_id IS NULL``: then no other index's predicate is implied, and the planner
# cannot walk step_claim_free (due order) for a probe, whatever its statistics say — after a
# TRUNCATE or a sudden million rows they lag, and a probe that walks every due step is O(N).
_DUE = f"""s.status = 'READY' AND s.due_at < '{HELD_UNTIL}'::timestamptz AND s.due_at <= now()"""
# What a take locks: a due step that is not paused (issue 31, pauses.NOT_PAUSED: one InitPlan
# while nothing is paused). Only the takes test it: in the loose scans of DUE_FLOWS the
# predicate's subplan made every probe a walk (a claim of a 3-item fan-out took seconds); a
# paused root they find yields nothing to its take, and the cursors move past it.
_TAKEABLE = f"""{_DUE} AND {pauses.not_paused("s")}"""

# The loose index scans of step_claim_fair that find a claim's flows, one descent each.
_NEXT_WORKSPACE = f"""
        (SELECT s.workspace_id, {{wrapped}} AS wrapped FROM executions_step s
         WHERE {{guard}} AND {_DUE} AND s.workspace_id > {{after}} AND s.workspace_id <= {{upto}}
         ORDER BY s.workspace_id LIMIT 1)
"""  # noqa: S608 - constant SQL
_NEXT_ROOT = f"""
        (SELECT s.root_id, extract(epoch FROM now() - s.due_at)::float AS waited, {{wrapped}} AS wrapped
         FROM executions_step s
         WHERE {{guard}} AND {_DUE} AND s.workspace_id = {{ws}} AND s.priority = {{p}} AND s.root_id > {{after}}
           AND s.root_id <= {{upto}}
         ORDER BY s.root_id, s.due_at LIMIT 1)
"""  # noqa: S608 - constant SQL

# A claim's flows, in one statement: ``w``, up to ``k`` workspaces with due plain steps in id
# order from past the cursor the last window stored (FairClock) round to it, with each one's
# weight and the scheduler's memory of it; then ``r``, per workspace and priority class, up to
# the workspace's even part of the room of roots with due steps, in id order from past its
# root cursor round to it, each with how long its head — its oldest due step — has waited.
# One row per root (a workspace's columns repeated), in window order.
DUE_FLOWS = f"""
    WITH RECURSIVE c AS (
        SELECT coalesce((SELECT workspace_cursor FROM executions_fairclock WHERE id = 1), 0) AS cur
    ), w(ws, n, wrapped) AS (
        SELECT h.workspace_id, 1, h.wrapped FROM c CROSS JOIN LATERAL (
            {_NEXT_WORKSPACE.format(guard="true", wrapped="false", after="c.cur", upto="%(top)s")}
            UNION ALL
            {_NEXT_WORKSPACE.format(guard="true", wrapped="true", after="-1", upto="c.cur")}
            LIMIT 1) h
        UNION ALL
        SELECT h.workspace_id, w.n + 1, h.wrapped FROM w CROSS JOIN c CROSS JOIN LATERAL (
            {_NEXT_WORKSPACE.format(guard="true", wrapped="w.wrapped", after="w.ws",
                                    upto="CASE WHEN w.wrapped THEN c.cur ELSE %(top)s END")}
            UNION ALL
            {_NEXT_WORKSPACE.format(guard="NOT w.wrapped", wrapped="true", after="-1", upto="c.cur")}
            LIMIT 1) h
        WHERE w.n < %(k)s
    ), q AS MATERIALIZED (
        SELECT w.n, w.ws, p.weight, coalesce(f.deficit, 0) AS deficit,
               coalesce(f.root_cursor, %(nil)s::uuid) AS cur, c.cur AS window_cursor,
               greatest(1, ceil(%(room)s::numeric / count(*) OVER ()))::int AS k
        FROM c, w JOIN workflows_workspace ws ON ws.id = w.ws JOIN workflows_plan p ON p.id = ws.plan_id
        LEFT JOIN executions_fairshare f ON f.workspace_id = w.ws
    ), r(ws, p, root, waited, n, wrapped, cur, k) AS (
        SELECT q.ws, cl.p, h.root_id, h.waited, 1, h.wrapped, q.cur, q.k
        FROM q CROSS JOIN unnest(%(priorities)s::smallint[]) AS cl(p)
        CROSS JOIN LATERAL (
            {_NEXT_ROOT.format(guard="true", wrapped="false", ws="q.ws", p="cl.p", after="q.cur",
                               upto="%(top_root)s::uuid")}
            UNION ALL
            {_NEXT_ROOT.format(guard="true", wrapped="true", ws="q.ws", p="cl.p", after="%(nil)s::uuid",
                               upto="q.cur")}
            LIMIT 1) h
        UNION ALL
        SELECT r.ws, r.p, h.root_id, h.waited, r.n + 1, h.wrapped, r.cur, r.k
        FROM r CROSS JOIN LATERAL (
            {_NEXT_ROOT.format(guard="true", wrapped="r.wrapped", ws="r.ws", p="r.p", after="r.root",
                               upto="CASE WHEN r.wrapped THEN r.cur ELSE %(top_root)s::uuid END")}
            UNION ALL
            {_NEXT_ROOT.format(guard="NOT r.wrapped", wrapped="true", ws="r.ws", p="r.p",
                               after="%(nil)s::uuid", upto="r.cur")}
            LIMIT 1) h
        WHERE r.n < r.k
    )
    SELECT q.ws, q.weight, q.deficit, q.cur, q.window_cursor, r.p, r.root, r.waited
    FROM q JOIN r ON r.ws = q.ws
    ORDER BY q.n, r.p, r.n
"""  # noqa: S608 - constant SQL

# A step that must be claimed alone (leases.py, "Isolation"); unqualified, for every claim's statement.
SUSPECT = "(lease_expiries > 0 AND attempt >= max_attempts)"

# Up to ``n`` due steps of each (workspace, priority, root), oldest due first, locked. Ties of
# due time (steps one commit made due: a child's next step and the ancestor's MERGE its end woke)
# go to the deeper execution: a merge then judges the latest state of its children, and a tree
# is worked depth first. Without the ``depth`` key the heap's order decided — where the free
# space map put each row's new version — and that changed from one run to the next.
TAKE = f"""
    SELECT c.id, c.suspect, q.o FROM unnest(%(ws)s::bigint[], %(priorities)s::smallint[], %(roots)s::uuid[],
                                            %(ns)s::int[]) WITH ORDINALITY AS q(ws, p, root, n, o)
    CROSS JOIN LATERAL (
        SELECT s.id, {SUSPECT} AS suspect FROM executions_step s
        WHERE {_TAKEABLE} AND s.workspace_id = q.ws AND s.priority = q.p AND s.root_id = q.root
        ORDER BY s.due_at, s.depth DESC LIMIT q.n
        FOR UPDATE OF s SKIP LOCKED) c
    ORDER BY q.o
"""  # noqa: S608 - constant SQL

# The rest of the room, from the workspaces whose windows of roots were full: their roots
# beyond the window (or whose steps another claimer holds, SKIP LOCKED), in index order, not
# the ones this claim has locked already. Without it, two drains claiming at once look at the
# same roots, and the second — finding their steps locked — would claim nothing.
BEYOND = f"""
    SELECT c.id, c.suspect FROM unnest(%(ws)s::bigint[], %(ns)s::int[]) WITH ORDINALITY AS q(ws, n, o)
    CROSS JOIN LATERAL (
        SELECT s.id, {SUSPECT} AS suspect FROM executions_step s
        WHERE {_TAKEABLE} AND s.workspace_id = q.ws AND s.id <> ALL(%(taken)s::bigint[])
        ORDER BY s.workspace_id, s.priority, s.root_id, s.due_at, s.depth DESC LIMIT q.n
        FOR UPDATE OF s SKIP LOCKED) c
    ORDER BY q.o
"""  # noqa: S608 - constant SQL

# No planner switch: every statement here is index-driven by its shape. Each probe is an
# ORDER BY of step_claim_fair's leading keys with LIMIT 1 under equalities on the keys before
# (a loose index scan: one descent), and every condition implies the index's predicate
# (``workspace_id`` is set on plain steps alone) while none says ``destination_id IS NULL``, so
# no other partial index — step_claim_free, in due order, whose walk is O(due steps) — can
# serve it. tests/integration/test_fair_claim_plans.py checks the plans at a million ready
# steps with analysed statistics, and with statistics that predate the fill (never analysed;
# analysed while the table was empty, as after a TRUNCATE).

LOCK_CLOCK = "SELECT 1 FROM executions_fairclock WHERE id = 1 FOR UPDATE SKIP LOCKED"
CREATE_CLOCK = """INSERT INTO executions_fairclock (id, workspace_cursor) VALUES (1, 0)
                  ON CONFLICT DO NOTHING RETURNING 1"""
MOVE_CLOCK = "UPDATE executions_fairclock SET workspace_cursor = %(cursor)s WHERE id = 1"
SAVE_SHARES = """
    INSERT INTO executions_fairshare (workspace_id, deficit, root_cursor)
    SELECT * FROM unnest(%(ws)s::bigint[], %(deficits)s::float[], %(cursors)s::uuid[])
    ON CONFLICT (workspace_id) DO UPDATE SET deficit = excluded.deficit, root_cursor = excluded.root_cursor
"""


def aging_seconds() -> float:
    return float(settings.SB["PRIORITY_AGING_SECONDS"])


@dataclass
class Root:
    id: uuid.UUID
    priority: int
    live: bool = True  # it may have more due steps


@dataclass
class Flow:
    """A workspace with due work, as this claim sees it."""

    workspace: int
    weight: int
    deficit: float
    root_cursor: uuid.UUID
    classes: list[list[Root]] = field(default_factory=list)  # best level first
    visited: int = 0  # roots found
    window: int = 1  # roots looked for per priority class
    served: uuid.UUID | None = None  # the last root that got steps
    credit: float = 0.0
    taken: int = 0
    live: bool = True

    def next_requests(self, n: int) -> list[tuple[Root, int]]:
        """Split ``n`` over the roots of the best class that still has live ones."""
        for roots in self.classes:
            live = [root for root in roots if root.live]
            if live:
                each, extra = divmod(n, len(live))
                return [(root, each + (i < extra)) for i, root in enumerate(live) if each + (i < extra)]
        self.live = False
        return []


def claim_plain(cursor: Any, room: int) -> list[tuple[int, bool]]:
    """Lock up to ``room`` due plain steps, fairly (see the module doc); returns ``(id,
    suspect)`` per candidate, in the order they were chosen."""
    window = max(room, WINDOW)
    flows, after = _due_flows(cursor, room, window)
    if not flows:
        return []
    rows = _take(cursor, flows, room)
    if (len(flows) > 1 or any(f.visited > 1 for f in flows)) and _hold_clock(cursor):
        _save(cursor, flows, window_full=len(flows) == window, after=after)
    return rows


def _hold_clock(cursor: Any) -> bool:
    """Whether this claimer may write the scheduler's state (it holds the clock row); a
    claimer that finds it held claims from the state as it is, rather than wait."""
    cursor.execute(LOCK_CLOCK)
    if cursor.fetchone() is not None:
        return True
    cursor.execute(CREATE_CLOCK)  # the first claim ever (or after a flush); held by someone: nothing
    return cursor.fetchone() is not None


def _due_flows(cursor: Any, room: int, window: int) -> tuple[list[Flow], int]:
    """The workspaces with due work (up to ``window``, from past the stored cursor round to
    it), each with its priority classes, best level first, and their roots in cursor order;
    and the stored cursor."""
    cursor.execute(DUE_FLOWS, {"top": 2**63 - 1, "top_root": TOP, "k": window, "room": room, "nil": NIL,
                               "priorities": list(PRIORITIES)})
    flows: dict[int, Flow] = {}
    by_class: dict[tuple[int, int], list[Root]] = {}
    waited: dict[tuple[int, int], float] = {}
    after = 0
    for ws, weight, deficit, root_cursor, window_cursor, priority, root, seconds in cursor.fetchall():
        after = int(window_cursor)
        if ws not in flows:
            flows[ws] = Flow(int(ws), int(weight), float(deficit), root_cursor)
        key = (ws, int(priority))
        by_class.setdefault(key, []).append(Root(root, int(priority)))
        waited[key] = max(waited.get(key, 0.0), float(seconds))
    aging = aging_seconds()
    k = max(1, math.ceil(room / len(flows))) if flows else 1  # as DUE_FLOWS's ``k``
    for flow in flows.values():
        flow.window = k
        keys = sorted((key for key in by_class if key[0] == flow.workspace),
                      key=lambda key: (level(key[1], waited[key], aging), key[1]))
        flow.classes = [by_class[key] for key in keys]
        flow.visited = sum(len(roots) for roots in flow.classes)
    return list(flows.values()), after


def level(priority: int, waited: float, aging: float) -> int:
    """A priority raised one level per ``aging`` seconds waited, up to 1."""
    if aging <= 0:
        return priority
    return max(1, priority - math.floor(max(waited, 0.0) / aging))


def split(flows: Sequence[Flow], n: int, *, owed: bool = True) -> list[int]:
    """``n`` claims over the flows in proportion to their weights — with ``owed``, plus the
    credit each is owed, and each flow's ``credit`` set — largest remaining credit first, so
    the shares are exact over successive claims."""
    total = sum(f.weight for f in flows)
    credits = [(f.deficit if owed else 0.0) + f.weight * n / total for f in flows]
    if owed:
        for f, credit in zip(flows, credits, strict=True):
            f.credit = credit
    shares = [0] * len(flows)
    heap = [(-credit, i) for i, credit in enumerate(credits)]
    heapq.heapify(heap)
    for _ in range(n):
        credit, i = heapq.heappop(heap)
        shares[i] += 1
        heapq.heappush(heap, (credit + 1, i))
    return shares


def _take(cursor: Any, flows: list[Flow], room: int) -> list[tuple[int, bool]]:
    """Take rounds of steps until the room is used or no flow has more (work-conserving)."""
    rows: list[tuple[int, bool]] = []
    for round_ in range(PASSES):
        live = [f for f in flows if f.live]
        left = room - len(rows)
        if left <= 0 or not live:
            break
        shares = split(live, left, owed=round_ == 0)
        requests = [(f, root, n) for f, share in zip(live, shares, strict=True) if share
                    for root, n in f.next_requests(share)]
        if not requests:
            continue
        cursor.execute(TAKE, {"ws": [f.workspace for f, _, _ in requests],
                              "priorities": [r.priority for _, r, _ in requests],
                              "roots": [r.id for _, r, _ in requests], "ns": [n for _, _, n in requests]})
        got = cursor.fetchall()
        counts = [0] * len(requests)
        for step_id, suspect, o in got:
            counts[o - 1] += 1
            rows.append((step_id, bool(suspect)))
        for (f, root, n), count in zip(requests, counts, strict=True):
            f.taken += count
            if count:
                f.served = root.id
            if count < n:
                root.live = False
    rows += _beyond(cursor, flows, room - len(rows), rows)
    for f in flows:  # DRR: a flow that ran out of work keeps no credit
        f.deficit = max(0.0, f.credit - f.taken) if f.live and any(r.live for c in f.classes for r in c) else 0.0
    return rows


def _beyond(cursor: Any, flows: list[Flow], left: int, rows: list[tuple[int, bool]]) -> list[tuple[int, bool]]:
    """Room the rounds left, from workspaces that may have more roots than their window showed."""
    wide = [f for f in flows if any(len(roots) >= f.window for roots in f.classes)]
    if left <= 0 or not wide:
        return []
    shares = split(wide, left, owed=False)
    cursor.execute(BEYOND, {"ws": [f.workspace for f in wide], "ns": shares, "taken": [r[0] for r in rows]})
    return [(step_id, bool(suspect)) for step_id, suspect in cursor.fetchall()]


def _save(cursor: Any, flows: list[Flow], *, window_full: bool, after: int) -> None:
    """Remember the credits and cursors where they matter: several workspaces, several roots."""
    changed = [f for f in flows if len(flows) > 1 or (f.visited > 1 and f.served is not None)]
    if changed:
        cursor.execute(SAVE_SHARES, {"ws": [f.workspace for f in changed],
                                     "deficits": [f.deficit if len(flows) > 1 else 0.0 for f in changed],
                                     "cursors": [(f.served if f.visited > 1 else None) or f.root_cursor
                                                 for f in changed]})
    cursor_to = flows[-1].workspace if window_full else 0
    if cursor_to != after:
        cursor.execute(MOVE_CLOCK, {"cursor": cursor_to})
