"""``bench baseline``: the same job done naively — one django-q2 ``async_task`` per item,
each writing its item durably and bumping a counting join — the way one would do a
fan-out with django-q2 alone."""

from __future__ import annotations

import time
import uuid
from typing import Any

from django.db import connection, transaction

from bench.common import Cluster, reset, wait_until

TABLES = """
    CREATE TABLE IF NOT EXISTS sb_bench_join (run text PRIMARY KEY, total int NOT NULL, done int NOT NULL DEFAULT 0,
                                              finished_at timestamptz);
    CREATE TABLE IF NOT EXISTS sb_bench_item (run text NOT NULL, item int NOT NULL, PRIMARY KEY (run, item));
"""


def item_task(run: str, item: int) -> None:
    """One child: a durable per-item row (idempotent) and the counting join."""
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute("INSERT INTO sb_bench_item (run, item) VALUES (%s, %s) ON CONFLICT DO NOTHING", [run, item])
        if cursor.rowcount:
            cursor.execute("UPDATE sb_bench_join SET done = done + 1, "
                           "finished_at = CASE WHEN done + 1 >= total THEN now() END WHERE run = %s", [run])


def run(items: int, workers: int, *, timeout: float = 1800.0) -> dict[str, Any]:
    from django_q.tasks import async_task

    reset()
    with connection.cursor() as cursor:
        cursor.execute(TABLES)
        cursor.execute("TRUNCATE sb_bench_join, sb_bench_item")
    run_id = uuid.uuid4().hex
    with connection.cursor() as cursor:
        cursor.execute("INSERT INTO sb_bench_join (run, total) VALUES (%s, %s)", [run_id, items])
    cluster = Cluster(workers).start()
    try:
        started = time.monotonic()
        for item in range(items):
            async_task("bench.baseline.item_task", run_id, item)

        def check() -> tuple[bool, int]:
            with connection.cursor() as cursor:
                cursor.execute("SELECT done, finished_at IS NOT NULL FROM sb_bench_join WHERE run = %s", [run_id])
                done, finished = cursor.fetchone()
            return finished, done

        wait_until(check, total=items, label=f"baseline {items:,}", timeout=timeout)
        seconds_total = time.monotonic() - started
        time.sleep(1.5)
        queries = cluster.queries()
        peak = cluster.peak_rss_mb()
    finally:
        cluster.stop()
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*), count(DISTINCT item) FROM sb_bench_item WHERE run = %s", [run_id])
        children, distinct = cursor.fetchone()
    return {
        "items": items,
        "workers": workers,
        "seconds_total": round(seconds_total, 3),
        "seconds_spawn": None,
        "children_per_s": round(items / seconds_total, 1),
        "peak_rss_mb": peak,
        "queries_per_child": round(queries / items, 3) if items else 0.0,
        "children": children,
        "distinct_keys": distinct,
        "ok": children == distinct == items,
    }
