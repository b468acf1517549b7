from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from django.apps import AppConfig

if TYPE_CHECKING:
    from executions.models import Destination, Execution
    from executions.ui.access import UiRequest
    from workflows.models import Workspace


class DemoConfig(AppConfig):
    """Registers the ``demo.*`` handlers and offers the product its two hooks
    (``executions.extensions``): the ledger switch on the Rate Limits page, and the demo
    workflows of ``make run``."""

    name = "demo"
    verbose_name = "Demo and fault injection (SB_DEMO=1)"

    def ready(self) -> None:
        from demo import handlers  # noqa: F401 - registers the demo.* TASK handlers

    def rate_limits_panel(self, request: UiRequest, destinations: Sequence[Destination]) -> str | None:
        from demo import views

        return views.ledger_switch_panel(request, destinations)

    def load_demo(self, workspace: Workspace, *, base_url: str) -> None:
        from demo import workflows

        workflows.load(workspace, base_url=base_url)

    def start_demo(self, workspace: Workspace, which: str) -> list[Execution]:
        from demo import workflows

        return workflows.start(workspace, which)
