"""A drain's role among the live drains, and the lock that says it abstains (policy.py,
"Roles"): the drains alive are the holders of drain slots (slots.py), read from pg_locks;
an abstaining drain holds an ABSTAIN_CLASS lock in its slot. SHARERS counts the drains that
call — the live ones less those abstaining — for the claim, which divides each
destination's limit among them (leases.claim's ``sharers``).

The whole negotiation lives here and in policy.py; the claim only receives the count."""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, connection

from executions import kick
from executions.worker import policy, slots

log = logging.getLogger(__name__)

ROLE_CHECK_EVERY = 0.2  # seconds between looks at which drains are alive
ABSTAIN_CLASS = 7_318_002  # pg_locks.classid of the drains that take no destination step now

# How many drains share each destination's limit (at least one: a drain outside a slot, a
# test or a command, counts as one), read in the claim's own statement so that a drain
# starting or stopping to abstain is seen by the very next claim of every drain.
SHARERS = f"""
    SELECT count(*) FILTER (WHERE classid = {kick.ADVISORY_CLASS})
           - count(*) FILTER (WHERE classid = {ABSTAIN_CLASS})
    FROM pg_locks
    WHERE locktype = 'advisory' AND classid IN ({kick.ADVISORY_CLASS}, {ABSTAIN_CLASS}) AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""  # noqa: S608 - constant SQL

# The live drains' slots.
LIVE_DRAINS = """
    SELECT objid::int FROM pg_locks
    WHERE locktype = 'advisory' AND classid = %(class)s AND objsubid = 2 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


class Roles:
    """The role of the drain in ``slot`` (None: outside one — a test, a command — which does
    both kinds), looked up every ROLE_CHECK_EVERY, and its ABSTAIN_CLASS lock if it holds one
    (the backend pid that holds it: a reconnect loses session locks)."""

    def __init__(self, slot: int | None) -> None:
        self.slot = slot
        self.role: policy.Role = "both"
        self.checked_at = -ROLE_CHECK_EVERY
        self.abstaining_on: int | None = None

    def current(self) -> policy.Role:
        now = time.monotonic()
        if self.slot is not None and now - self.checked_at >= ROLE_CHECK_EVERY:
            self.checked_at = now
            with connection.cursor() as cursor:
                cursor.execute(LIVE_DRAINS, {"class": kick.ADVISORY_CLASS})
                live = {row[0] for row in cursor.fetchall()}
            self.role = policy.role_of(self.slot, live)
        return self.role

    def abstain(self, on: bool) -> None:
        """Abstain from destinations now (``on``), or stop."""
        if on:
            self._abstain()
        else:
            self.stop_abstaining()

    def _abstain(self) -> None:
        if self.abstaining_on is not None and self.abstaining_on == slots.backend_pid():
            return  # held, on the session that is still ours
        with connection.cursor() as cursor:
            cursor.execute(slots.TRY_SLOT, {"class": ABSTAIN_CLASS, "slot": self.slot})
            self.abstaining_on = slots.backend_pid() if cursor.fetchone()[0] else None

    def stop_abstaining(self) -> None:
        if self.abstaining_on is None:
            return
        held_on, self.abstaining_on = self.abstaining_on, None
        if slots.backend_pid() != held_on:
            return  # the session that held it is gone, and the lock with it
        try:
            with connection.cursor() as cursor:
                cursor.execute(slots.RELEASE_SLOT, {"class": ABSTAIN_CLASS, "slot": self.slot})
        except DatabaseError:
            log.warning("could not stop abstaining (the connection is gone, so is the lock)")
