"""LOG_FORMAT=json (issue 17): one JSON object per line, with the execution, step and
workspace a line is about where they are known."""

from __future__ import annotations

import json
import logging
import sys
import threading
import uuid

from executions.platform import logcontext
from schemabridge_site import logging as logs


def line(message: str = "hello %s", args: tuple[object, ...] = ("world",), exc_info: object = None,
         **extra: object) -> dict[str, object]:
    record = logging.LogRecord("executions.worker", logging.WARNING, __file__, 1, message, args,
                               exc_info)  # type: ignore[arg-type]
    for key, value in extra.items():
        setattr(record, key, value)
    text = logs.JsonFormatter().format(record)
    assert "\n" not in text, "one line per record"
    return json.loads(text)


def test_a_plain_line_has_time_level_logger_and_message():
    entry = line()
    assert entry.pop("time").endswith("+00:00")  # type: ignore[union-attr]
    assert entry == {"level": "WARNING", "logger": "executions.worker", "message": "hello world"}


def test_a_line_inside_a_step_context_carries_its_ids():
    class Run:
        step_id = 42
        vertex = type("Vertex", (), {"id": "fetch"})()
        execution = type("Execution", (), {"id": uuid.UUID(int=7), "workspace_id": 3})()

    with logcontext.step_context(Run()):
        entry = line()
    assert entry["execution_id"] == str(uuid.UUID(int=7))
    assert (entry["step"], entry["step_id"], entry["workspace"]) == ("fetch", 42, 3)
    assert "execution_id" not in line(), "the context ends with the block"


def test_contexts_nest_and_explicit_fields_win():
    with logcontext.context(workspace=1, execution_id="outer"), logcontext.context(execution_id="inner"):
        assert line()["execution_id"] == "inner"
        assert line()["workspace"] == 1
        assert line(execution_id="given")["execution_id"] == "given"


def test_each_thread_has_its_own_context():
    seen: list[dict[str, object]] = []
    with logcontext.context(step="main"):
        thread = threading.Thread(target=lambda: seen.append(line()))
        thread.start()
        thread.join()
    assert "step" not in seen[0]


def test_an_exception_goes_into_the_same_line():
    try:
        raise ValueError("bad value\nsecond line")
    except ValueError:
        entry = line("failed", (), exc_info=sys.exc_info())
    assert entry["message"] == "failed"
    assert "ValueError: bad value" in str(entry["exception"]) and "Traceback" in str(entry["exception"])


def test_values_that_are_not_json_are_written_as_text():
    entry = line("%s", (object(),), execution_id=uuid.UUID(int=1))
    assert entry["execution_id"] == str(uuid.UUID(int=1))


def test_log_format_selects_the_formatter():
    assert logs.formatter_config("json") == {"()": "schemabridge_site.logging.JsonFormatter"}
    assert logs.formatter_config(" JSON ") == {"()": "schemabridge_site.logging.JsonFormatter"}
    assert "format" in logs.formatter_config("")
    assert "format" in logs.formatter_config("text")
