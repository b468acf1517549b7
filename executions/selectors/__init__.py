"""The read layer: every query the API, the operator UI and the CLI make to show state.
Views parse their input, call a selector (or a service, for writes) and render; they build
no queries of their own.

One module per subject, each read bounded and indexed (a 100,000-child fan-out costs the
same few queries as a small one):

* ``executions``   one execution, the list pages, lineage (one recursive query), chain links,
                   the API's detail;
* ``children``     one parent's children: keyset pages (API), numbered pages by index or
                   duration (UI);
* ``steps``        an execution's steps and events;
* ``fanouts``      fan-out progress with the MERGE rule's verdicts computed by the database
                   (merge_rule.py), child counts for a page of executions, the long tail;
* ``fanout_health`` the execution list's mini bars: fan-out counters summed per parent;
* ``payloads``     stored inputs and outputs, bounded previews;
* ``destinations`` destinations, their live counts and free slots;
* ``schedules``    cron schedules by name;
* ``waits``        what a step waits for (a callback, an event), a waiting step's token;
* ``bulk``         bulk operations' progress and skipped children; a parent's error groups.
* ``identity``     what tells children apart: item previews, failed siblings, an edited
                   input's before/after.
* ``pauses``       what holds an execution or a workspace paused, its steps in flight; fan-out edits.

Workflow definitions and versions are read in ``workflows/selectors.py``, with the app that
owns those tables. Raw SQL here is a named module-level constant with a one-line description;
callers pass values, never SQL.
"""

from executions.selectors import (
    bulk,
    children,
    destinations,
    executions,
    fanout_health,
    fanouts,
    identity,
    pauses,
    payloads,
    schedules,
    steps,
    waits,
)

__all__ = ["bulk", "children", "destinations", "executions", "fanout_health", "fanouts", "identity", "pauses",
           "payloads", "schedules", "steps", "waits"]
