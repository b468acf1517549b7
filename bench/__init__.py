"""Benchmarks (``manage.py bench``, ``bench_ui``) and fault-injection scenarios (``manage.py chaos``,
``bench/chaos/``): a Django app installed only with ``SB_DEMO=1``. See docs/performance.md and
docs/reliability.md."""
