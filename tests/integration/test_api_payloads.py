"""Issue 14 §7: the execution detail never inlines an input or output larger than 64 KB (a
preview and its size instead); ``/input`` and ``/output`` stream the whole, and a MERGE's
items are read in pages."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.http import StreamingHttpResponse

from tests.support import helpers
from tests.support.clients import api, ok, problem

pytestmark = pytest.mark.django_db

ECHO = {"start": "t", "vertices": {"t": {"type": "TASK", "handler": "demo.echo", "input": "$.input"}}}
BIG = {"items": [{"i": i, "text": "x" * 40} for i in range(3000)], "note": "big"}  # ~160 KB


def streamed(response: Any) -> Any:
    assert response.status_code == 200, response.content
    assert isinstance(response, StreamingHttpResponse), "the whole payload is streamed, not built in memory"
    assert response["Content-Type"].startswith("application/json")
    return json.loads(b"".join(response.streaming_content))


def test_a_large_input_and_output_are_previewed_with_their_size_and_streamed_whole(workspace: Any) -> None:
    helpers.publish(workspace, "echo", ECHO)
    execution = helpers.start(workspace, "echo", BIG)
    helpers.run_engine()
    client = api(workspace, "viewer")
    body = ok(client.get(f"/api/v1/executions/{execution.pk}"))
    size = len(json.dumps(BIG, separators=(",", ":")).encode())
    for name in ("input", "output"):
        assert body[name] is None, f"a {size:,}-byte {name} is not inlined"
        assert body[f"{name}_size_bytes"] >= 64 * 1024
        assert body[f"{name}_inlined"] is False
        preview = body[f"{name}_preview"]
        assert preview and len(preview) < 8 * 1024 and '"items"' in preview and "3,000 items" in preview
        assert streamed(client.get(f"/api/v1/executions/{execution.pk}/{name}")) == BIG


def test_a_small_input_is_inlined_and_streams_too(workspace: Any) -> None:
    helpers.publish(workspace, "echo", ECHO)
    execution = helpers.start(workspace, "echo", {"a": [1, 2, {"b": None}], "s": "é\"\\"})
    client = api(workspace, "viewer")
    body = ok(client.get(f"/api/v1/executions/{execution.pk}"))
    assert body["input"] == {"a": [1, 2, {"b": None}], "s": "é\"\\"}
    assert body["input_inlined"] is True and body["input_preview"] is None and body["input_size_bytes"] > 0
    assert body["output"] is None and body["output_size_bytes"] is None
    assert streamed(client.get(f"/api/v1/executions/{execution.pk}/input")) == body["input"]
    missing = problem(client.get(f"/api/v1/executions/{execution.pk}/output"), 404)
    assert "no output" in missing["detail"]


@pytest.mark.parametrize("value", [[], [1, [2, 3], {"x": "y"}], "text", 7, None, {}, {"k": []}])
def test_every_shape_streams_back_as_it_was_stored(workspace: Any, value: Any) -> None:
    helpers.publish(workspace, "echo", ECHO)
    execution = helpers.start(workspace, "echo", value)
    assert streamed(api(workspace, "viewer").get(f"/api/v1/executions/{execution.pk}/input")) == value
