import os

from django.apps import AppConfig


class BenchConfig(AppConfig):
    """Benchmarks and fault-injection scenarios (``manage.py bench``, ``bench_ui``,
    ``chaos``); installed only with ``SB_DEMO=1``, next to the demo handlers they run."""

    name = "bench"
    verbose_name = "Benchmarks and chaos (SB_DEMO=1)"

    def ready(self) -> None:
        # A benchmark's worker processes count their statements (bench/instrumentation.py);
        # the product itself carries no benchmark code.
        if os.environ.get("SB_COUNT_QUERIES_DIR"):
            from bench import instrumentation

            instrumentation.install(os.environ["SB_COUNT_QUERIES_DIR"])
