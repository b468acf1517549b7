"""`manage.py bench --help` (and each benchmark's own --help) prints its help."""

from __future__ import annotations

import pytest
from django.core.management import call_command

BENCHMARKS = ["fanout", "floor", "baseline", "redelivery", "scale", "ui", "cluster", "destination", "flow", "fairness",
              "steps", "callbacks"]


@pytest.mark.parametrize("args", [["--help"], *[[name, "--help"] for name in BENCHMARKS]])
def test_the_help_of_every_benchmark_prints(args, capsys):
    with pytest.raises(SystemExit) as exited:
        call_command("bench", *args)
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert "usage:" in out
    if args == ["--help"]:
        assert all(name in out for name in BENCHMARKS)
