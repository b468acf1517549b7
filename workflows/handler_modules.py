"""Importing the TASK handler packages at start-up (docs/dsl.md, "Handler packages").

Handlers register themselves when their module is imported (``@handler("billing.charge")``),
so every process that validates or runs a workflow — web (publish-time validation), workers,
commands — must import the same modules before it serves anything: those named by the
setting ``SB_HANDLER_MODULES`` and the ``sb_handlers`` module of every installed app.

A module that fails to import stops the process with its name (ImproperlyConfigured): a
missing handler must not surface later as a publish refusal or as failed steps.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import import_module

from django.apps import apps
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.utils.module_loading import module_has_submodule

AUTODISCOVERED = "sb_handlers"


def handler_modules() -> list[str]:
    """Every module to import, in order: each installed app's ``sb_handlers`` (if it has
    one), then ``SB_HANDLER_MODULES`` as configured."""
    discovered = [f"{app.name}.{AUTODISCOVERED}" for app in apps.get_app_configs()
                  if module_has_submodule(app.module, AUTODISCOVERED)]
    return [*discovered, *_configured(getattr(settings, "SB_HANDLER_MODULES", []))]


def _configured(value: str | Iterable[str]) -> list[str]:
    names = value.split(",") if isinstance(value, str) else list(value)
    return [name.strip() for name in names if name.strip()]


def load_handler_modules() -> list[str]:
    """Import every handler module (see ``handler_modules``; what
    ``django.utils.module_loading.autodiscover_modules`` does, but naming the module that
    failed). Returns the modules imported; raises ImproperlyConfigured naming the first one
    that cannot be imported, with its error chained."""
    modules = handler_modules()
    for name in modules:
        try:
            import_module(name)
        except Exception as error:  # any error while importing user code stops start-up, named
            raise ImproperlyConfigured(
                f"TASK handler module {name!r} failed to import: {type(error).__name__}: {error} "
                "(SB_HANDLER_MODULES, or an installed app's sb_handlers module)"
            ) from error
    return modules
