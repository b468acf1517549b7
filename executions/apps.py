from django.apps import AppConfig


class ExecutionsConfig(AppConfig):
    name = "executions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from django_q.signals import post_spawn

        from executions import outbound, pgarrays, worker  # noqa: F401 - outbound registers a system check
        from executions.worker import runtime

        pgarrays.install()  # array parameters as literals at C speed (before any connection opens)

        post_spawn.connect(worker.on_worker_spawn, dispatch_uid="schemabridge-drain-on-spawn")
        runtime.install()  # before qcluster builds its queues: a SIGKILLed idle worker must not wedge them

        import os

        if os.environ.get("SB_COUNT_QUERIES_DIR"):
            from executions.worker import instrumentation

            instrumentation.install(os.environ["SB_COUNT_QUERIES_DIR"])
