"""The Rate Limits page's history of each destination's flow (issue 29 §2, issue 33 §2), kept
small so that its charts read a few indexed rows per destination, never the steps:

- ``DestinationLimit``: the limit in force, one row each time it changes (a trigger on the
  destination row writes it, migration 0025, whoever changes the limit: an operator, adaptive
  mode's windows, a cooldown's ramp) — at most once per flow window, usually far less.
- ``DestinationSample``: calls in flight and steps waiting, counted every few seconds by the
  live drains (executions/core/flow_history.py), one row per destination and period.

Both are written and purged only by executions/core/flow_history.py (and the trigger)."""

from __future__ import annotations

from django.db import models
from django.db.models.functions import Now


class DestinationLimit(models.Model):
    """The limit in force from ``created_at`` on (NULL: unlimited): flow.EFFECTIVE without
    the breaker's one probe."""

    destination = models.ForeignKey("executions.Destination", on_delete=models.CASCADE, related_name="+",
                                    db_index=False)
    limit = models.IntegerField(null=True)
    created_at = models.DateTimeField(db_default=Now())

    class Meta:
        indexes = [models.Index(fields=["destination", "-created_at"], name="limit_destination_recent")]

    def __str__(self) -> str:
        return f"{self.destination_id} {self.limit} at {self.created_at}"


class DestinationSample(models.Model):
    """A destination's slots in use and steps waiting, counted in the period starting ``at``."""

    destination = models.ForeignKey("executions.Destination", on_delete=models.CASCADE, related_name="+",
                                    db_index=False)
    at = models.DateTimeField()
    in_flight = models.IntegerField()
    waiting = models.IntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["at", "destination"], name="sample_one_per_period")]

    def __str__(self) -> str:
        return f"{self.destination_id} at {self.at}: {self.in_flight} in flight, {self.waiting} waiting"
