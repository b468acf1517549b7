"""A line logged while a drain runs a step carries that step's ids (LOG_FORMAT=json)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from schemabridge_site.logging import JsonFormatter
from tests.support import helpers


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.fixture
def engine_lines() -> Iterator[Lines]:
    handler = Lines()
    logger = logging.getLogger("executions.engine.runner")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield handler
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


@pytest.mark.parametrize("threads", [0, 2])
def test_a_failing_steps_log_line_names_its_execution_step_and_workspace(workspace, engine_lines, threads):
    helpers.publish(workspace, "child", helpers.FAIL_IF)
    execution = helpers.start(workspace, "child", {"fail": True})
    helpers.run_engine(threads=threads)
    entries = [json.loads(text) for text in engine_lines.lines]
    [raised] = [entry for entry in entries if "raised" in entry["message"]]
    assert raised["execution_id"] == str(execution.pk)
    assert raised["step"] == "t" and raised["step_id"] == helpers.step(execution, "t").pk
    assert raised["workspace"] == workspace.pk
    assert raised["level"] == "INFO" and raised["logger"] == "executions.engine.runner"
