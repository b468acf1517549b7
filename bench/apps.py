from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Benchmarks and fault-injection scenarios (``manage.py bench``, ``bench_ui``,
    ``chaos``); installed only with ``SB_DEMO=1``, next to the demo handlers they run."""

    name = "bench"
    verbose_name = "Benchmarks and chaos (SB_DEMO=1)"
