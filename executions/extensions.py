"""Hooks through which optional apps add to the product without the product importing them.

An installed app's ``AppConfig`` implements one of these protocols; the product asks the
installed apps for it. Today the only such app is ``demo`` (installed with ``SB_DEMO=1``):
it adds its ledger switch to the Rate Limits page and its workflows to ``make run``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from django.apps import apps

if TYPE_CHECKING:
    from django.http import HttpRequest

    from executions.models import Destination, Execution
    from workflows.models import Workspace


@runtime_checkable
class RateLimitsPanel(Protocol):
    def rate_limits_panel(self, request: HttpRequest, destinations: Sequence[Destination]) -> str | None:
        """The HTML of a panel shown above the destinations table, or None to show none
        (``request`` is the UI's: executions.ui.access.UiRequest)."""


@runtime_checkable
class LocalDemo(Protocol):
    def load_demo(self, workspace: Workspace, *, base_url: str) -> None:
        """Publish the demo's workflows and destinations in ``workspace`` (idempotent);
        ``base_url`` is where the local web server answers."""

    def start_demo(self, workspace: Workspace, which: str) -> list[Execution]:
        """Start the demo executions ``which`` names (``all``, ``hello`` or ``none``)."""


def rate_limits_panels() -> list[RateLimitsPanel]:
    return [config for config in apps.get_app_configs() if isinstance(config, RateLimitsPanel)]


def local_demo() -> LocalDemo | None:
    """The installed app that offers ``make run`` a demo, if any."""
    return next((config for config in apps.get_app_configs() if isinstance(config, LocalDemo)), None)
