"""``bench scale``: the fan-out at N = 1,000 / 10,000 / 100,000 — per-item cost (is it
linear?) and the workers' peak memory (is it flat?)."""

from __future__ import annotations

import sys
from typing import Any

from bench import fanout


def run(sizes: list[int], workers: int) -> dict[str, Any]:
    runs = [fanout.run(n, workers, timeout=1800) for n in sizes]
    rows = [{"items": r["items"], "seconds_total": r["seconds_total"],
             "ms_per_item": round(1000 * r["seconds_total"] / r["items"], 4),
             "children_per_s": r["children_per_s"], "peak_rss_mb": r["peak_rss_mb"], "ok": r["ok"]} for r in runs]
    by_size = {row["items"]: row for row in rows}
    checks: dict[str, Any] = {}
    if 10_000 in by_size and 100_000 in by_size:
        checks["cost_ratio_100k_vs_10k"] = round(by_size[100_000]["ms_per_item"] / by_size[10_000]["ms_per_item"], 3)
    if 1_000 in by_size and 100_000 in by_size:
        checks["peak_rss_growth_mb_1k_to_100k"] = round(by_size[100_000]["peak_rss_mb"] - by_size[1_000]["peak_rss_mb"],
                                                        1)
    sys.stderr.write(f"{'items':>9} {'seconds':>9} {'ms/item':>9} {'children/s':>11} {'peak MB':>8}\n")
    for row in rows:
        sys.stderr.write(f"{row['items']:>9,} {row['seconds_total']:>9.2f} {row['ms_per_item']:>9.4f} "
                         f"{row['children_per_s']:>11,.0f} {row['peak_rss_mb']:>8.1f}\n")
    ok = all(r["ok"] for r in rows)
    if "cost_ratio_100k_vs_10k" in checks:
        ok = ok and checks["cost_ratio_100k_vs_10k"] <= 1.5
    if "peak_rss_growth_mb_1k_to_100k" in checks:
        ok = ok and checks["peak_rss_growth_mb_1k_to_100k"] <= 50
    return {"workers": workers, "runs": rows, **checks, "ok": ok}
