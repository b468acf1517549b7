"""The execution view's Download links (issue 16 §5) in a real browser: all children and
failed only, as CSV and JSON Lines, through the operator's own session."""

import csv
import io
import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from tests.support import factories, helpers

pytest_plugins = ["tests.support.browser"]
pytestmark = [pytest.mark.e2e, pytest.mark.browser, pytest.mark.timeout(300)]


def download(page, export: str) -> tuple[str, str]:
    """Click a Download link; the file's suggested name and its text."""
    with page.expect_download() as info:
        page.locator(f"#children-downloads a[data-export='{export}']").click()
    file = info.value
    return file.suggested_filename, Path(file.path()).read_text()


def test_an_operator_downloads_all_and_failed_children(page, ui, operator):
    workspace = factories.default_workspace()
    parent = helpers.run_fanout(workspace, 30, failing=(4, 9, 17))
    ui.log_in(operator, next_path=f"/executions/{parent.pk}/")
    expect(page.locator("#children-downloads")).to_contain_text("Download children")

    name, text = download(page, "all-jsonl")
    rows = [json.loads(line) for line in text.splitlines()]
    assert name == f"children-{parent.pk}.jsonl"
    assert [row["index"] for row in rows] == list(range(30))
    assert sum(row["status"] == "FAILED" for row in rows) == 3

    name, text = download(page, "failed-csv")
    assert name == f"children-{parent.pk}-failed.csv"
    failed = list(csv.DictReader(io.StringIO(text)))
    assert [row["index"] for row in failed] == ["4", "9", "17"]
    assert all(row["status"] == "FAILED" and row["error"] for row in failed)

    name, text = download(page, "all-csv")
    assert name == f"children-{parent.pk}.csv" and len(list(csv.DictReader(io.StringIO(text)))) == 30
    name, text = download(page, "failed-jsonl")
    assert [json.loads(line)["index"] for line in text.splitlines()] == [4, 9, 17]
    ui.screenshot("execution-downloads")
