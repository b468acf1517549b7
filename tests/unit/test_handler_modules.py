"""Handler packages (issue 16 §1): SB_HANDLER_MODULES and each app's ``sb_handlers`` are
imported at start-up; a module that fails to import stops start-up with its name."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.test import override_settings

from workflows import handlers
from workflows.handler_modules import handler_modules, load_handler_modules

ROOT = Path(__file__).resolve().parents[2]


def test_the_configured_modules_follow_the_autodiscovered_ones() -> None:
    with override_settings(SB_HANDLER_MODULES=["a.b", " c "]):
        assert handler_modules()[-2:] == ["a.b", "c"]
    with override_settings(SB_HANDLER_MODULES="x.y, z"):  # a string, as from a .env-style override
        assert handler_modules()[-2:] == ["x.y", "z"]


def test_a_module_that_fails_to_import_is_named() -> None:
    with override_settings(SB_HANDLER_MODULES=["json", "no_such_package.handlers"]), \
            pytest.raises(ImproperlyConfigured, match=r"'no_such_package\.handlers' failed to import"):
        load_handler_modules()


def test_a_module_that_raises_while_importing_is_named(tmp_path: Path, monkeypatch: Any) -> None:
    (tmp_path / "broken_handlers.py").write_text("raise RuntimeError('no API key configured')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with override_settings(SB_HANDLER_MODULES=["broken_handlers"]), \
            pytest.raises(ImproperlyConfigured, match=r"'broken_handlers'.*RuntimeError: no API key configured"):
        load_handler_modules()


def test_async_handlers_are_registered_as_coroutine_functions() -> None:
    @handlers.handler("unit.async_probe")
    async def probe(data: Any, context: handlers.HandlerContext) -> Any:
        return data

    try:
        assert handlers.registry["unit.async_probe"] is probe
        assert asyncio.iscoroutinefunction(handlers.registry["unit.async_probe"])
    finally:
        del handlers.registry["unit.async_probe"]


def test_the_environment_variable_is_imported_by_every_process_at_start_up(tmp_path: Path) -> None:
    """``manage.py check`` stands for any process: django.setup() runs the loader."""
    (tmp_path / "env_handlers.py").write_text(
        "from executions.handlers import handler\n\n@handler('env.loaded')\ndef loaded(data, context):\n"
        "    return data\n")
    env = {**os.environ, "SB_HANDLER_MODULES": "env_handlers", "PYTHONPATH": str(tmp_path),
           "DJANGO_SETTINGS_MODULE": "schemabridge_site.test_settings"}
    code = ("import django; django.setup(); from executions.handlers import registry; "
            "print('env.loaded' in registry)")
    ok = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert ok.stdout.strip().endswith("True"), ok.stderr
    env["SB_HANDLER_MODULES"] = "env_handlers,missing_handlers"
    broken = subprocess.run([sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True,
                            text=True, timeout=120)
    assert broken.returncode != 0
    assert "TASK handler module 'missing_handlers' failed to import" in broken.stderr
