"""A drain's role among the live drains, and the lock that says it abstains (policy.py,
"Roles"): the drains alive are the holders of drain slots (slots.py), an abstaining drain
holds an ABSTAIN_CLASS lock in its slot too; both are read from pg_locks here, and only
here. What the claim needs of them is a plain number, ``Roles.sharers``: how many drains
divide each destination's limit (leases.claim, DESTINATION_BUDGETS)."""

from __future__ import annotations

import logging
import time

from django.db import DatabaseError, connection

from executions import kick
from executions.worker import policy, slots

log = logging.getLogger(__name__)

ROLE_CHECK_EVERY = 0.2  # seconds between looks at which drains are alive

# The live drains' slots, and the slots of those that abstain.
LIVE_DRAINS = """
    SELECT classid = %(abstain_class)s, objid::int FROM pg_locks
    WHERE locktype = 'advisory' AND classid IN (%(drain_class)s, %(abstain_class)s) AND objsubid = 2 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
"""


class Roles:
    """The role of the drain in ``slot`` (None: outside one — a test, a command — which does
    both kinds), looked up every ROLE_CHECK_EVERY, and its ABSTAIN_CLASS lock if it holds one
    (the backend pid that holds it: a reconnect loses session locks)."""

    def __init__(self, slot: int | None) -> None:
        self.slot = slot
        self.role: policy.Role = "both"
        self.live: set[int] = set()  # the live drains' slots, as last looked up
        self.abstaining: set[int] = set()  # ... and those of the ones that abstain
        self.checked_at = -ROLE_CHECK_EVERY
        self.abstaining_on: int | None = None

    def current(self) -> policy.Role:
        self._look()
        return self.role

    def sharers(self) -> int:
        """How many drains divide each destination's limit now: the live ones less those that
        abstain (this one as it stands now, the others as last looked up), at least one — a
        drain outside a slot counts the others alone, as if it were one of them."""
        self._look()
        others = len(self.abstaining - {self.slot})
        return max(1, len(self.live) - others - (self.abstaining_on is not None))

    def _look(self) -> None:
        now = time.monotonic()
        if now - self.checked_at < ROLE_CHECK_EVERY:
            return
        self.checked_at = now
        with connection.cursor() as cursor:
            cursor.execute(LIVE_DRAINS, {"drain_class": kick.ADVISORY_CLASS, "abstain_class": kick.ABSTAIN_CLASS})
            rows = cursor.fetchall()
        self.live = {slot for abstains, slot in rows if not abstains}
        self.abstaining = {slot for abstains, slot in rows if abstains}
        self.role = policy.role_of(self.slot, self.live)

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
            cursor.execute(slots.TRY_SLOT, {"class": kick.ABSTAIN_CLASS, "slot": self.slot})
            self.abstaining_on = slots.backend_pid() if cursor.fetchone()[0] else None

    def stop_abstaining(self) -> None:
        if self.abstaining_on is None:
            return
        held_on, self.abstaining_on = self.abstaining_on, None
        if slots.backend_pid() != held_on:
            return  # the session that held it is gone, and the lock with it
        try:
            with connection.cursor() as cursor:
                cursor.execute(slots.RELEASE_SLOT, {"class": kick.ABSTAIN_CLASS, "slot": self.slot})
        except DatabaseError:
            log.warning("could not stop abstaining (the connection is gone, so is the lock)")
